"""The guarded rollouts slice: its codes, its part of the store, its SQL and its restore:
the plan, its state, and the guardian's decisions.

A decision is applied in one transaction with everything it implies: the flag's first
percentage rule moved (through ``_write_flag``, so it is audited, announced and served by every
worker within a poll), the rollout's state, the decision with its statistics, the webhook event.
A decision for a step the rollout has already left (a stale guardian run, a concurrent stop)
changes nothing.
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum
from typing import Any, Protocol

import msgspec
from flagsight_core import PercentageRule, first_split

from api.controlplane import documents
from api.controlplane.changes import (
    ROLLOUT_EVENTS,
    Actor,
    AuditRecord,
    JsonDocument,
    Rollout,
    RolloutAction,
    RolloutDecision,
    RolloutPlan,
    RolloutState,
    RolloutWait,
    guarded_metrics,
)
from api.controlplane.errors import ConflictError, ConflictReason, NotFoundError, Resource
from api.controlplane.model import FlagRecord
from api.controlplane.resources.audit import Restore, restores
from api.controlplane.resources.flags import FlagCode
from api.controlplane.sql_backend import Connection, Row
from api.controlplane.sql_slice import SqlSlice


class RolloutCode(StrEnum):
    ROLLOUT_NOT_FOUND = "rollout_not_found"
    """``NotFoundError``: the flag (``identifier``) has no rollout."""
    NO_PERCENTAGE_RULE = "no_percentage_rule"
    """``ConflictError``: a rollout moves the flag's first percentage rule (``flag``)."""
    # a restore that would change nothing (ConflictReason.NOTHING_TO_RESTORE): ``flag``
    ROLLOUT_STILL_ABSENT = "rollout_still_absent"
    ROLLOUT_FLAG_GONE = "rollout_flag_gone"
    """The rollout's flag was deleted since: the rollout cannot come back."""


_NEXT_STATE = {
    RolloutAction.ADVANCED: RolloutState.RUNNING,
    RolloutAction.COMPLETED: RolloutState.COMPLETED,
    RolloutAction.ROLLED_BACK: RolloutState.ROLLED_BACK,
    RolloutAction.HELD: RolloutState.HELD,
}


def with_split_at(flag: FlagRecord, percentage: float, updated_at: str) -> FlagRecord:
    """``flag`` with its first percentage rule at ``percentage`` (ConflictError without one),
    the rest of the rule as it was (its value, its segment)."""
    rules = list(flag.rules)
    index = split_index(flag)
    split: PercentageRule = rules[index]  # type: ignore[assignment]
    rules[index] = replace(split, percentage=percentage)
    return replace(flag, rules=tuple(rules), updated_at=updated_at)


NO_SPLIT_TO_MOVE = (
    "the flag has no percentage rule any more (a person changed its rules): nothing to move;"
    " a person must look"
)
"""Why a decision to move the split holds the rollout instead."""


def split_percentage(flag: FlagRecord) -> float | None:
    """Where the flag's first percentage rule is at, the split a rollout moves; None without
    one."""
    index = first_split(flag.rules)
    return None if index < 0 else flag.rules[index].percentage  # type: ignore[attr-defined]


def same_split(percentage: float, other: float) -> bool:
    """Whether two splits serve alike: the rules' parser takes a percentage within a
    millionth of a point of another as that one."""
    return abs(percentage - other) <= 1e-6


def _still(current: Rollout | None, step: int, step_started_at: float | None) -> bool:
    """Whether ``current`` is the running rollout at the step that was read: the same step
    index, and (when given) the same start of it, which a stop and a new start, a restore or
    a resume all change."""
    return (
        current is not None
        and current.state is RolloutState.RUNNING
        and current.step == step
        and (step_started_at is None or current.step_started_at == step_started_at)
    )


def split_index(flag: FlagRecord) -> int:
    """Where the flag's first percentage rule is, the one a rollout moves (ConflictError
    without one)."""
    index = first_split(flag.rules)
    if index >= 0:
        return index
    raise ConflictError(
        RolloutCode.NO_PERCENTAGE_RULE, ConflictReason.NO_PERCENTAGE_RULE, flag=flag.key
    )


def _decision(row: Row) -> RolloutDecision:
    statistics = row["statistics"]
    return RolloutDecision(
        row["at"],
        row["step"],
        row["percentage"],
        RolloutAction(row["action"]),
        row["reason"],
        None if statistics is None else msgspec.json.decode(statistics),
    )


def _json_or_null(document: JsonDocument | None) -> str | None:
    return None if document is None else msgspec.json.encode(document).decode()


class RolloutStore(Protocol):
    def start_rollout(
        self, environment_id: str, flag_key: str, plan: RolloutPlan, *, actor: str = Actor.SYSTEM
    ) -> Rollout:
        """Replace any rollout of the flag; its first percentage rule goes to the first step
        (``ConflictError`` without one)."""
        ...

    def get_rollout(self, environment_id: str, flag_key: str) -> Rollout | None: ...

    def running_rollouts(self, environment_id: str | None = None) -> list[Rollout]:
        """The running rollouts, of one environment when it is given (a page of one
        environment reads no other tenant's)."""
        ...

    def stop_rollout(
        self, environment_id: str, flag_key: str, *, actor: str = Actor.SYSTEM
    ) -> None:
        """Forget the rollout; the flag stays at its percentage."""
        ...

    def note_rollout(
        self,
        environment_id: str,
        flag_key: str,
        step: int,
        guard: JsonDocument | None,
        waiting_reason: str | None,
        *,
        step_started_at: float | None = None,
        restart_step: bool = False,
    ) -> bool:
        """Record the guardian's latest evidence on ``step`` (``guard``) and, when it waits
        and says why, that it waits (the first wait's time is kept; no reason ends a wait);
        ``restart_step``: the step's time starts again from now (a person holds its split).
        False when the rollout is no longer running at that step (started at
        ``step_started_at``, when given). Not audited: nothing in the control plane changes."""
        ...

    def decide_rollout(
        self,
        environment_id: str,
        flag_key: str,
        step: int,
        action: RolloutAction,
        reason: str,
        statistics: JsonDocument | None,
        *,
        guard: JsonDocument | None = None,
        step_started_at: float | None = None,
    ) -> Rollout | None:
        """Apply the guardian's decision on ``step``, keeping ``guard`` (its evidence) as the
        rollout's latest; None (nothing changed) when the rollout is no longer running at that
        step (started at ``step_started_at``, when given) or a person moved its split. A move
        of a split a person took away holds the rollout instead."""
        ...


class RolloutSql(SqlSlice):
    """Guarded rollouts in SQL (see ``RolloutStore``)."""

    codes = RolloutCode

    def start_rollout(
        self, environment_id: str, flag_key: str, plan: RolloutPlan, *, actor: str = Actor.SYSTEM
    ) -> Rollout:
        with self._transaction(write=True) as conn:
            environment = self._require_environment(conn, environment_id)
            flag = self._flag_in(conn, environment_id, flag_key)
            if flag is None:
                raise NotFoundError(FlagCode.FLAG_NOT_FOUND, Resource.FLAG, flag_key)
            self._check_metric_guardrails(conn, environment.organization_id, plan)
            moved = with_split_at(flag, plan.steps[0], self._now())
            self._put_rollout(
                conn,
                Rollout(environment_id, flag_key, plan, RolloutState.RUNNING, 0, self._clock(),
                        self._now(), ()),
            )  # fmt: skip
            self._write_flag(conn, moved, actor=actor, action="rollout.started")
            return self._rollout_in(conn, environment_id, flag_key)

    def get_rollout(self, environment_id: str, flag_key: str) -> Rollout | None:
        with self._transaction(write=False) as conn:
            return self._rollout_in(conn, environment_id, flag_key, missing_ok=True)

    def running_rollouts(self, environment_id: str | None = None) -> list[Rollout]:
        with self._transaction(write=False) as conn:
            one = "" if environment_id is None else " AND environment_id = ?"
            keys = conn.execute(
                f"SELECT environment_id, flag_key FROM rollouts WHERE state = ?{one}"
                " ORDER BY environment_id, flag_key",
                (str(RolloutState.RUNNING), *([] if environment_id is None else [environment_id])),
            ).fetchall()
            return [self._rollout_in(conn, env, key) for env, key in keys]

    def stop_rollout(
        self, environment_id: str, flag_key: str, *, actor: str = Actor.SYSTEM
    ) -> None:
        with self._transaction(write=True) as conn:
            environment = self._require_environment(conn, environment_id)
            current = self._rollout_in(conn, environment_id, flag_key)
            self._delete_rollout(conn, environment_id, flag_key)
            self._audit(
                conn, environment.organization_id, actor, "rollout.stopped",
                f"rollout:{environment_id}/{flag_key}", documents.rollout(current), None,
            )  # fmt: skip

    def _put_rollout(self, conn: Connection, rollout: Rollout) -> None:
        """Make ``rollout`` the flag's rollout, its decisions included, in place of any other
        (a start: no decisions yet; a restore: those it had)."""
        self._delete_rollout(conn, rollout.environment_id, rollout.flag_key)
        plan = rollout.plan
        waiting = rollout.waiting
        conn.execute(
            "INSERT INTO rollouts (environment_id, flag_key, steps, step_minutes, guardrails,"
            " state, step, step_started_at, created_at, waiting_since, waiting_reason,"
            " tolerances, guard) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (rollout.environment_id, rollout.flag_key,
             msgspec.json.encode(list(plan.steps)).decode(), plan.step_minutes,
             msgspec.json.encode(list(plan.guardrails)).decode(), str(rollout.state),
             rollout.step, rollout.step_started_at, rollout.created_at,
             None if waiting is None else waiting.since,
             None if waiting is None else waiting.reason,
             msgspec.json.encode(dict(plan.tolerance_overrides)).decode(),
             _json_or_null(rollout.guard)),
        )  # fmt: skip
        for made in rollout.decisions:
            self._insert_decision(conn, rollout.environment_id, rollout.flag_key, made)

    def _insert_decision(
        self, conn: Connection, environment_id: str, flag_key: str, made: RolloutDecision
    ) -> None:
        statistics = made.statistics
        conn.execute(
            "INSERT INTO rollout_decisions (environment_id, flag_key, at, step, percentage,"
            " action, reason, statistics) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (environment_id, flag_key, made.at, made.step, made.percentage, str(made.action),
             made.reason, None if statistics is None else msgspec.json.encode(statistics).decode()),
        )  # fmt: skip

    def _delete_rollout(self, conn: Connection, environment_id: str, flag_key: str) -> None:
        for table in ("rollouts", "rollout_decisions"):
            conn.execute(
                f"DELETE FROM {table} WHERE environment_id = ? AND flag_key = ?",
                (environment_id, flag_key),
            )

    def decide_rollout(
        self,
        environment_id: str,
        flag_key: str,
        step: int,
        action: RolloutAction,
        reason: str,
        statistics: JsonDocument | None,
        *,
        guard: JsonDocument | None = None,
        step_started_at: float | None = None,
    ) -> Rollout | None:
        if action is RolloutAction.WAIT:
            raise ValueError("a wait changes nothing and is not recorded")
        with self._transaction(write=True) as conn:
            current = self._rollout_in(conn, environment_id, flag_key, missing_ok=True)
            if not _still(current, step, step_started_at):
                return None  # stale: the rollout moved, stopped or started again since read
            flag = self._flag_in(conn, environment_id, flag_key)
            split = None if flag is None else split_percentage(flag)
            if action is not RolloutAction.HELD and flag is not None:
                if split is None:  # a person took the percentage rule away: nothing to move
                    action, reason = RolloutAction.HELD, NO_SPLIT_TO_MOVE
                elif not same_split(split, current.percentage):
                    return None  # a person moved the split: the guardian waits (guardian.py)
            last = len(current.plan.steps) - 1
            moves = action in (RolloutAction.ADVANCED, RolloutAction.COMPLETED)
            next_step = min(step + 1, last) if moves else step
            percentage = (
                0.0 if action is RolloutAction.ROLLED_BACK else current.plan.steps[next_step]
            )
            conn.execute(
                "UPDATE rollouts SET state = ?, step = ?, step_started_at = ?,"
                " waiting_since = NULL, waiting_reason = NULL, guard = COALESCE(?, guard)"
                " WHERE environment_id = ? AND flag_key = ?",
                (str(_NEXT_STATE[action]), next_step,
                 self._clock() if next_step != step else current.step_started_at,
                 _json_or_null(guard), environment_id, flag_key),
            )  # fmt: skip
            self._insert_decision(
                conn, environment_id, flag_key,
                RolloutDecision(self._now(), step, percentage, action, reason, statistics),
            )  # fmt: skip
            environment = self._require_environment(conn, environment_id)
            if action is RolloutAction.HELD:
                self._audit(
                    conn, environment.organization_id, Actor.ROLLOUT, "rollout.held",
                    f"rollout:{environment_id}/{flag_key}", documents.rollout(current),
                    documents.rollout(self._rollout_in(conn, environment_id, flag_key)),
                )  # fmt: skip
            elif flag is not None:
                moved = with_split_at(flag, percentage, self._now())
                self._write_flag(conn, moved, actor=Actor.ROLLOUT, action=f"rollout.{action}")
            self._emit(
                conn, environment.organization_id, ROLLOUT_EVENTS[action],
                {"environmentId": environment_id, "environmentKey": environment.key,
                 "flagKey": flag_key, "step": step, "percentage": percentage,
                 "action": str(action), "reason": reason, "statistics": statistics},
            )  # fmt: skip
            return self._rollout_in(conn, environment_id, flag_key)

    def note_rollout(
        self,
        environment_id: str,
        flag_key: str,
        step: int,
        guard: JsonDocument | None,
        waiting_reason: str | None,
        *,
        step_started_at: float | None = None,
        restart_step: bool = False,
    ) -> bool:
        with self._transaction(write=True) as conn:
            current = self._rollout_in(conn, environment_id, flag_key, missing_ok=True)
            if not _still(current, step, step_started_at):
                return False  # stale, as for a decision
            started = self._clock() if restart_step else current.step_started_at
            if waiting_reason is None:  # no wait (any earlier one is over)
                changed = conn.execute(
                    "UPDATE rollouts SET guard = ?, step_started_at = ?, waiting_since = NULL,"
                    " waiting_reason = NULL WHERE environment_id = ? AND flag_key = ?"
                    " AND state = ? AND step = ?",
                    (_json_or_null(guard), started, environment_id, flag_key,
                     str(RolloutState.RUNNING), step),
                )  # fmt: skip
            else:
                changed = conn.execute(
                    "UPDATE rollouts SET guard = ?, step_started_at = ?,"
                    " waiting_since = COALESCE(waiting_since, ?), waiting_reason = ?"
                    " WHERE environment_id = ? AND flag_key = ? AND state = ? AND step = ?",
                    (_json_or_null(guard), started, self._clock(), waiting_reason,
                     environment_id, flag_key, str(RolloutState.RUNNING), step),
                )  # fmt: skip
            return changed.rowcount > 0

    def _rollout_in(
        self, conn: Connection, environment_id: str, flag_key: str, missing_ok: bool = False
    ) -> Any:
        row = conn.execute(
            "SELECT * FROM rollouts WHERE environment_id = ? AND flag_key = ?",
            (environment_id, flag_key),
        ).fetchone()
        if row is None:
            if missing_ok:
                return None
            raise NotFoundError(RolloutCode.ROLLOUT_NOT_FOUND, Resource.ROLLOUT, flag_key)
        decisions = conn.execute(
            "SELECT * FROM rollout_decisions WHERE environment_id = ? AND flag_key = ?"
            " ORDER BY seq",
            (environment_id, flag_key),
        ).fetchall()
        tolerances = row["tolerances"]  # NULL in rollouts started before version 5
        plan = RolloutPlan(
            tuple(msgspec.json.decode(row["steps"])),
            row["step_minutes"],
            tuple(msgspec.json.decode(row["guardrails"])),
            tuple(sorted(msgspec.json.decode(tolerances).items())) if tolerances else (),
        )
        waiting = None
        if row["waiting_since"] is not None:
            waiting = RolloutWait(row["waiting_since"], row["waiting_reason"])
        return Rollout(
            environment_id, flag_key, plan, RolloutState(row["state"]), row["step"],
            row["step_started_at"], row["created_at"], tuple(map(_decision, decisions)), waiting,
            None if row["guard"] is None else msgspec.json.decode(row["guard"]),
        )  # fmt: skip

    @restores("rollout")
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
                RolloutCode.ROLLOUT_FLAG_GONE, ConflictReason.NOTHING_TO_RESTORE, flag=flag_key
            )
        current = self._rollout_in(conn, environment_id, flag_key, missing_ok=True)
        if record.before is None and current is None:
            raise ConflictError(
                RolloutCode.ROLLOUT_STILL_ABSENT, ConflictReason.NOTHING_TO_RESTORE, flag=flag_key
            )
        if record.before is not None:
            split_index(flag)  # what the rollout moves must still be there
            guarded = guarded_metrics(record.before["guardrails"])
            self._check_metrics_kept(conn, record, guarded)
            self._check_metric_kinds_kept(conn, record, guarded)

        def write(actor: str) -> AuditRecord:
            if record.before is None:
                self._delete_rollout(conn, environment_id, flag_key)
                restored = None
            else:
                made = current.created_at if current is not None else self._now()
                back = documents.rollout_record(environment_id, flag_key, record.before, made)
                if back.state is RolloutState.RUNNING:  # its step starts again, from now: a
                    # resumed hold would otherwise be past its wait at once, and held again
                    back = replace(back, step_started_at=self._clock(), waiting=None)
                self._put_rollout(conn, back)
                restored = documents.rollout(self._rollout_in(conn, environment_id, flag_key))
            return self._audit(
                conn, environment.organization_id, actor, "restore", record.target,
                None if current is None else documents.rollout(current), restored, record.id,
            )  # fmt: skip

        return write
