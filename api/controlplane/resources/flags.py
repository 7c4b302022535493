"""The flags slice: its codes, its part of the store, its SQL and its restore.

A flag belongs to an environment: enabled, archived, its rules, and its lifecycle metadata
(``FlagMeta``: kind, owner, expiry). Every path that changes a flag (admin API, dashboard,
rollout, schedule, restore) writes it through ``_write_flag``: its segments checked, the
version bumped, the change audited and ``flag.changed`` queued, in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

import msgspec
from flagsight_core import Rule, rule_from_json, rule_to_json
from flagsight_core.contract import KEY_PATTERN

from api.controlplane import documents
from api.controlplane.changes import Actor, AuditRecord, EventType
from api.controlplane.errors import (
    ConflictError,
    ConflictReason,
    InvalidError,
    NotFoundError,
    Resource,
)
from api.controlplane.model import DEFAULT_META, Environment, FlagKind, FlagMeta, FlagRecord
from api.controlplane.resources.audit import Restore, restores
from api.controlplane.sql_backend import Connection, Row
from api.controlplane.sql_slice import SqlSlice


class FlagCode(StrEnum):
    FLAG_NOT_FOUND = "flag_not_found"
    """``NotFoundError``: details["identifier"] is the key the caller gave."""
    FLAG_STILL_ABSENT = "flag_still_absent"
    """A restore that would change nothing (``ConflictReason.NOTHING_TO_RESTORE``)."""
    # InvalidError: details["field"] is the store's field at fault
    FLAG_KEY_MALFORMED = "flag_key_malformed"
    UNKNOWN_SEGMENT = "unknown_segment"
    """The rule at ``index`` names ``segment``, which the organization does not have."""


def flag_of(row: Row) -> FlagRecord:
    return FlagRecord(
        row["environment_id"],
        row["key"],
        bool(row["enabled"]),
        bool(row["archived"]),
        tuple(rule_from_json(raw) for raw in msgspec.json.decode(row["rules"])),
        row["updated_at"],
        FlagMeta(FlagKind(row["kind"]), row["owner"], row["expires_at"]),
    )


class FlagStore(Protocol):
    def put_flag(
        self,
        environment_id: str,
        key: str,
        enabled: bool,
        archived: bool,
        rules: Sequence[Rule],
        *,
        meta: FlagMeta | None = None,
        actor: str = Actor.SYSTEM,
    ) -> tuple[FlagRecord, bool]:
        """Create or replace. Returns the flag and whether it was created. ``meta`` None keeps
        the flag's lifecycle metadata as it is (the defaults for a new flag)."""
        ...

    def get_flag(self, environment_id: str, key: str) -> FlagRecord | None: ...

    def list_flags(self, environment_id: str) -> list[FlagRecord]: ...

    def delete_flag(self, environment_id: str, key: str, *, actor: str = Actor.SYSTEM) -> None:
        """Its rollout goes with it."""
        ...


class FlagSql(SqlSlice):
    """Flags in SQL (see ``FlagStore``)."""

    codes = FlagCode

    def put_flag(
        self,
        environment_id: str,
        key: str,
        enabled: bool,
        archived: bool,
        rules: Sequence[Rule],
        *,
        meta: FlagMeta | None = None,
        actor: str = Actor.SYSTEM,
    ) -> tuple[FlagRecord, bool]:
        if not KEY_PATTERN.fullmatch(key):
            raise InvalidError(FlagCode.FLAG_KEY_MALFORMED, "key", value=key)
        with self._transaction(write=True) as conn:
            before = self._flag_in(conn, environment_id, key)
            if meta is None:
                meta = before.meta if before else DEFAULT_META
            flag = FlagRecord(
                environment_id, key, bool(enabled), bool(archived), tuple(rules), self._now(),
                meta,
            )  # fmt: skip
            action = "flag.created" if before is None else "flag.updated"
            self._write_flag(conn, flag, actor=actor, action=action)
        return flag, before is None

    def _flag_in(self, conn: Connection, environment_id: str, key: str) -> FlagRecord | None:
        row = conn.execute(
            "SELECT * FROM flags WHERE environment_id = ? AND key = ?", (environment_id, key)
        ).fetchone()
        return flag_of(row) if row else None

    def _write_flag(
        self,
        conn: Connection,
        flag: FlagRecord,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Create or replace ``flag`` inside the caller's write transaction: check its
        segments, bump the version, audit the change and queue ``flag.changed``. Every path
        that changes a flag (admin API, dashboard, rollout, schedule, restore) comes here."""
        environment = self._require_environment(conn, flag.environment_id)
        self._check_segments_exist(conn, environment.organization_id, flag.rules)
        before = self._flag_in(conn, flag.environment_id, flag.key)
        rules_text = msgspec.json.encode([rule_to_json(rule) for rule in flag.rules]).decode()
        version = self._bump(conn)
        conn.execute(
            "INSERT INTO flags (environment_id, key, enabled, archived, rules, updated_at,"
            " version, kind, owner, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (environment_id, key) DO UPDATE SET enabled = excluded.enabled,"
            " archived = excluded.archived, rules = excluded.rules,"
            " updated_at = excluded.updated_at, version = excluded.version,"
            " kind = excluded.kind, owner = excluded.owner, expires_at = excluded.expires_at",
            (flag.environment_id, flag.key, bool(flag.enabled), bool(flag.archived), rules_text,
             flag.updated_at, version, str(flag.meta.kind), flag.meta.owner,
             flag.meta.expires_at),
        )  # fmt: skip
        conn.execute(
            "UPDATE environments SET version = ? WHERE id = ?", (version, flag.environment_id)
        )
        return self._flag_changed(
            conn, environment, flag.key, before, flag, actor, action, restored_from
        )

    def _flag_changed(
        self,
        conn: Connection,
        environment: Environment,
        key: str,
        before: FlagRecord | None,
        after: FlagRecord | None,
        actor: str,
        action: str,
        restored_from: str | None,
    ) -> AuditRecord:
        before_doc = documents.flag(before) if before else None
        after_doc = documents.flag(after) if after else None
        record = self._audit(
            conn, environment.organization_id, actor, action, f"flag:{environment.id}/{key}",
            before_doc, after_doc, restored_from,
        )  # fmt: skip
        self._emit(
            conn, environment.organization_id, EventType.FLAG_CHANGED,
            {"environmentId": environment.id, "environmentKey": environment.key,
             "flagKey": key, "actor": str(actor), "action": action, "auditId": record.id,
             "before": before_doc, "after": after_doc},
        )  # fmt: skip
        return record

    @staticmethod
    def _check_segments_exist(
        conn: Connection, organization_id: str, rules: Sequence[Rule]
    ) -> None:
        """Every segment a rule names exists (a SEGMENT rule's, a PERCENTAGE rule's within a
        segment: any rule's ``segment``, as ``ruleset.named_segments`` reads it)."""
        for index, rule in enumerate(rules):
            segment = getattr(rule, "segment", None)
            if not isinstance(segment, str):
                continue
            found = conn.execute(
                "SELECT 1 FROM segments WHERE organization_id = ? AND key = ?",
                (organization_id, segment),
            ).fetchone()
            if not found:
                raise InvalidError(FlagCode.UNKNOWN_SEGMENT, "rules", index=index, segment=segment)

    def get_flag(self, environment_id: str, key: str) -> FlagRecord | None:
        row = self._fetchone(
            "SELECT * FROM flags WHERE environment_id = ? AND key = ?", (environment_id, key)
        )
        return flag_of(row) if row else None

    def list_flags(self, environment_id: str) -> list[FlagRecord]:
        rows = self._fetchall(
            "SELECT * FROM flags WHERE environment_id = ? ORDER BY key", (environment_id,)
        )
        return [flag_of(row) for row in rows]

    def delete_flag(self, environment_id: str, key: str, *, actor: str = Actor.SYSTEM) -> None:
        with self._transaction(write=True) as conn:
            self._delete_flag(conn, environment_id, key, actor=actor, action="flag.deleted")

    def _delete_flag(
        self,
        conn: Connection,
        environment_id: str,
        key: str,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Delete inside the caller's transaction; its rollout and its metrics' follows go too."""
        environment = self._require_environment(conn, environment_id)
        before = self._flag_in(conn, environment_id, key)
        if before is None:
            raise NotFoundError(FlagCode.FLAG_NOT_FOUND, Resource.FLAG, key)
        conn.execute(
            "DELETE FROM flags WHERE environment_id = ? AND key = ?", (environment_id, key)
        )
        conn.execute(
            "DELETE FROM rollouts WHERE environment_id = ? AND flag_key = ?", (environment_id, key)
        )
        self._drop_flag_follows(conn, environment_id, key)  # the metrics it followed
        conn.execute(
            "UPDATE environments SET version = ? WHERE id = ?", (self._bump(conn), environment_id)
        )
        return self._flag_changed(
            conn, environment, key, before, None, actor, action, restored_from
        )

    @restores("flag")
    def _restore_flag(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """A flag put back byte for byte (its ``updatedAt`` included), or deleted again when
        the change created it."""
        environment_id, _, key = ident.partition("/")
        if record.before is not None:
            flag = documents.flag_record(environment_id, record.before)
            environment = self._require_environment(conn, environment_id)
            self._check_segments_exist(conn, environment.organization_id, flag.rules)
            return lambda actor: self._write_flag(
                conn, flag, actor=actor, action="restore", restored_from=record.id
            )
        if self._flag_in(conn, environment_id, key) is None:
            raise ConflictError(
                FlagCode.FLAG_STILL_ABSENT, ConflictReason.NOTHING_TO_RESTORE, flag=key
            )
        return lambda actor: self._delete_flag(
            conn, environment_id, key, actor=actor, action="restore", restored_from=record.id
        )
