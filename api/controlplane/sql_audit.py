"""The audit log in SQL: reading it, and restoring a target to what a record's ``before``
says, itself as an audited change (action ``restore``, ``restoredFrom`` the record's id).

What can be restored: a flag (created, changed or deleted: put back byte for byte, its
``updatedAt`` included, or deleted again), an organization's plan and limit, an environment's
name and insights switch. API keys, segments (their members are not kept in the log),
rollouts, schedules and webhooks are refused with ``ConflictError``: their inverse is a new
call (create a key, upload the segment, start a rollout), not a restore.
"""

from __future__ import annotations

from api.controlplane import documents
from api.controlplane.changes import Actor, AuditRecord
from api.controlplane.model import Environment, Organization, Plan
from api.controlplane.sql_backend import Connection
from api.controlplane.sql_history import audit_from_row
from api.controlplane.store import ConflictError, ConflictReason, NotFoundError, Resource

AUDIT_PAGE = 1000


class AuditMixin:
    """The audit half of ``SqlControlPlaneStore`` (see ``ControlPlaneStore``)."""

    def list_audit(self, organization_id: str, limit: int = AUDIT_PAGE) -> list[AuditRecord]:
        rows = self._fetchall(
            "SELECT * FROM audit_log WHERE organization_id = ? ORDER BY seq DESC LIMIT ?",
            (organization_id, limit),
        )
        return [audit_from_row(row) for row in rows]

    def get_audit(self, audit_id: str) -> AuditRecord | None:
        row = self._fetchone("SELECT * FROM audit_log WHERE id = ?", (audit_id,))
        return audit_from_row(row) if row else None

    def restore(self, audit_id: str, *, actor: str = Actor.SYSTEM) -> AuditRecord:
        with self._transaction(write=True) as conn:
            row = conn.execute("SELECT * FROM audit_log WHERE id = ?", (audit_id,)).fetchone()
            if row is None:
                raise NotFoundError(
                    Resource.AUDIT_RECORD, audit_id, f"Audit record '{audit_id}' does not exist"
                )
            record = audit_from_row(row)
            kind, _, ident = record.target.partition(":")
            if kind == "flag":
                return self._restore_flag(conn, record, ident, actor)
            if kind == "organization" and record.before is not None:
                return self._restore_organization(conn, record, actor)
            if kind == "environment" and record.before is not None:
                return self._restore_environment(conn, record, actor)
            raise ConflictError(
                ConflictReason.NOT_RESTORABLE,
                f"Audit record '{audit_id}' ({record.action} of {record.target}) cannot be"
                " restored: only flags, organizations' plans and environments' settings can",
            )

    def _restore_flag(
        self, conn: Connection, record: AuditRecord, ident: str, actor: str
    ) -> AuditRecord:
        environment_id, _, key = ident.partition("/")
        if record.before is not None:
            flag = documents.flag_record(environment_id, record.before)
            return self._write_flag(
                conn, flag, actor=actor, action="restore", restored_from=record.id
            )
        if self._flag_in(conn, environment_id, key) is None:
            raise ConflictError(
                ConflictReason.NOTHING_TO_RESTORE,
                f"Flag '{key}' did not exist before that change and does not now",
            )
        return self._delete_flag(
            conn, environment_id, key, actor=actor, action="restore", restored_from=record.id
        )

    def _restore_organization(
        self, conn: Connection, record: AuditRecord, actor: str
    ) -> AuditRecord:
        before = record.before
        row = conn.execute("SELECT * FROM organizations WHERE id = ?", (before["id"],)).fetchone()
        if row is None:
            raise NotFoundError(
                Resource.ORGANIZATION,
                before["id"],
                f"Organization '{before['id']}' does not exist",
            )
        current = Organization(
            row["id"], row["name"], Plan(row["plan"]), row["monthly_evaluation_limit"]
        )
        conn.execute(
            "UPDATE organizations SET plan = ?, monthly_evaluation_limit = ?, version = ?"
            " WHERE id = ?",
            (before["plan"], before["monthlyEvaluationLimit"], self._bump(conn), current.id),
        )
        restored = Organization(
            current.id, current.name, Plan(before["plan"]), before["monthlyEvaluationLimit"]
        )
        return self._audit(
            conn, current.id, actor, "restore", record.target,
            documents.organization(current), documents.organization(restored), record.id,
        )  # fmt: skip

    def _restore_environment(
        self, conn: Connection, record: AuditRecord, actor: str
    ) -> AuditRecord:
        before = record.before
        current: Environment = self._require_environment(conn, before["id"])
        conn.execute(
            "UPDATE environments SET name = ?, insights_enabled = ?, version = ? WHERE id = ?",
            (before["name"], bool(before["insightsEnabled"]), self._bump(conn), current.id),
        )
        restored = Environment(
            current.id, current.organization_id, current.key, before["name"],
            before["insightsEnabled"],
        )  # fmt: skip
        return self._audit(
            conn, current.organization_id, actor, "restore", record.target,
            documents.environment(current), documents.environment(restored), record.id,
        )  # fmt: skip
