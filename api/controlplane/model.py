"""Control-plane records: what the admin API manages and evaluation reads."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from flagsight_core import Rule
from flagsight_core.conditions import Condition


class Plan(StrEnum):
    FREE = "free"
    PRO = "pro"
    TEAM = "team"
    ENTERPRISE = "enterprise"


PLAN_MONTHLY_LIMITS: dict[Plan, int | None] = {
    Plan.FREE: 10_000,
    Plan.PRO: 1_000_000,
    Plan.TEAM: 10_000_000,
    Plan.ENTERPRISE: None,  # custom: monthlyEvaluationLimit
}


def hard_limit(limit: int) -> int:
    """The hard threshold, ``floor(1.1 x limit)``, in integer arithmetic."""
    return limit * 11 // 10


@dataclass(frozen=True, slots=True)
class Organization:
    id: str
    name: str
    plan: Plan
    monthly_evaluation_limit: int

    @property
    def hard_limit(self) -> int:
        return hard_limit(self.monthly_evaluation_limit)


@dataclass(frozen=True, slots=True)
class Environment:
    id: str
    organization_id: str
    key: str
    name: str
    insights_enabled: bool


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    environment_id: str
    name: str
    created_at: str  # ISO 8601 UTC
    revoked: bool = False


@dataclass(frozen=True, slots=True)
class Segment:
    """A segment's summary: its key, how many identifiers it lists and excludes, and its
    conditions (contract 12); the identifiers themselves are read apart (a million each)."""

    organization_id: str
    key: str
    size: int
    """Distinct identifiers listed (``userIdentifiers``)."""
    updated_at: str
    excluded_size: int = 0
    """Distinct identifiers excluded (``excludedUserIdentifiers``)."""
    conditions: tuple[Condition, ...] = ()


class FlagKind(StrEnum):
    """Whether a flag is meant to be removed one day (contract 14); evaluation ignores it."""

    TEMPORARY = "temporary"
    PERMANENT = "permanent"


OWNER_MAX = 128
"""A flag's ``owner`` is free text of at most this many characters."""


@dataclass(frozen=True, slots=True)
class FlagMeta:
    """What a flag says about its own life: never read by evaluation, only by the lifecycle.

    Kept apart from ``enabled``, ``archived`` and ``rules`` because the writes that change
    those (a rollout's step, a schedule, the dashboard's switch) keep it as it was; only a
    ``PUT`` of the flag (or a restore) sets it."""

    kind: FlagKind = FlagKind.TEMPORARY
    owner: str | None = None
    expires_at: str | None = None  # RFC 3339 UTC, as ``documents.iso_time`` writes it


DEFAULT_META = FlagMeta()


@dataclass(frozen=True, slots=True)
class FlagRecord:
    environment_id: str
    key: str
    enabled: bool
    archived: bool
    rules: tuple[Rule, ...]
    updated_at: str
    meta: FlagMeta = DEFAULT_META

    @property
    def kind(self) -> FlagKind:
        return self.meta.kind

    @property
    def owner(self) -> str | None:
        return self.meta.owner

    @property
    def expires_at(self) -> str | None:
        return self.meta.expires_at


@dataclass(frozen=True, slots=True)
class KeyContext:
    """Who is calling with an API key: the key, its environment and organization."""

    key_id: str
    environment_id: str
    organization_id: str


class MetricKind(StrEnum):
    """What a metric makes of one exposed user's events within its window (contract 13):
    whether it has one, how many, the sum of their values, or that sum over their count."""

    CONVERSION = "conversion"
    COUNT = "count"
    SUM = "sum"
    MEAN = "mean"


class Better(StrEnum):
    """Which direction of a metric's difference is an improvement (the other a regression)."""

    HIGHER = "higher"
    LOWER = "lower"


@dataclass(frozen=True)
class Metric:
    """An organization's metric over tracked events named ``event`` (contract 13), per exposed
    user from its first exposure to ``window_hours`` after it."""

    organization_id: str
    key: str
    name: str
    event: str
    kind: MetricKind
    window_hours: int
    better: Better
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class MetricFollow:
    """A flag environment whose release health compares ``metric`` between its arms: the flag
    follows it, or a guarded rollout of the flag guards on it."""

    organization_id: str
    environment_id: str
    flag_key: str
    metric: Metric
