"""The store is its slices composed: a slice brings its interface, its SQL, its restore and its
error codes, and the shared machinery (transactions, the config version, the audit log, the
restore) finds them in whatever class composes it.

A tiny slice defined here (notes, in a table the test creates) is composed with the project's
store on both backends without editing any project file, and reads, writes, audits and
restores through that machinery; the project's own composition is checked slice by slice.
"""

from __future__ import annotations

import ast
import inspect
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from importlib import import_module
from pathlib import Path
from typing import Protocol

import pytest

from api.controlplane import resources
from api.controlplane.changes import Actor, AuditRecord
from api.controlplane.errors import CodeCatalogue, ConflictError, ConflictReason
from api.controlplane.model import Plan
from api.controlplane.postgres_store import PostgresControlPlaneStore
from api.controlplane.resources.audit import AuditCode, Restore, restorer_names, restores
from api.controlplane.resources.flags import FlagCode
from api.controlplane.sql_backend import Connection
from api.controlplane.sql_slice import SqlSlice
from api.controlplane.sqlite_store import SqliteControlPlaneStore
from api.controlplane.store import ControlPlaneStore, ErrorCode, SqlControlPlaneStore

# -- a slice from outside the project -------------------------------------------------------

NOTES_TABLE = (
    "CREATE TABLE notes (organization_id TEXT NOT NULL, key TEXT NOT NULL,"
    " body TEXT NOT NULL, PRIMARY KEY (organization_id, key))"
)


class NoteCode(StrEnum):
    NOTE_ALREADY_AS_IT_WAS = "note_already_as_it_was"


@dataclass(frozen=True)
class Note:
    organization_id: str
    key: str
    body: str


def _document(note: Note | None) -> dict | None:
    return None if note is None else {"key": note.key, "body": note.body}


class NoteStore(Protocol):
    def put_note(
        self, organization_id: str, key: str, body: str, *, actor: str = Actor.SYSTEM
    ) -> Note: ...

    def get_note(self, organization_id: str, key: str) -> Note | None: ...


class NoteSql(SqlSlice):
    codes = NoteCode

    def put_note(
        self, organization_id: str, key: str, body: str, *, actor: str = Actor.SYSTEM
    ) -> Note:
        with self._transaction(write=True) as conn:
            self._require_organization(conn, organization_id)  # the organizations slice's
            self._write_note(conn, organization_id, key, body, actor=actor, action="note.put")
        return Note(organization_id, key, body)

    def get_note(self, organization_id: str, key: str) -> Note | None:
        row = self._fetchone(
            "SELECT * FROM notes WHERE organization_id = ? AND key = ?", (organization_id, key)
        )
        return None if row is None else Note(organization_id, key, row["body"])

    @staticmethod
    def _note_in(conn: Connection, organization_id: str, key: str) -> Note | None:
        row = conn.execute(
            "SELECT body FROM notes WHERE organization_id = ? AND key = ?", (organization_id, key)
        ).fetchone()
        return None if row is None else Note(organization_id, key, row["body"])

    def _write_note(
        self, conn: Connection, organization_id: str, key: str, body: str | None, *,
        actor: str, action: str, restored_from: str | None = None,
    ) -> AuditRecord:  # fmt: skip
        """Put (or, with ``body`` None, delete) the note; bump the version; audit it."""
        before = self._note_in(conn, organization_id, key)
        if body is None:
            conn.execute(
                "DELETE FROM notes WHERE organization_id = ? AND key = ?", (organization_id, key)
            )
        else:
            conn.execute(
                "INSERT INTO notes VALUES (?, ?, ?)"
                " ON CONFLICT (organization_id, key) DO UPDATE SET body = excluded.body",
                (organization_id, key, body),
            )
        self._bump(conn)
        after = None if body is None else Note(organization_id, key, body)
        return self._audit(
            conn, organization_id, actor, action, f"note:{organization_id}/{key}",
            _document(before), _document(after), restored_from,
        )  # fmt: skip

    @restores("note")
    def _restore_note(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        organization_id, _, key = ident.partition("/")
        body = None if record.before is None else record.before["body"]
        current = self._note_in(conn, organization_id, key)
        if (None if current is None else current.body) == body:
            raise ConflictError(
                NoteCode.NOTE_ALREADY_AS_IT_WAS, ConflictReason.NOTHING_TO_RESTORE, note=key
            )
        return lambda actor: self._write_note(
            conn, organization_id, key, body, actor=actor, action="restore",
            restored_from=record.id,
        )  # fmt: skip


class NotedControlPlaneStore(NoteStore, ControlPlaneStore, Protocol):
    """The interface composed with the slice, as the project's composes its own."""


class NotedSqlite(NoteSql, SqliteControlPlaneStore):
    pass


class NotedPostgres(NoteSql, PostgresControlPlaneStore):
    pass


@pytest.fixture
def noted(
    backend: str, store_path: Path, request: pytest.FixtureRequest
) -> Iterator[NotedSqlite | NotedPostgres]:
    """The store with the notes slice, on the database ``open_store`` opens too."""
    if backend == "sqlite":
        store: NotedSqlite | NotedPostgres = NotedSqlite(store_path)
    else:
        store = NotedPostgres(request.getfixturevalue("postgres_url"))
    with store.backend.transaction(write=True) as conn:
        conn.execute(NOTES_TABLE)
    yield store
    store.close()


def test_a_slice_from_a_test_module_reads_writes_audits_and_restores(noted) -> None:
    org = noted.create_organization("Acme", Plan.PRO)
    version = noted.config_version()
    noted.put_note(org.id, "hello", "first", actor=Actor.ADMIN_API)
    noted.put_note(org.id, "hello", "second", actor=Actor.ADMIN_API)
    assert noted.get_note(org.id, "hello") == Note(org.id, "hello", "second")
    assert noted.config_version() == version + 2
    changed, created = noted.list_audit(org.id)[:2]
    assert (changed.action, changed.target, changed.before, changed.after) == (
        "note.put", f"note:{org.id}/hello", {"key": "hello", "body": "first"},
        {"key": "hello", "body": "second"},
    )  # fmt: skip
    assert (created.before, changed.actor) == (None, "admin-api")

    restore = noted.restore(changed.id, actor=Actor.DASHBOARD)
    assert noted.get_note(org.id, "hello").body == "first"
    assert (restore.action, restore.restored_from, restore.after["body"]) == (
        "restore", changed.id, "first",
    )  # fmt: skip
    assert noted.list_audit(org.id)[0] == restore
    with pytest.raises(ConflictError) as again:
        noted.restore(changed.id)
    assert (again.value.code, again.value.reason) == (
        NoteCode.NOTE_ALREADY_AS_IT_WAS, ConflictReason.NOTHING_TO_RESTORE,
    )  # fmt: skip
    judged = noted.restore_refusals([changed, created])  # the same checks, writing nothing
    assert {i: e.code for i, e in judged.items()} == {changed.id: again.value.code}
    noted.restore(created.id)  # the creation undone: deleted
    assert noted.get_note(org.id, "hello") is None


def test_the_store_without_the_slice_has_no_restore_for_its_records(noted, open_store) -> None:
    org = noted.create_organization("Acme", Plan.PRO)
    noted.put_note(org.id, "hello", "first")
    [record] = [r for r in noted.list_audit(org.id) if r.action == "note.put"]
    plain = open_store()  # the same database, the project's composition only
    with pytest.raises(ConflictError) as refused:
        plain.restore(record.id)
    assert (refused.value.code, refused.value.reason) == (
        AuditCode.KIND_HAS_NO_RESTORE, ConflictReason.NOT_RESTORABLE,
    )  # fmt: skip
    assert set(plain.restore_refusals([record])) == {record.id}
    assert set(noted.restore_refusals([record])) == set()


def test_a_slices_codes_join_its_composition_only() -> None:
    assert NoteCode.NOTE_ALREADY_AS_IT_WAS in CodeCatalogue.of(NotedSqlite)
    assert CodeCatalogue.of(NotedSqlite).NOTE_ALREADY_AS_IT_WAS is NoteCode.NOTE_ALREADY_AS_IT_WAS
    assert NoteCode.NOTE_ALREADY_AS_IT_WAS not in ErrorCode
    assert set(CodeCatalogue.of(NotedSqlite)) == set(ErrorCode) | set(NoteCode)


def test_the_composed_sql_implements_the_composed_interface() -> None:
    _assert_implements(NotedSqlite, NotedControlPlaneStore)


# -- the project's own composition ------------------------------------------------------------

RESTORED_BY = {
    "organization": "organizations",
    "environment": "environments",
    "apiKey": "api_keys",
    "segment": "segments",
    "flag": "flags",
    "schedule": "schedules",
    "rollout": "rollouts",
    "webhook": "webhooks",
    "metric": "metrics",
    "flagMetrics": "metrics",
}
"""Each audit target kind the store writes, and the slice whose restorer puts it back."""

KEPT_CODES = {
    "unavailable", "organization_not_found", "environment_not_found", "api_key_not_found",
    "live_api_key_not_found", "segment_not_found", "flag_not_found", "schedule_not_found",
    "pending_schedule_not_found", "rollout_not_found", "webhook_not_found",
    "audit_record_not_found", "environment_key_taken", "segment_in_use", "no_percentage_rule",
    "kind_has_no_restore", "organizations_never_deleted", "environments_never_deleted",
    "webhook_secret_not_kept", "segment_members_not_kept", "schedule_applied",
    "schedule_due_time_passed", "flag_still_absent", "segment_still_absent",
    "webhook_still_absent", "rollout_still_absent", "rollout_flag_gone",
    "api_key_already_revoked", "api_key_not_revoked", "schedule_failed",
    "schedule_already_cancelled", "schedule_not_cancelled", "monthly_limit_out_of_range",
    "monthly_limit_fixed_by_plan", "monthly_limit_required", "environment_key_malformed",
    "flag_key_malformed", "segment_key_malformed", "segment_too_large", "unknown_segment",
}  # fmt: skip
"""The codes failed schedules keep in the database and the admin API words: never changed."""


def _slice_modules() -> list[str]:
    return [f"{resources.__name__}.{m.name}" for m in pkgutil.iter_modules(resources.__path__)]


def test_each_kind_is_restored_by_its_slice_found_by_registration() -> None:
    found = restorer_names(SqlControlPlaneStore)
    restored_by = {
        kind: getattr(SqlControlPlaneStore, name).__module__.rpartition(".")[2]
        for kind, name in found.items()
    }
    assert restored_by == RESTORED_BY


def test_every_slice_is_composed_once_into_the_interface_and_the_sql() -> None:
    interface, sql = set(ControlPlaneStore.__mro__), set(SqlControlPlaneStore.__mro__)
    for name in _slice_modules():
        module = import_module(name)
        mine = [c for c in vars(module).values() if inspect.isclass(c) and c.__module__ == name]
        protocols = [c for c in mine if getattr(c, "_is_protocol", False)]
        mixins = [c for c in mine if issubclass(c, SqlSlice)]
        assert len(protocols) == len(mixins) == 1, name
        assert protocols[0] in interface and mixins[0] in sql, name


def test_no_slice_imports_the_catalogue_of_every_code() -> None:
    """``store.ErrorCode`` is the composition's: a slice that imported it would import the
    composition while being composed."""
    for name in _slice_modules():
        tree = ast.parse(Path(import_module(name).__file__).read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    for a in n.names}  # fmt: skip
        assert "ErrorCode" not in imported, name


def test_the_sql_implements_every_method_of_the_interface() -> None:
    _assert_implements(SqlControlPlaneStore, ControlPlaneStore)


def test_the_codes_kept_and_worded_keep_their_values() -> None:
    assert {str(code) for code in ErrorCode} >= KEPT_CODES
    assert ErrorCode.FLAG_NOT_FOUND is FlagCode.FLAG_NOT_FOUND  # what the slice raises, itself


def test_two_slices_may_not_claim_one_kind_or_one_code() -> None:
    class OtherFlags(SqlSlice):
        @restores("flag")
        def _restore_flag_otherwise(self, conn, record, ident) -> Restore: ...

    class Twice(OtherFlags, SqlControlPlaneStore):
        pass

    with pytest.raises(TypeError, match="both restore flag"):
        restorer_names(Twice)

    class Again(StrEnum):
        FLAG_GONE = "flag_not_found"

    with pytest.raises(ValueError, match="defined twice"):
        CodeCatalogue(*{type(code) for code in ErrorCode}, Again)


def _assert_implements(sql: type, interface: type) -> None:
    """Every method ``interface`` declares, ``sql`` has, with the same parameters."""
    declared = {
        name
        for klass in interface.__mro__
        if getattr(klass, "_is_protocol", False) and klass.__module__ != "typing"
        for name, value in vars(klass).items()
        if callable(value) and not name.startswith("_")
    }
    assert declared, interface
    for name in sorted(declared):
        wanted = inspect.signature(getattr(interface, name)).parameters
        assert list(inspect.signature(getattr(sql, name)).parameters) == list(wanted), name
