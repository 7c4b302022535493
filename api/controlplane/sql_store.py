"""The control plane in SQL, written once for every backend (``sql_backend``).

``SqlControlPlaneStore`` holds the store's logic and SQL; a backend gives it transactions
(``SqliteBackend`` in ``sqlite_store``, ``PostgresBackend`` in ``postgres_store``). Writes run
in a write transaction, which takes the database's one write lock up front: each reads what it
checks and writes in that one transaction, and increases the config version in it, so every
worker of every host that polls the version sees the change as a whole or not at all.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import msgspec
from flagsight_core import Rule, SegmentRule, rule_from_json, rule_to_json
from flagsight_core.contract import KEY_PATTERN, MAX_SEGMENT_SIZE

from api.controlplane import documents
from api.controlplane.changes import Actor, AuditRecord, EventType
from api.controlplane.errors import (
    ConflictError,
    ConflictReason,
    ErrorCode,
    InvalidError,
    NotFoundError,
    Resource,
)
from api.controlplane.model import (
    DEFAULT_META,
    ApiKey,
    Environment,
    FlagKind,
    FlagMeta,
    FlagRecord,
    KeyContext,
    Organization,
    Plan,
    Segment,
)
from api.controlplane.sql_audit import AuditMixin
from api.controlplane.sql_backend import Connection, Params, Row, SqlBackend
from api.controlplane.sql_grants import GrantsMixin
from api.controlplane.sql_history import emit, new_id, record_audit
from api.controlplane.sql_rollouts import RolloutsMixin
from api.controlplane.sql_schedules import SchedulesMixin
from api.controlplane.sql_webhooks import WebhooksMixin
from api.controlplane.store import (
    ConfigSnapshot,
    CreatedApiKey,
    SegmentId,
    resolve_monthly_limit,
)

API_KEY_PREFIX = "fsk_"
_SIGNING_KEY = "signing_key"
_ADMIN_TOKEN_HASH = "admin_token_sha256"


def new_api_key() -> str:
    """``fsk_`` and 43 URL-safe characters: 256 random bits."""
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _organization(row: Row) -> Organization:
    return Organization(row["id"], row["name"], Plan(row["plan"]), row["monthly_evaluation_limit"])


def _environment(row: Row) -> Environment:
    return Environment(
        row["id"], row["organization_id"], row["key"], row["name"], bool(row["insights_enabled"])
    )


def _api_key(row: Row) -> ApiKey:
    return ApiKey(
        row["id"],
        row["environment_id"],
        row["name"],
        row["created_at"],
        row["revoked_at"] is not None,
    )


def _segment(row: Row) -> Segment:
    return Segment(row["organization_id"], row["key"], row["size"], row["updated_at"])


def _rules_from_text(text: str) -> tuple[Rule, ...]:
    return tuple(rule_from_json(raw) for raw in msgspec.json.decode(text))


def _flag(row: Row) -> FlagRecord:
    return FlagRecord(
        row["environment_id"],
        row["key"],
        bool(row["enabled"]),
        bool(row["archived"]),
        _rules_from_text(row["rules"]),
        row["updated_at"],
        FlagMeta(FlagKind(row["kind"]), row["owner"], row["expires_at"]),
    )


def _segment_keys_named(rules_text: str) -> set[str]:
    return {r["segment"] for r in msgspec.json.decode(rules_text) if r.get("type") == "SEGMENT"}


_API_KEY_BY_ID = "SELECT * FROM api_keys WHERE id = ?"
_SEGMENT_BY_KEY = (
    "SELECT organization_id, key, size, updated_at FROM segments"
    " WHERE organization_id = ? AND key = ?"
)
"""One key, one segment: read outside a transaction (``get_*``) and inside the caller's."""


class SqlControlPlaneStore(AuditMixin, RolloutsMixin, SchedulesMixin, WebhooksMixin, GrantsMixin):
    """``ControlPlaneStore`` on a SQL ``backend``, whose schema it brings up to date at once.

    Every change writes its audit record (and queues its webhook events) in its own
    transaction; the mixins add the history, rollouts, schedules and webhooks of section 10.
    """

    def __init__(self, backend: SqlBackend, *, clock: Callable[[], float] = time.time):
        self._backend = backend
        self._clock = clock
        backend.migrate()

    # -- transactions and reads -------------------------------------------------------------

    def _transaction(self, *, write: bool) -> AbstractContextManager[Connection]:
        return self._backend.transaction(write=write)

    def _fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        return self._backend.fetch(sql, params)

    def _fetchone(self, sql: str, params: Params = ()) -> Row | None:
        rows = self._backend.fetch(sql, params)
        return rows[0] if rows else None

    @staticmethod
    def _bump(conn: Connection) -> int:
        """The next config version, taken inside the caller's write transaction."""
        row = conn.execute("UPDATE config_version SET version = version + 1 RETURNING version")
        return row.fetchone()[0]

    def _now(self) -> str:
        return documents.iso_time(self._clock())

    def _audit(
        self,
        conn: Connection,
        organization_id: str,
        actor: str,
        action: str,
        target: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        restored_from: str | None = None,
    ) -> AuditRecord:
        return record_audit(
            conn, at=self._now(), organization_id=organization_id, actor=str(actor),
            action=action, target=target, before=before, after=after,
            restored_from=restored_from,
        )  # fmt: skip

    def _emit(self, conn: Connection, organization_id: str, event: EventType, data: dict) -> str:
        return emit(
            conn, now=self._clock(), at=self._now(), organization_id=organization_id,
            event_type=event, data=data,
        )  # fmt: skip

    def close(self) -> None:
        """Close this process's connections (the store reopens them if used again)."""
        self._backend.close()

    # -- organizations ----------------------------------------------------------------------

    def create_organization(
        self,
        name: str,
        plan: Plan,
        monthly_evaluation_limit: int | None = None,
        *,
        actor: str = Actor.SYSTEM,
    ) -> Organization:
        plan = Plan(plan)
        limit = resolve_monthly_limit(plan, monthly_evaluation_limit, None)
        organization = Organization(new_id("org_"), name, plan, limit)
        with self._transaction(write=True) as conn:
            conn.execute(
                "INSERT INTO organizations VALUES (?, ?, ?, ?, ?, ?)",
                (organization.id, name, plan.value, limit, self._now(), self._bump(conn)),
            )
            self._audit(
                conn, organization.id, actor, "organization.created",
                f"organization:{organization.id}", None, documents.organization(organization),
            )  # fmt: skip
        return organization

    def get_organization(self, organization_id: str) -> Organization | None:
        row = self._fetchone("SELECT * FROM organizations WHERE id = ?", (organization_id,))
        return _organization(row) if row else None

    def list_organizations(self) -> list[Organization]:
        rows = self._fetchall("SELECT * FROM organizations ORDER BY rowid")
        return [_organization(row) for row in rows]

    def update_organization(
        self,
        organization_id: str,
        *,
        plan: Plan | None = None,
        monthly_evaluation_limit: int | None = None,
        actor: str = Actor.SYSTEM,
    ) -> Organization:
        with self._transaction(write=True) as conn:
            row = conn.execute(
                "SELECT * FROM organizations WHERE id = ?", (organization_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(
                    ErrorCode.ORGANIZATION_NOT_FOUND, Resource.ORGANIZATION, organization_id
                )
            current = _organization(row)
            new_plan = current.plan if plan is None else Plan(plan)
            limit = resolve_monthly_limit(new_plan, monthly_evaluation_limit, current)
            conn.execute(
                "UPDATE organizations SET plan = ?, monthly_evaluation_limit = ?, version = ?"
                " WHERE id = ?",
                (new_plan.value, limit, self._bump(conn), organization_id),
            )
            updated = Organization(current.id, current.name, new_plan, limit)
            self._audit(
                conn, current.id, actor, "organization.updated", f"organization:{current.id}",
                documents.organization(current), documents.organization(updated),
            )  # fmt: skip
        return updated

    # -- environments -----------------------------------------------------------------------

    @staticmethod
    def _require_organization(conn: Connection, organization_id: str) -> None:
        if conn.execute("SELECT 1 FROM organizations WHERE id = ?", (organization_id,)).fetchone():
            return
        raise NotFoundError(
            ErrorCode.ORGANIZATION_NOT_FOUND, Resource.ORGANIZATION, organization_id
        )

    def create_environment(
        self,
        organization_id: str,
        key: str,
        name: str | None = None,
        insights_enabled: bool = False,
        *,
        actor: str = Actor.SYSTEM,
    ) -> Environment:
        if not KEY_PATTERN.fullmatch(key):
            raise InvalidError(ErrorCode.ENVIRONMENT_KEY_MALFORMED, "key", value=key)
        environment = Environment(
            new_id("env_"), organization_id, key, name or key, bool(insights_enabled)
        )
        with self._transaction(write=True) as conn:
            self._require_organization(conn, organization_id)
            taken = conn.execute(
                "SELECT 1 FROM environments WHERE organization_id = ? AND key = ?",
                (organization_id, key),
            ).fetchone()
            if taken:
                raise ConflictError(
                    ErrorCode.ENVIRONMENT_KEY_TAKEN, ConflictReason.KEY_TAKEN, "key", key=key
                )
            conn.execute(
                "INSERT INTO environments VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    environment.id,
                    organization_id,
                    key,
                    environment.name,
                    bool(environment.insights_enabled),
                    self._now(),
                    self._bump(conn),
                ),
            )
            self._audit(
                conn, organization_id, actor, "environment.created",
                f"environment:{environment.id}", None, documents.environment(environment),
            )  # fmt: skip
        return environment

    def get_environment(self, environment_id: str) -> Environment | None:
        row = self._fetchone("SELECT * FROM environments WHERE id = ?", (environment_id,))
        return _environment(row) if row else None

    def find_environment(self, organization_id: str, key: str) -> Environment | None:
        row = self._fetchone(
            "SELECT * FROM environments WHERE organization_id = ? AND key = ?",
            (organization_id, key),
        )
        return _environment(row) if row else None

    def list_environments(self, organization_id: str) -> list[Environment]:
        rows = self._fetchall(
            "SELECT * FROM environments WHERE organization_id = ? ORDER BY rowid",
            (organization_id,),
        )
        return [_environment(row) for row in rows]

    def update_environment(
        self,
        environment_id: str,
        *,
        name: str | None = None,
        insights_enabled: bool | None = None,
        actor: str = Actor.SYSTEM,
    ) -> Environment:
        with self._transaction(write=True) as conn:
            row = conn.execute(
                "SELECT * FROM environments WHERE id = ?", (environment_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(
                    ErrorCode.ENVIRONMENT_NOT_FOUND, Resource.ENVIRONMENT, environment_id
                )
            current = _environment(row)
            updated = Environment(
                current.id,
                current.organization_id,
                current.key,
                current.name if name is None else name,
                current.insights_enabled if insights_enabled is None else bool(insights_enabled),
            )
            conn.execute(
                "UPDATE environments SET name = ?, insights_enabled = ?, version = ? WHERE id = ?",
                (updated.name, bool(updated.insights_enabled), self._bump(conn), environment_id),
            )
            self._audit(
                conn, current.organization_id, actor, "environment.updated",
                f"environment:{current.id}", documents.environment(current),
                documents.environment(updated),
            )  # fmt: skip
        return updated

    @staticmethod
    def _require_environment(conn: Connection, environment_id: str) -> Environment:
        row = conn.execute("SELECT * FROM environments WHERE id = ?", (environment_id,)).fetchone()
        if row is None:
            raise NotFoundError(
                ErrorCode.ENVIRONMENT_NOT_FOUND, Resource.ENVIRONMENT, environment_id
            )
        return _environment(row)

    # -- API keys ---------------------------------------------------------------------------

    def create_api_key(
        self, environment_id: str, name: str = "", *, actor: str = Actor.SYSTEM
    ) -> CreatedApiKey:
        plaintext = new_api_key()
        record = ApiKey(new_id("key_"), environment_id, name, self._now())
        with self._transaction(write=True) as conn:
            environment = self._require_environment(conn, environment_id)
            conn.execute(
                "INSERT INTO api_keys (id, environment_id, name, key_sha256, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (record.id, environment_id, name, sha256_hex(plaintext), record.created_at),
            )
            self._bump(conn)
            self._audit(
                conn, environment.organization_id, actor, "apiKey.created",
                f"apiKey:{record.id}", None, documents.api_key(record),
            )  # fmt: skip
        return CreatedApiKey(record, plaintext)

    def get_api_key(self, key_id: str) -> ApiKey | None:
        row = self._fetchone(_API_KEY_BY_ID, (key_id,))
        return _api_key(row) if row else None

    def list_api_keys(self, environment_id: str) -> list[ApiKey]:
        rows = self._fetchall(
            "SELECT * FROM api_keys WHERE environment_id = ? AND revoked_at IS NULL ORDER BY rowid",
            (environment_id,),
        )
        return [_api_key(row) for row in rows]

    def revoke_api_key(self, key_id: str, *, actor: str = Actor.SYSTEM) -> None:
        with self._transaction(write=True) as conn:
            key = self._api_key_in(conn, key_id)
            if key is None or key.revoked:
                raise NotFoundError(ErrorCode.LIVE_API_KEY_NOT_FOUND, Resource.API_KEY, key_id)
            self._set_revoked(conn, key, True, actor=actor, action="apiKey.revoked")

    @staticmethod
    def _api_key_in(conn: Connection, key_id: str) -> ApiKey | None:
        """The key, revoked or not; None when there is no such key."""
        row = conn.execute(_API_KEY_BY_ID, (key_id,)).fetchone()
        return _api_key(row) if row else None

    def _set_revoked(
        self,
        conn: Connection,
        key: ApiKey,
        revoked: bool,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Revoke ``key``, or take its revocation back, inside the caller's write transaction;
        the version bump makes every worker refuse (or accept) it within a poll. Revoking and
        restoring (``sql_audit``) both come here."""
        environment = self._require_environment(conn, key.environment_id)
        conn.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE id = ?",
            (self._now() if revoked else None, key.id),
        )
        self._bump(conn)
        after = dataclasses.replace(key, revoked=revoked)
        return self._audit(
            conn, environment.organization_id, actor, action, f"apiKey:{key.id}",
            documents.api_key(key), documents.api_key(after), restored_from,
        )  # fmt: skip

    # -- segments ---------------------------------------------------------------------------

    def put_segment(
        self,
        organization_id: str,
        key: str,
        user_identifiers: Sequence[str],
        *,
        actor: str = Actor.SYSTEM,
    ) -> tuple[Segment, bool]:
        if not KEY_PATTERN.fullmatch(key):
            raise InvalidError(ErrorCode.SEGMENT_KEY_MALFORMED, "key", value=key)
        members = list(dict.fromkeys(user_identifiers))
        if len(members) > MAX_SEGMENT_SIZE:
            raise InvalidError(
                ErrorCode.SEGMENT_TOO_LARGE, "user_identifiers", count=len(members),
                maximum=MAX_SEGMENT_SIZE,
            )  # fmt: skip
        segment = Segment(organization_id, key, len(members), self._now())
        with self._transaction(write=True) as conn:
            self._require_organization(conn, organization_id)
            record = self._write_segment(
                conn, segment, msgspec.json.encode(members), actor=actor, action="segment.put"
            )
        return segment, record.before is None

    @staticmethod
    def _segment_in(conn: Connection, organization_id: str, key: str) -> Segment | None:
        row = conn.execute(_SEGMENT_BY_KEY, (organization_id, key)).fetchone()
        return _segment(row) if row else None

    def _write_segment(
        self,
        conn: Connection,
        segment: Segment,
        members: bytes,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Create or replace ``segment`` with ``members`` (its JSON array) inside the caller's
        write transaction: audit the change, keep the members it had (``_keep_members``) and
        bump the version, so every worker serves the new members within a poll. Putting a
        segment and restoring one (``sql_audit``) both come here."""
        organization_id, key = segment.organization_id, segment.key
        before = self._segment_in(conn, organization_id, key)
        record = self._audit(
            conn, organization_id, actor, action, f"segment:{organization_id}/{key}",
            documents.segment(before) if before else None, documents.segment(segment),
            restored_from,
        )  # fmt: skip
        self._keep_members(conn, record, organization_id, key)
        version = self._bump(conn)
        conn.execute(
            "INSERT INTO segments VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (organization_id, key) DO UPDATE SET size = excluded.size,"
            " members = excluded.members, updated_at = excluded.updated_at,"
            " version = excluded.version",
            (organization_id, key, segment.size, members, segment.updated_at, version),
        )
        conn.execute(
            "UPDATE organizations SET version = ? WHERE id = ?", (version, organization_id)
        )
        return record

    @staticmethod
    def _keep_members(
        conn: Connection, record: AuditRecord, organization_id: str, key: str
    ) -> None:
        """Copy the segment's members as they are now (NULL: there is no such segment) into
        ``segment_history`` under ``record``, the change about to be made: the audit record
        keeps only the size, and a restore needs the members. Copied inside the database, so
        a large segment never passes through Python for it."""
        conn.execute(
            "INSERT INTO segment_history (audit_id, organization_id, key, members)"
            " VALUES (?, ?, ?, (SELECT members FROM segments"
            " WHERE organization_id = ? AND key = ?))",
            (record.id, organization_id, key, organization_id, key),
        )

    def get_segment(self, organization_id: str, key: str) -> Segment | None:
        row = self._fetchone(_SEGMENT_BY_KEY, (organization_id, key))
        return _segment(row) if row else None

    def segment_members(self, organization_id: str, key: str) -> list[str] | None:
        row = self._fetchone(
            "SELECT members FROM segments WHERE organization_id = ? AND key = ?",
            (organization_id, key),
        )
        return msgspec.json.decode(row[0]) if row else None

    def list_segments(self, organization_id: str) -> list[Segment]:
        rows = self._fetchall(
            "SELECT organization_id, key, size, updated_at FROM segments"
            " WHERE organization_id = ? ORDER BY key",
            (organization_id,),
        )
        return [_segment(row) for row in rows]

    def delete_segment(self, organization_id: str, key: str, *, actor: str = Actor.SYSTEM) -> None:
        with self._transaction(write=True) as conn:
            self._delete_segment(conn, organization_id, key, actor=actor, action="segment.deleted")

    def _delete_segment(
        self,
        conn: Connection,
        organization_id: str,
        key: str,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Delete inside the caller's write transaction, refused while a flag's rule names the
        segment; its members are kept (``_keep_members``). Deleting a segment and restoring
        its creation (``sql_audit``) both come here."""
        before = self._segment_in(conn, organization_id, key)
        if before is None:
            raise NotFoundError(ErrorCode.SEGMENT_NOT_FOUND, Resource.SEGMENT, key)
        self._check_segment_unused(conn, organization_id, key)
        record = self._audit(
            conn, organization_id, actor, action, f"segment:{organization_id}/{key}",
            documents.segment(before), None, restored_from,
        )  # fmt: skip
        self._keep_members(conn, record, organization_id, key)
        conn.execute(
            "DELETE FROM segments WHERE organization_id = ? AND key = ?", (organization_id, key)
        )
        conn.execute(
            "UPDATE organizations SET version = ? WHERE id = ?",
            (self._bump(conn), organization_id),
        )
        return record

    @staticmethod
    def _check_segment_unused(conn: Connection, organization_id: str, key: str) -> None:
        users = conn.execute(
            "SELECT e.key AS environment, f.key AS flag, f.rules FROM flags f"
            " JOIN environments e ON e.id = f.environment_id"
            " WHERE e.organization_id = ? ORDER BY e.rowid, f.key",
            (organization_id,),
        )
        for row in users:
            if key in _segment_keys_named(row["rules"]):
                raise ConflictError(
                    ErrorCode.SEGMENT_IN_USE, ConflictReason.SEGMENT_IN_USE, segment=key,
                    flag=row["flag"], environment=row["environment"],
                )  # fmt: skip

    # -- flags ------------------------------------------------------------------------------

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
            raise InvalidError(ErrorCode.FLAG_KEY_MALFORMED, "key", value=key)
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
        return _flag(row) if row else None

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
        for index, rule in enumerate(rules):
            if not isinstance(rule, SegmentRule):
                continue
            found = conn.execute(
                "SELECT 1 FROM segments WHERE organization_id = ? AND key = ?",
                (organization_id, rule.segment),
            ).fetchone()
            if not found:
                raise InvalidError(
                    ErrorCode.UNKNOWN_SEGMENT, "rules", index=index, segment=rule.segment
                )

    def get_flag(self, environment_id: str, key: str) -> FlagRecord | None:
        row = self._fetchone(
            "SELECT * FROM flags WHERE environment_id = ? AND key = ?", (environment_id, key)
        )
        return _flag(row) if row else None

    def list_flags(self, environment_id: str) -> list[FlagRecord]:
        rows = self._fetchall(
            "SELECT * FROM flags WHERE environment_id = ? ORDER BY key", (environment_id,)
        )
        return [_flag(row) for row in rows]

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
        """Delete inside the caller's transaction; its rollout and pending schedules go too."""
        environment = self._require_environment(conn, environment_id)
        before = self._flag_in(conn, environment_id, key)
        if before is None:
            raise NotFoundError(ErrorCode.FLAG_NOT_FOUND, Resource.FLAG, key)
        conn.execute(
            "DELETE FROM flags WHERE environment_id = ? AND key = ?", (environment_id, key)
        )
        conn.execute(
            "DELETE FROM rollouts WHERE environment_id = ? AND flag_key = ?", (environment_id, key)
        )
        conn.execute(
            "UPDATE environments SET version = ? WHERE id = ?", (self._bump(conn), environment_id)
        )
        return self._flag_changed(
            conn, environment, key, before, None, actor, action, restored_from
        )

    # -- what workers poll and load ---------------------------------------------------------

    def config_version(self) -> int:
        return self._fetchone("SELECT version FROM config_version")[0]

    def read_config(self, known_segments: Mapping[SegmentId, int]) -> ConfigSnapshot:
        with self._transaction(write=False) as conn:
            version = conn.execute("SELECT version FROM config_version").fetchone()[0]
            organizations = [_organization(r) for r in conn.execute("SELECT * FROM organizations")]
            env_rows = conn.execute(
                "SELECT e.*, CASE WHEN e.version > o.version THEN e.version ELSE o.version END"
                " AS answer_version FROM environments e"
                " JOIN organizations o ON o.id = e.organization_id"
            ).fetchall()
            keys = conn.execute(
                "SELECT k.id, k.key_sha256, k.environment_id, e.organization_id FROM api_keys k"
                " JOIN environments e ON e.id = k.environment_id WHERE k.revoked_at IS NULL"
            )
            api_keys = {
                row["key_sha256"]: KeyContext(
                    row["id"], row["environment_id"], row["organization_id"]
                )
                for row in keys
            }
            flags = [_flag(row) for row in conn.execute("SELECT * FROM flags")]
            segment_versions: dict[SegmentId, int] = {
                (row[0], row[1]): row[2]
                for row in conn.execute("SELECT organization_id, key, version FROM segments")
            }
            changed = [sid for sid, v in segment_versions.items() if known_segments.get(sid) != v]
            members = {sid: self._members(conn, sid) for sid in changed}
        return ConfigSnapshot(
            version=version,
            organizations=organizations,
            environments=[_environment(row) for row in env_rows],
            api_keys=api_keys,
            flags=flags,
            environment_versions={row["id"]: row["answer_version"] for row in env_rows},
            segment_versions=segment_versions,
            segment_members=members,
        )

    @staticmethod
    def _members(conn: Connection, segment: SegmentId) -> list[str]:
        row = conn.execute(
            "SELECT members FROM segments WHERE organization_id = ? AND key = ?", segment
        ).fetchone()
        return msgspec.json.decode(row[0])

    # -- deployment secrets -----------------------------------------------------------------

    def _setting(self, name: str) -> Any:
        """A deployment setting's value: bytes (a BLOB, or BYTEA in PostgreSQL)."""
        row = self._fetchone("SELECT value FROM settings WHERE name = ?", (name,))
        return row[0] if row else None

    def signing_key(self) -> bytes:
        existing = self._setting(_SIGNING_KEY)
        if existing is not None:
            return bytes(existing)
        with self._transaction(write=True) as conn:
            conn.execute(
                "INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                (_SIGNING_KEY, secrets.token_bytes(32)),
            )
        return bytes(self._setting(_SIGNING_KEY))

    def admin_token_hash(self) -> str | None:
        value = self._setting(_ADMIN_TOKEN_HASH)
        if isinstance(value, bytes | memoryview):
            return bytes(value).decode("ascii")
        return None if value is None else str(value)  # TEXT: written by earlier versions

    def set_admin_token_hash(self, token_sha256_hex: str) -> None:
        with self._transaction(write=True) as conn:
            conn.execute(
                "INSERT INTO settings (name, value) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (_ADMIN_TOKEN_HASH, token_sha256_hex.encode("ascii")),
            )
