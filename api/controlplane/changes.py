"""Records of what happens to the control plane over time (contract section 10): audit
records, guarded rollouts and their decisions, scheduled flag changes, webhooks and the
deliveries waiting in their outbox.

``before``/``after``/``statistics`` are JSON documents kept as the store received them: the
audit log shows, and a restore puts back, exactly what the API showed at the time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from flagsight_core import Rule

from api.controlplane.catalogue import (
    BUILT_IN,
    BUILT_IN_NAMES,
    CONVERSION_TOLERANCE,
    METRIC_PREFIX,
    metric_key_of,
    metric_measure,
    metric_name,
)
from api.controlplane.errors import RecordedError
from api.controlplane.model import Metric, MetricKind

JsonDocument = dict[str, Any]


class Actor(StrEnum):
    """Who made a change. A schedule's and a restore's records name their origin in ``action``
    and ``restoredFrom``; the dashboard and admin API are told apart for the audit log."""

    ADMIN_API = "admin-api"
    DASHBOARD = "dashboard"
    ROLLOUT = "rollout"
    SCHEDULE = "schedule"
    SYSTEM = "system"  # the CLI (init, demo seeding) and direct use of the store


class RolloutState(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    ROLLED_BACK = "rolledBack"
    HELD = "held"


class RolloutAction(StrEnum):
    """What a guardian decision did; ``WAIT`` is never recorded (nothing changed)."""

    ADVANCED = "advanced"
    COMPLETED = "completed"
    ROLLED_BACK = "rolledBack"
    HELD = "held"
    WAIT = "wait"


GUARDRAILS = BUILT_IN_NAMES
"""The built-in guardrails a rollout may watch: the catalogue's built-in comparisons
(``api.controlplane.catalogue``), the health answer's of the same names; a rollout may also
guard on the organization's metrics (``metric_guardrail``)."""

GUARDRAIL_LABELS = {m.name: m.label for m in BUILT_IN}
"""How people read each guardrail's name (the dashboard; the API and its reasons use the names)."""

GUARDRAIL_UNITS = {m.name: m.unit for m in BUILT_IN}
"""The unit of a guardrail's difference and tolerance: percentage points or milliseconds."""

DEFAULT_TOLERANCES = {m.name: float(m.tolerance or 0.0) for m in BUILT_IN}
"""The largest regression a rollout accepts on each guardrail when its ``PUT`` names none
(contract section 10; why these values: docs/rollouts.md, "Tolerances")."""

METRIC_GUARDRAIL_PREFIX = METRIC_PREFIX
"""A guardrail on an organization's metric is named ``metric:<metricKey>`` (contract 13)."""

DEFAULT_METRIC_TOLERANCES = {MetricKind.CONVERSION: CONVERSION_TOLERANCE}
"""A metric guardrail's tolerance when the ``PUT`` names none: only a conversion has one (1
percentage point, as ``failureRate``); a count, sum or mean is in the events' own unit, which
the service cannot guess, so such a guardrail needs its tolerance (docs/rollouts.md)."""

metric_guardrail = metric_name
guarded_metric = metric_key_of


def guarded_metrics(guardrails: Iterable[str]) -> list[str]:
    """The metric keys a rollout's guardrails guard on, in their order."""
    return [key for key in map(guarded_metric, guardrails) if key is not None]


def guardrail_label(guardrail: str, metric: Metric | None = None) -> str:
    """How people read a guardrail's name: a built-in's label, a metric's own name."""
    if metric is not None:
        return metric_measure(metric).label
    return GUARDRAIL_LABELS.get(guardrail, guardrail)


def guardrail_unit(guardrail: str, metric: Metric | None = None) -> str:
    """A guardrail's unit (``GUARDRAIL_UNITS``; a metric's from its catalogue entry)."""
    if metric is not None:
        return metric_measure(metric).unit
    return GUARDRAIL_UNITS[guardrail]


def default_tolerance(guardrail: str) -> float:
    """A guardrail's tolerance when the rollout names none. A metric guardrail without one is
    a conversion's (the store refuses a rollout whose count, sum or mean guardrail has none)."""
    if guarded_metric(guardrail) is not None:
        return DEFAULT_METRIC_TOLERANCES[MetricKind.CONVERSION]
    return DEFAULT_TOLERANCES[guardrail]


class EventType(StrEnum):
    """Webhook event types (contract section 10)."""

    FLAG_CHANGED = "flag.changed"
    ROLLOUT_ADVANCED = "rollout.advanced"
    ROLLOUT_ROLLED_BACK = "rollout.rolledBack"
    ROLLOUT_HELD = "rollout.held"
    USAGE_THRESHOLD = "usage.threshold"
    FLAG_STALE = "flag.stale"


ROLLOUT_EVENTS = {
    RolloutAction.ADVANCED: EventType.ROLLOUT_ADVANCED,
    RolloutAction.COMPLETED: EventType.ROLLOUT_ADVANCED,  # the last advance, to 100 %
    RolloutAction.ROLLED_BACK: EventType.ROLLOUT_ROLLED_BACK,
    RolloutAction.HELD: EventType.ROLLOUT_HELD,
}

USAGE_THRESHOLDS = (80, 100, 110)
"""Percentages of the monthly limit announced once each per organization and month."""


@dataclass(frozen=True, slots=True)
class AuditRecord:
    id: str
    organization_id: str
    at: str
    actor: str
    action: str
    target: str
    before: JsonDocument | None
    after: JsonDocument | None
    restored_from: str | None = None


@dataclass(frozen=True, slots=True)
class RolloutPlan:
    steps: tuple[float, ...]
    step_minutes: float
    guardrails: tuple[str, ...]
    tolerance_overrides: tuple[tuple[str, float], ...] = ()
    """The tolerances the ``PUT`` named; every other guardrail takes its default."""

    @property
    def tolerances(self) -> dict[str, float]:
        """Each watched guardrail's tolerance, in its unit (``GUARDRAIL_UNITS``)."""
        named = dict(self.tolerance_overrides)
        return {g: float(named.get(g, default_tolerance(g))) for g in self.guardrails}


def step_of(step: int, steps: Sequence[float]) -> str:
    """A rollout's step as people count it: from 1, of how many, at its percentage. The admin
    API's ``step`` is an index into ``steps``, from 0 (contract section 10 keeps it so), so
    ``"step": 0`` of ``[10, 25, 50, 100]`` is step ``1 of 4 (10 %)``; the dashboard and the
    CLI both say it this way (docs/rollouts.md, "Steps")."""
    return f"{step + 1} of {len(steps)} ({steps[step]:g} %)"


@dataclass(frozen=True, slots=True)
class RolloutDecision:
    at: str
    step: int
    percentage: float
    action: RolloutAction
    reason: str
    statistics: JsonDocument | None


@dataclass(frozen=True, slots=True)
class RolloutWait:
    """A step whose time has passed, waiting to be judged: since when, and why."""

    since: float  # unix seconds
    reason: str


@dataclass(frozen=True, slots=True)
class Rollout:
    environment_id: str
    flag_key: str
    plan: RolloutPlan
    state: RolloutState
    step: int
    step_started_at: float  # unix seconds
    created_at: str
    decisions: tuple[RolloutDecision, ...] = ()
    waiting: RolloutWait | None = None
    guard: JsonDocument | None = None
    """The guardian's latest evidence per guardrail (``pipelines.guardian``), or None before
    its first judgement."""

    @property
    def percentage(self) -> float:
        """What the flag's split is at: the current step's, or 0 once rolled back."""
        return 0.0 if self.state is RolloutState.ROLLED_BACK else self.plan.steps[self.step]

    @property
    def step_due_at(self) -> float:
        """When the current step's time has passed (unix seconds)."""
        return self.step_started_at + self.plan.step_minutes * 60.0


class ScheduleState(StrEnum):
    PENDING = "pending"
    APPLIED = "applied"
    CANCELLED = "cancelled"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class FlagBody:
    """A flag as a schedule will put it: what ``PUT .../flags/{flagKey}`` takes."""

    enabled: bool
    archived: bool
    rules: tuple[Rule, ...]


@dataclass(frozen=True, slots=True)
class Schedule:
    id: str
    environment_id: str
    flag_key: str
    at: float  # unix seconds
    flag: FlagBody
    state: ScheduleState
    created_at: str
    applied_at: str | None = None
    error: RecordedError | str | None = None
    """Why a failed schedule could not be applied; text for one that failed before errors
    were kept by code (the words it was given then)."""


@dataclass(frozen=True, slots=True)
class Webhook:
    id: str
    organization_id: str
    url: str
    events: tuple[str, ...]
    created_at: str


@dataclass(frozen=True, slots=True)
class CreatedWebhook:
    """A new webhook: ``secret`` is shown to the caller only here."""

    record: Webhook
    secret: str


@dataclass(frozen=True, slots=True)
class Delivery:
    """One outbox row due for an attempt: the exact body, where and with what to sign it."""

    seq: int
    event_id: str
    webhook_id: str
    url: str
    secret: str
    body: bytes
    attempts: int
    created_at: float
