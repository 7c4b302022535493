"""The scheduled changes slice: its codes, its part of the store, its SQL and its restore.
A schedule is a flag change created for later, listed, cancelled, and applied when due.

Every worker calls ``apply_due_schedules`` a few times a second (``api.jobs.schedules``); the write
lock makes exactly one of them apply each due schedule (the others find it applied), and the
flag write bumps the config version in the same transaction, so every worker serves it within
a poll. A schedule that cannot be applied any more (its segment was deleted) is marked failed
with the reason instead of blocking the ones behind it.
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from typing import Protocol

import msgspec
from flagsight_core import rule_from_json, rule_to_json
from flagsight_core.contract import KEY_PATTERN

from api.controlplane import documents
from api.controlplane.changes import Actor, AuditRecord, FlagBody, Schedule, ScheduleState
from api.controlplane.errors import (
    ConflictError,
    ConflictReason,
    ControlPlaneError,
    InvalidError,
    NotFoundError,
    RecordedError,
    Resource,
)
from api.controlplane.model import DEFAULT_META, FlagRecord
from api.controlplane.resources.audit import Restore, restores
from api.controlplane.resources.flags import FlagCode
from api.controlplane.sql_backend import Connection, Row
from api.controlplane.sql_history import new_id
from api.controlplane.sql_slice import SqlSlice


class ScheduleCode(StrEnum):
    # NotFoundError: details["identifier"] is the id the caller gave
    SCHEDULE_NOT_FOUND = "schedule_not_found"
    PENDING_SCHEDULE_NOT_FOUND = "pending_schedule_not_found"
    """Cancelling: no pending schedule of that id for the flag (``flag``)."""
    # a restore refused (ConflictReason.NOT_RESTORABLE): the schedule (``schedule``) has moved
    # past the change
    SCHEDULE_APPLIED = "schedule_applied"
    """The schedule was applied (at ``applied_at``): its flag change is what to restore."""
    SCHEDULE_DUE_TIME_PASSED = "schedule_due_time_passed"
    """The cancelled schedule's time (``due_at``, unix seconds) has passed."""
    # a restore that would change nothing (ConflictReason.NOTHING_TO_RESTORE): ``schedule``
    SCHEDULE_FAILED = "schedule_failed"
    SCHEDULE_ALREADY_CANCELLED = "schedule_already_cancelled"
    SCHEDULE_NOT_CANCELLED = "schedule_not_cancelled"
    """Making it pending again: the schedule is in ``state``, not cancelled."""


def _body_text(body: FlagBody) -> str:
    return msgspec.json.encode(
        {"enabled": body.enabled, "archived": body.archived,
         "rules": [rule_to_json(rule) for rule in body.rules]}
    ).decode()  # fmt: skip


def _schedule(row: Row) -> Schedule:
    raw = msgspec.json.decode(row["flag"])
    body = FlagBody(raw["enabled"], raw["archived"], tuple(map(rule_from_json, raw["rules"])))
    return Schedule(
        row["id"], row["environment_id"], row["flag_key"], row["at"], body,
        ScheduleState(row["state"]), row["created_at"], row["applied_at"], _error(row["error"]),
    )  # fmt: skip


def _error_text(error: RecordedError) -> str:
    """A failed schedule's error as its column keeps it: ``{"code": ..., "details": ...}``."""
    return msgspec.json.encode(error).decode()


def _error(text: str | None) -> RecordedError | str | None:
    """The column read back; text that is not a kept error was written before errors were
    kept by code, and stays the words it was."""
    if text is None:
        return None
    try:
        return msgspec.json.decode(text, type=RecordedError)
    except msgspec.DecodeError:
        return text


class ScheduleStore(Protocol):
    def create_schedule(
        self, environment_id: str, flag_key: str, at: float, body: FlagBody, *,
        actor: str = Actor.SYSTEM,
    ) -> Schedule: ...  # fmt: skip

    def list_schedules(self, environment_id: str, flag_key: str) -> list[Schedule]: ...

    def cancel_schedule(
        self, environment_id: str, flag_key: str, schedule_id: str, *, actor: str = Actor.SYSTEM
    ) -> None:
        """Only a pending schedule can be cancelled (else ``NotFoundError``)."""
        ...

    def apply_due_schedules(self, now: float) -> list[Schedule]:
        """Apply the pending schedules due at ``now`` (unix seconds); safe from every worker."""
        ...


class ScheduleSql(SqlSlice):
    """Scheduled changes in SQL (see ``ScheduleStore``)."""

    codes = ScheduleCode

    def create_schedule(
        self,
        environment_id: str,
        flag_key: str,
        at: float,
        body: FlagBody,
        *,
        actor: str = Actor.SYSTEM,
    ) -> Schedule:
        if not KEY_PATTERN.fullmatch(flag_key):
            raise InvalidError(FlagCode.FLAG_KEY_MALFORMED, "flag_key", value=flag_key)
        made = Schedule(
            new_id("sch_"), environment_id, flag_key, at, body, ScheduleState.PENDING, self._now()
        )
        with self._transaction(write=True) as conn:
            environment = self._require_environment(conn, environment_id)
            self._check_segments_exist(conn, environment.organization_id, body.rules)
            conn.execute(
                "INSERT INTO schedules (id, environment_id, flag_key, at, flag, state, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (made.id, environment_id, flag_key, at, _body_text(body), str(made.state),
                 made.created_at),
            )  # fmt: skip
            self._audit(
                conn, environment.organization_id, actor, "schedule.created",
                f"schedule:{made.id}", None, documents.schedule(made),
            )  # fmt: skip
        return made

    def list_schedules(self, environment_id: str, flag_key: str) -> list[Schedule]:
        rows = self._fetchall(
            "SELECT * FROM schedules WHERE environment_id = ? AND flag_key = ? ORDER BY at, id",
            (environment_id, flag_key),
        )
        return [_schedule(row) for row in rows]

    def cancel_schedule(
        self, environment_id: str, flag_key: str, schedule_id: str, *, actor: str = Actor.SYSTEM
    ) -> None:
        with self._transaction(write=True) as conn:
            self._require_environment(conn, environment_id)
            row = conn.execute(
                "SELECT * FROM schedules WHERE id = ? AND environment_id = ? AND flag_key = ?"
                " AND state = ?",
                (schedule_id, environment_id, flag_key, str(ScheduleState.PENDING)),
            ).fetchone()
            if row is None:
                raise NotFoundError(
                    ScheduleCode.PENDING_SCHEDULE_NOT_FOUND, Resource.SCHEDULE, schedule_id,
                    flag=flag_key,
                )  # fmt: skip
            self._set_schedule_state(
                conn, _schedule(row), ScheduleState.CANCELLED, actor=actor,
                action="schedule.cancelled",
            )  # fmt: skip

    @staticmethod
    def _schedule_in(conn: Connection, schedule_id: str) -> Schedule | None:
        """The schedule in whatever state it is; None when there is no such schedule."""
        row = conn.execute("SELECT * FROM schedules WHERE id = ?", (schedule_id,)).fetchone()
        return _schedule(row) if row else None

    def _set_schedule_state(
        self,
        conn: Connection,
        schedule: Schedule,
        state: ScheduleState,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Cancel ``schedule``, or make it pending again, inside the caller's write transaction,
        and audit it. No version bump: every worker's applier reads the pending schedules each
        tick. Cancelling and restoring both come here."""
        environment = self._require_environment(conn, schedule.environment_id)
        conn.execute("UPDATE schedules SET state = ? WHERE id = ?", (str(state), schedule.id))
        after = dataclasses.replace(schedule, state=state)
        return self._audit(
            conn, environment.organization_id, actor, action, f"schedule:{schedule.id}",
            documents.schedule(schedule), documents.schedule(after), restored_from,
        )  # fmt: skip

    def next_schedule_at(self) -> float | None:
        """When the earliest pending schedule is due (unix seconds); None when none is."""
        row = self._fetchone(
            "SELECT min(at) FROM schedules WHERE state = ?", (str(ScheduleState.PENDING),)
        )
        return row[0]

    def apply_due_schedules(self, now: float) -> list[Schedule]:
        """Apply every pending schedule due at ``now``, oldest first; returns them as applied
        (or failed). Cheap when none is due: one indexed read, no write lock."""
        due_at = self.next_schedule_at()
        if due_at is None or due_at > now:
            return []
        done = []
        with self._transaction(write=True) as conn:
            rows = conn.execute(
                "SELECT * FROM schedules WHERE state = ? AND at <= ? ORDER BY at, id",
                (str(ScheduleState.PENDING), now),
            ).fetchall()
            for row in rows:
                done.append(self._apply_schedule(conn, _schedule(row)))
        return done

    def _apply_schedule(self, conn: Connection, schedule: Schedule) -> Schedule:
        body = schedule.flag
        current = self._flag_in(conn, schedule.environment_id, schedule.flag_key)
        flag = FlagRecord(
            schedule.environment_id, schedule.flag_key, body.enabled, body.archived, body.rules,
            self._now(), current.meta if current else DEFAULT_META,
        )  # fmt: skip
        conn.execute("SAVEPOINT schedule")
        try:
            self._write_flag(conn, flag, actor=Actor.SCHEDULE, action="schedule.applied")
        except ControlPlaneError as exc:
            conn.execute("ROLLBACK TO schedule")
            state, error, applied_at = ScheduleState.FAILED, RecordedError.of(exc), None
        else:
            state, error, applied_at = ScheduleState.APPLIED, None, self._now()
        conn.execute("RELEASE schedule")
        conn.execute(
            "UPDATE schedules SET state = ?, applied_at = ?, error = ? WHERE id = ?",
            (str(state), applied_at, None if error is None else _error_text(error), schedule.id),
        )
        return Schedule(
            schedule.id, schedule.environment_id, schedule.flag_key, schedule.at, body, state,
            schedule.created_at, applied_at, error,
        )  # fmt: skip

    @restores("schedule")
    def _restore_schedule(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """A cancellation is undone by making the schedule pending again, while its time is
        still ahead; a creation by cancelling it, while it is pending."""
        schedule = self._schedule_in(conn, ident)
        if schedule is None:
            raise NotFoundError(ScheduleCode.SCHEDULE_NOT_FOUND, Resource.SCHEDULE, ident)
        pending = record.before is not None and record.before["state"] == ScheduleState.PENDING
        if pending:
            check_can_be_pending_again(schedule, self._clock())
        else:
            check_can_be_cancelled(schedule)
        state = ScheduleState.PENDING if pending else ScheduleState.CANCELLED
        return lambda actor: self._set_schedule_state(
            conn, schedule, state, actor=actor, action="restore", restored_from=record.id
        )


def check_can_be_cancelled(schedule: Schedule) -> None:
    """Only a pending schedule can be cancelled by a restore."""
    if schedule.state is ScheduleState.PENDING:
        return
    if schedule.state is ScheduleState.APPLIED:
        raise ConflictError(
            ScheduleCode.SCHEDULE_APPLIED, ConflictReason.NOT_RESTORABLE, schedule=schedule.id,
            applied_at=schedule.applied_at,
        )  # fmt: skip
    failed = schedule.state is ScheduleState.FAILED
    raise ConflictError(
        ScheduleCode.SCHEDULE_FAILED if failed else ScheduleCode.SCHEDULE_ALREADY_CANCELLED,
        ConflictReason.NOTHING_TO_RESTORE,
        schedule=schedule.id,
    )


def check_can_be_pending_again(schedule: Schedule, now: float) -> None:
    """Only a cancelled schedule whose time is still ahead can be pending again."""
    if schedule.state is not ScheduleState.CANCELLED:
        raise ConflictError(
            ScheduleCode.SCHEDULE_NOT_CANCELLED, ConflictReason.NOTHING_TO_RESTORE,
            schedule=schedule.id, state=str(schedule.state),
        )  # fmt: skip
    if schedule.at <= now:
        raise ConflictError(
            ScheduleCode.SCHEDULE_DUE_TIME_PASSED, ConflictReason.NOT_RESTORABLE,
            schedule=schedule.id, due_at=schedule.at,
        )  # fmt: skip
