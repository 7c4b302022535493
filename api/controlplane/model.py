"""Control-plane records: what the admin API manages and evaluation reads."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from flagsight_core import Rule


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
    organization_id: str
    key: str
    size: int
    updated_at: str


@dataclass(frozen=True, slots=True)
class FlagRecord:
    environment_id: str
    key: str
    enabled: bool
    archived: bool
    rules: tuple[Rule, ...]
    updated_at: str


@dataclass(frozen=True, slots=True)
class KeyContext:
    """Who is calling with an API key: the key, its environment and organization."""

    key_id: str
    environment_id: str
    organization_id: str
