"""The audit log in SQL: reading it, and restoring a target to what a record's ``before``
says, itself as an audited change (action ``restore``, ``restoredFrom`` the record's id).

What can be restored (``RESTORABLE``): a flag (created, changed or deleted: put back byte for
byte, its ``updatedAt`` included, or deleted again), an organization's plan and limit, an
environment's name and insights switch, an API key (its revocation taken back, or its
creation undone by revoking it), a segment (its members put back from ``segment_history``,
which keeps them for every change since migration 0003, or its creation undone by deleting
it), a schedule (its creation undone by cancelling it while it is pending, its cancellation
by making it pending again while its time is ahead), a rollout (stopped or held: back as it
was, its decisions included) and a webhook's creation (by deleting it). The rest is refused
with ``ConflictError`` saying why: a deleted webhook (its secret is not kept in the log), a
segment change recorded before its members were kept, and the creation of an organization or
environment (neither is ever deleted).

Each kind's restore first checks the target as it is now and then returns its write
(``Restore``): ``restore`` applies it, ``restore_refusals`` only runs the checks (reading, in
one transaction), so what the dashboard offers and what a restore does are judged alike (a key
already revoked offers no undo of its creation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from api.controlplane import documents
from api.controlplane.changes import Actor, AuditRecord, Schedule, ScheduleState
from api.controlplane.errors import (
    ConflictError,
    ConflictReason,
    ControlPlaneError,
    ErrorCode,
    NotFoundError,
    Resource,
)
from api.controlplane.model import Environment, Organization, Plan, Segment
from api.controlplane.sql_backend import Connection
from api.controlplane.sql_history import audit_from_row
from api.controlplane.sql_rollouts import split_index
from api.controlplane.store import can_restore

AUDIT_PAGE = 1000

Restore = Callable[[str], AuditRecord]
"""A restore that has been checked against the target as it is now: called with the actor,
it writes (inside the same transaction) and returns the restore's own record."""

WHY_NOT = {
    "segment": ErrorCode.SEGMENT_MEMBERS_NOT_KEPT,
    "organization": ErrorCode.ORGANIZATIONS_NEVER_DELETED,
    "environment": ErrorCode.ENVIRONMENTS_NEVER_DELETED,
    "webhook": ErrorCode.WEBHOOK_SECRET_NOT_KEPT,
}
"""Why a record of that target kind cannot be restored: of a segment, one made before its
members were kept; of a webhook, its deletion; of an organization or environment, its
creation. Any other kind has no restore (``ErrorCode.KIND_HAS_NO_RESTORE``)."""


def not_restorable(record: AuditRecord, kind: str) -> ConflictError:
    return ConflictError(
        WHY_NOT.get(kind, ErrorCode.KIND_HAS_NO_RESTORE), ConflictReason.NOT_RESTORABLE,
        audit_id=record.id, action=record.action, target=record.target,
    )  # fmt: skip


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
                    ErrorCode.AUDIT_RECORD_NOT_FOUND, Resource.AUDIT_RECORD, audit_id
                )
            return self._checked_restore(conn, audit_from_row(row))(actor)

    def restore_refusals(self, records: Iterable[AuditRecord]) -> dict[str, ControlPlaneError]:
        with self._transaction(write=False) as conn:
            refusals = {}
            for record in records:
                try:
                    self._checked_restore(conn, record)
                except ControlPlaneError as exc:
                    refusals[record.id] = exc
            return refusals

    def _checked_restore(self, conn: Connection, record: AuditRecord) -> Restore:
        """The record's restore, checked against its target as it is now (the same checks
        whether it is then applied or only judged); the error that refuses it otherwise."""
        kind, _, ident = record.target.partition(":")
        if not can_restore(record):
            raise not_restorable(record, kind)
        return self._restorers()[kind](conn, record, ident)

    def _restorers(self) -> dict[str, Callable[[Connection, AuditRecord, str], Restore]]:
        """Each restorable target kind's check, returning its write (``Restore``)."""
        return {
            "flag": self._restore_flag,
            "organization": self._restore_organization,
            "environment": self._restore_environment,
            "apiKey": self._restore_api_key,
            "schedule": self._restore_schedule,
            "webhook": self._restore_webhook,
            "segment": self._restore_segment,
            "rollout": self._restore_rollout,
        }

    def _restore_flag(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
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
                ErrorCode.FLAG_STILL_ABSENT, ConflictReason.NOTHING_TO_RESTORE, flag=key
            )
        return lambda actor: self._delete_flag(
            conn, environment_id, key, actor=actor, action="restore", restored_from=record.id
        )

    def _restore_organization(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        before = record.before
        assert before is not None  # can_restore refused creations
        row = conn.execute("SELECT * FROM organizations WHERE id = ?", (before["id"],)).fetchone()
        if row is None:
            raise NotFoundError(
                ErrorCode.ORGANIZATION_NOT_FOUND, Resource.ORGANIZATION, before["id"]
            )
        current = Organization(
            row["id"], row["name"], Plan(row["plan"]), row["monthly_evaluation_limit"]
        )

        def write(actor: str) -> AuditRecord:
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

        return write

    def _restore_environment(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        before = record.before
        assert before is not None  # can_restore refused creations
        current: Environment = self._require_environment(conn, before["id"])

        def write(actor: str) -> AuditRecord:
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

        return write

    def _restore_api_key(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """A revocation is taken back; a creation is undone by revoking the key (its secret
        was shown once and is not kept, so revoking is all there is to undo)."""
        key = self._api_key_in(conn, ident)
        if key is None:
            raise NotFoundError(ErrorCode.API_KEY_NOT_FOUND, Resource.API_KEY, ident)
        revoked = record.before is None or bool(record.before["revoked"])
        if key.revoked == revoked:
            raise ConflictError(
                ErrorCode.API_KEY_ALREADY_REVOKED if revoked else ErrorCode.API_KEY_NOT_REVOKED,
                ConflictReason.NOTHING_TO_RESTORE,
                api_key=ident,
            )
        return lambda actor: self._set_revoked(
            conn, key, revoked, actor=actor, action="restore", restored_from=record.id
        )

    def _restore_schedule(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """A cancellation is undone by making the schedule pending again, while its time is
        still ahead; a creation by cancelling it, while it is pending."""
        schedule = self._schedule_in(conn, ident)
        if schedule is None:
            raise NotFoundError(ErrorCode.SCHEDULE_NOT_FOUND, Resource.SCHEDULE, ident)
        pending = record.before is not None and record.before["state"] == ScheduleState.PENDING
        if pending:
            check_can_be_pending_again(schedule, self._clock())
        else:
            check_can_be_cancelled(schedule)
        state = ScheduleState.PENDING if pending else ScheduleState.CANCELLED
        return lambda actor: self._set_schedule_state(
            conn, schedule, state, actor=actor, action="restore", restored_from=record.id
        )

    def _restore_webhook(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """A creation is undone by deleting the webhook; a deletion cannot be (``WHY_NOT``)."""
        hook = self._webhook_in(conn, ident)
        if hook is None:
            raise ConflictError(
                ErrorCode.WEBHOOK_STILL_ABSENT, ConflictReason.NOTHING_TO_RESTORE, webhook=ident
            )
        return lambda actor: self._delete_webhook(
            conn, hook, actor=actor, action="restore", restored_from=record.id
        )

    def _restore_segment(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """Put the members the segment had before that change back (``segment_history``),
        with its ``updatedAt`` then; a creation is undone by deleting the segment, refused
        (as a deletion is) while a flag's rule names it."""
        organization_id, _, key = ident.partition("/")
        kept = conn.execute(
            "SELECT members FROM segment_history WHERE audit_id = ?", (record.id,)
        ).fetchone()
        if kept is None:
            raise not_restorable(record, "segment")
        if kept["members"] is None:
            if self._segment_in(conn, organization_id, key) is None:
                raise ConflictError(
                    ErrorCode.SEGMENT_STILL_ABSENT, ConflictReason.NOTHING_TO_RESTORE, segment=key
                )
            self._check_segment_unused(conn, organization_id, key)
            return lambda actor: self._delete_segment(
                conn, organization_id, key, actor=actor, action="restore", restored_from=record.id
            )
        before = record.before  # the segment as it was: it existed, its members were kept
        segment = Segment(organization_id, key, before["size"], before["updatedAt"])
        members = bytes(kept["members"])
        return lambda actor: self._write_segment(
            conn, segment, members, actor=actor, action="restore", restored_from=record.id
        )

    def _restore_rollout(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """Put the flag's rollout back as it was before that change, its decisions included:
        a stopped rollout comes back, a held one runs again at its step. The flag itself is
        left as it is (the rollout's moves of it are flag records, restored as such); when the
        rollout runs, its next decision moves it. A restore that brought a rollout back is
        undone by stopping it."""
        environment_id, _, flag_key = ident.partition("/")
        environment = self._require_environment(conn, environment_id)
        flag = self._flag_in(conn, environment_id, flag_key)
        if flag is None:
            raise ConflictError(
                ErrorCode.ROLLOUT_FLAG_GONE, ConflictReason.NOTHING_TO_RESTORE, flag=flag_key
            )
        current = self._rollout_in(conn, environment_id, flag_key, missing_ok=True)
        if record.before is None and current is None:
            raise ConflictError(
                ErrorCode.ROLLOUT_STILL_ABSENT, ConflictReason.NOTHING_TO_RESTORE, flag=flag_key
            )
        if record.before is not None:
            split_index(flag)  # what the rollout moves must still be there

        def write(actor: str) -> AuditRecord:
            if record.before is None:
                self._delete_rollout(conn, environment_id, flag_key)
                restored = None
            else:
                made = current.created_at if current is not None else self._now()
                self._put_rollout(
                    conn, documents.rollout_record(environment_id, flag_key, record.before, made)
                )
                restored = documents.rollout(self._rollout_in(conn, environment_id, flag_key))
            return self._audit(
                conn, environment.organization_id, actor, "restore", record.target,
                None if current is None else documents.rollout(current), restored, record.id,
            )  # fmt: skip

        return write


def check_can_be_cancelled(schedule: Schedule) -> None:
    """Only a pending schedule can be cancelled by a restore."""
    if schedule.state is ScheduleState.PENDING:
        return
    if schedule.state is ScheduleState.APPLIED:
        raise ConflictError(
            ErrorCode.SCHEDULE_APPLIED, ConflictReason.NOT_RESTORABLE, schedule=schedule.id,
            applied_at=schedule.applied_at,
        )  # fmt: skip
    failed = schedule.state is ScheduleState.FAILED
    raise ConflictError(
        ErrorCode.SCHEDULE_FAILED if failed else ErrorCode.SCHEDULE_ALREADY_CANCELLED,
        ConflictReason.NOTHING_TO_RESTORE,
        schedule=schedule.id,
    )


def check_can_be_pending_again(schedule: Schedule, now: float) -> None:
    """Only a cancelled schedule whose time is still ahead can be pending again."""
    if schedule.state is not ScheduleState.CANCELLED:
        raise ConflictError(
            ErrorCode.SCHEDULE_NOT_CANCELLED, ConflictReason.NOTHING_TO_RESTORE,
            schedule=schedule.id, state=str(schedule.state),
        )  # fmt: skip
    if schedule.at <= now:
        raise ConflictError(
            ErrorCode.SCHEDULE_DUE_TIME_PASSED, ConflictReason.NOT_RESTORABLE,
            schedule=schedule.id, due_at=schedule.at,
        )  # fmt: skip
