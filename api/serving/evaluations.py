"""Serving evaluations: plan metering, the pure core, evaluation ids and the event log.

Shared by ``/v1/evaluate``, ``/v1/evaluate/bulk`` and OFREP so that every way of asking gets
the same answer, the same events and the same metering.
"""

from __future__ import annotations

import calendar
import logging
from collections.abc import Mapping
from typing import NamedTuple

from flagsight_core import (
    NOT_EVALUATED,
    RESULT_CODES,
    RESULTS,
    Attributes,
    Result,
    decide,
    decide_one,
)
from flagsight_core.engine import BYTES, NOT_FOUND, PLAN_LIMIT_EXCEEDED, outside_split
from flagsight_core.ids import bulk_ids
from flagsight_core.model import Flag

from api.controlplane.cache import Caller, EnvironmentConfig
from api.controlplane.model import KeyContext
from api.eventlog import EventLogUnavailable
from api.eventlog.failures import WARNING_INTERVAL_S, Throttled
from api.eventlog.schema import EVALUATION, EvaluationBatch, EvaluationEvent
from api.metering.meter import month_of
from api.native import fastpath
from api.serving.services import Services

log = logging.getLogger("flagsight.serving")

_PLAN_LIMIT_PLAN = RESULT_CODES[PLAN_LIMIT_EXCEEDED]
_PLAN_LIMIT_CODE = BYTES[_PLAN_LIMIT_PLAN]
_NOT_EVALUATED = BYTES[NOT_EVALUATED]
_NOT_FOUND_PLAN = RESULT_CODES[NOT_FOUND]
"""``Flag.plan`` for the outcomes decided before any rule: the plan's limit, a missing flag."""
_NO_TABLE = bytes(256)
"""A code table for a missing flag: never read (its plan is a result code)."""


class Served(NamedTuple):
    """The answers for one request, in the order of the (distinct) users asked for.

    ``outcomes`` holds one result code per user (an index into ``RESULTS``), the form the
    event log stores and the bulk answer is encoded from.
    """

    users: list[str]
    outcomes: bytes
    evaluation_id_prefix: str

    @property
    def results(self) -> list[Result]:
        return [RESULTS[code] for code in self.outcomes]

    @property
    def evaluation_ids(self) -> list[str]:
        return bulk_ids(self.evaluation_id_prefix, len(self.users))


class EvaluationServer:
    """Evaluates one flag for one or many users within an environment and records it all."""

    def __init__(self, services: Services):
        self._services = services
        self._month: tuple[int, float, float] = (0, 0.0, 0.0)
        self._loss_log = Throttled(WARNING_INTERVAL_S, log)

    def serve(
        self,
        key: KeyContext,
        environment: EnvironmentConfig,
        flag_key: str,
        users: list[str],
        *,
        sdk: str | None,
        source: str,
        attributes: Mapping[str, Attributes] | None = None,
    ) -> Served:
        """``users`` must be distinct; ``attributes`` holds, by identifier, the attributes of
        those that have any. Entries past the plan's hard threshold are refused."""
        s = self._services
        now = s.clock()
        granted = self._meter(key.organization_id, now, len(users))
        flag = environment.flags.get(flag_key)
        answered = users if granted == len(users) else users[:granted]
        outcomes, rules = decide(flag, answered, environment.segments, attributes, at=now)
        if granted < len(users):
            outcomes += _PLAN_LIMIT_CODE * (len(users) - granted)
            rules += _NOT_EVALUATED * (len(users) - granted)
            s.metrics.plan_limit_refusals.inc(len(users) - granted)
        prefix = s.ids.issue_prefix(environment.id, len(users)) if users else ""
        outside = outside_split(flag, users, rules, environment.segments, attributes)
        self._record(
            prefix, int(now * 1_000_000), key, environment, flag_key, flag, sdk, source,
            users, outcomes, rules, outside,
        )  # fmt: skip
        return Served(users, outcomes, prefix)

    def serve_one(
        self,
        caller: Caller,
        environment: EnvironmentConfig,
        flag_key: str,
        user: str,
        *,
        sdk: str | None,
        source: str,
        attributes: Attributes | None = None,
    ) -> tuple[int, str]:
        """``serve`` for one user (a single evaluate): its result code and evaluation id
        prefix, with the same metering, event and tallies, in fewer steps: one native call
        (``api.native``) decides, signs and encodes when the module is built and knows every
        rule type of the flag (``Flag.plan`` is None otherwise), with the request's attributes
        or without (a segment of conditions is decided in C by the core's own tests: its
        ``native_plan``)."""
        s = self._services
        now = s.clock()
        key = caller.key
        month = self._month
        if not month[1] <= now < month[2]:
            self._month_of(now)
            month = self._month
        flag = environment.flags.get(flag_key)
        if caller.organization is not None and s.meter.consume(
            key.organization_id, month[0], 1, caller.hard_limit
        ):
            plan = _NOT_FOUND_PLAN if flag is None else flag.plan
        else:
            plan = _PLAN_LIMIT_PLAN
            s.metrics.plan_limit_refusals.inc(1)
        at_us = int(now * 1_000_000)
        if fastpath is not None and plan is not None:
            try:
                code, rule, prefix, frame = fastpath.serve_one(
                    plan,
                    _NO_TABLE if flag is None else flag.code_table,
                    environment.segments,
                    flag_key,
                    user,
                    s.ids.signing_key,
                    environment.id_bytes,
                    s.ids.nonces,
                    at_us,
                    key.organization_id,
                    environment.id,
                    sdk,
                    key.key_id,
                    source,
                    -1 if flag is None else flag.split_rule,
                    None if flag is None else flag.split_percentage,
                    attributes or None,
                )
            except ValueError:  # UnicodeEncodeError among them: the Python path serves it
                pass
            else:
                try:
                    s.event_log.append_evaluation_frame(frame, 1)
                except EventLogUnavailable as exc:
                    self._lost(1, environment.id, exc)
                s.tallies.count_outcomes(BYTES[code])
                return code, prefix
        outside: list[int] = []
        if isinstance(plan, int):  # the plan's limit, a missing, archived or disabled flag
            outcome, rule_byte = BYTES[plan], _NOT_EVALUATED
        else:
            outcome, rule_byte = decide_one(flag, user, environment.segments, attributes, at=now)
            if flag is not None and flag.split_segment is not None:
                users = [user]
                given = {user: attributes} if attributes else None
                outside = outside_split(flag, users, rule_byte, environment.segments, given)
        prefix = s.ids.issue_prefix(environment.id, 1)
        self._record(
            prefix, at_us, key, environment, flag_key, flag, sdk, source, [user], outcome,
            rule_byte, outside,
        )  # fmt: skip
        return outcome[0], prefix

    def _meter(self, organization_id: str, now: float, requested: int) -> int:
        organization = self._services.config.organization(organization_id)
        if organization is None or requested == 0:
            return 0
        return self._services.meter.consume(
            organization_id, self._month_of(now), requested, organization.hard_limit
        )

    def _month_of(self, now: float) -> int:
        """``month_of(now)``, recomputed only when ``now`` leaves the last month seen."""
        month, start, end = self._month
        if not start <= now < end:
            month = month_of(now)
            year, number = divmod(month, 100)
            start = calendar.timegm((year, number, 1, 0, 0, 0))
            end = calendar.timegm((year + number // 12, number % 12 + 1, 1, 0, 0, 0))
            self._month = (month, start, end)
        return month

    def _record(
        self,
        prefix: str,
        at_us: int,
        key: KeyContext,
        environment: EnvironmentConfig,
        flag_key: str,
        flag: Flag | None,
        sdk: str | None,
        source: str,
        users: list[str],
        outcomes: bytes,
        rules: bytes,
        outside: list[int],
    ) -> None:
        """One event batch for the answers (one event per user) and their tallies. If the log
        refuses, flags keep working: the loss is counted.

        ``outside``: the users (their indices) who reached the flag's split rule outside the
        segment it names. A batch's rule bytes would read them as the control arm, so their
        batch is written as its events instead, each with its arm (theirs: neither)."""
        batch = EvaluationBatch(
            prefix,
            at_us,
            key.organization_id,
            environment.id,
            flag_key,
            sdk,
            key.key_id,
            source,
            users,
            outcomes,
            rules,
            -1 if flag is None else flag.split_rule,
            None if flag is None else flag.split_percentage,
        )
        try:  # the log counts what it appended (flagsight_events_logged)
            if outside:
                self._services.event_log.append_evaluations(_without_arm(batch, outside))
            else:
                self._services.event_log.append_evaluation_batch(batch)
        except EventLogUnavailable as exc:
            self._lost(len(users), environment.id, exc)
        self._services.tallies.count_outcomes(outcomes)

    def _lost(self, lost: int, environment_id: str, exc: EventLogUnavailable) -> None:
        """Every loss is counted; the error line is throttled (one per kind and interval,
        with the evaluations lost since the last line), as a full disk loses one batch per
        request and must not flood the logs too."""
        self._services.metrics.events_lost.labels(EVALUATION).inc(lost)
        self._loss_log.warning(
            "evaluation_events_lost",
            "evaluation events not logged",
            exc,
            level=logging.ERROR,
            total_field="lost",
            count=lost,
            reason=str(exc),
            environment_id=environment_id,
        )


def _without_arm(batch: EvaluationBatch, outside: list[int]) -> list[EvaluationEvent]:
    """The batch's events, those of the users at ``outside`` in neither arm."""
    events = batch.events()
    for index in outside:
        events[index] = events[index]._replace(arm=None, rollout_percentage=None)
    return events
