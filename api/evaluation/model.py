"""Typed flag configuration and evaluation results."""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from api.evaluation.hashing import threshold

FLAG_KEY_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,128}")


class RuleType(StrEnum):
    STATIC = "STATIC"
    SEGMENT = "SEGMENT"
    PERCENTAGE = "PERCENTAGE"


class ErrorType(StrEnum):
    FLAG_NOT_FOUND = "FLAG_NOT_FOUND"
    FLAG_ARCHIVED = "FLAG_ARCHIVED"
    FLAG_DISABLED = "FLAG_DISABLED"
    PLAN_LIMIT_EXCEEDED = "PLAN_LIMIT_EXCEEDED"


ERROR_MESSAGES: dict[ErrorType, str] = {
    ErrorType.FLAG_NOT_FOUND: "Flag not found",
    ErrorType.FLAG_ARCHIVED: "Flag archived",
    ErrorType.FLAG_DISABLED: "Flag disabled",
    ErrorType.PLAN_LIMIT_EXCEEDED: "Plan limit exceeded. Upgrade your plan to continue.",
}


@dataclass(frozen=True, slots=True)
class StaticRule:
    value: bool = True
    type: RuleType = field(default=RuleType.STATIC, init=False)


@dataclass(frozen=True, slots=True)
class SegmentRule:
    segment: str
    value: bool = True
    type: RuleType = field(default=RuleType.SEGMENT, init=False)


@dataclass(frozen=True, slots=True)
class PercentageRule:
    percentage: float
    value: bool = True
    type: RuleType = field(default=RuleType.PERCENTAGE, init=False)
    threshold: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold", threshold(self.percentage))


Rule = StaticRule | SegmentRule | PercentageRule


@dataclass(frozen=True, slots=True)
class Flag:
    key: str
    enabled: bool
    archived: bool = False
    rules: tuple[Rule, ...] = ()


class Result(NamedTuple):
    """One evaluation's outcome. ``error_type`` set means ``value`` is false.

    A tuple, so that hashing and comparing one (done per user in bulk answers) is C code.
    """

    value: bool
    matched_rule_type: RuleType | None = None
    error_type: ErrorType | None = None


RESULTS: tuple[Result, ...] = (
    Result(False),
    Result(True, RuleType.STATIC),
    Result(False, RuleType.STATIC),
    Result(True, RuleType.SEGMENT),
    Result(False, RuleType.SEGMENT),
    Result(True, RuleType.PERCENTAGE),
    Result(False, RuleType.PERCENTAGE),
    Result(False, None, ErrorType.FLAG_NOT_FOUND),
    Result(False, None, ErrorType.FLAG_ARCHIVED),
    Result(False, None, ErrorType.FLAG_DISABLED),
    Result(False, None, ErrorType.PLAN_LIMIT_EXCEEDED),
)
"""Every result an evaluation can have. Bulk evaluation answers with one byte per user, an
index here (a *result code*), so that many answers cost no Python object each. The event log
stores the same bytes (``api.eventlog.schema.OUTCOMES`` is this table): append only."""

RESULT_CODES: dict[Result, int] = {result: code for code, result in enumerate(RESULTS)}


Segments = dict[str, Container[str]]


class RuleError(ValueError):
    """A rule's JSON is not one of the three rule shapes; the message says why."""


def _rule_value(raw: dict[str, Any], where: str) -> bool:
    value = raw.get("value", True)
    if not isinstance(value, bool):
        raise RuleError(f"{where}.value must be a boolean")
    return value


def rule_from_json(raw: Any, where: str = "rule") -> Rule:
    """Parse one rule of the contract's JSON shape; raise ``RuleError`` naming the field."""
    if not isinstance(raw, dict):
        raise RuleError(f"{where} must be an object")
    kind = raw.get("type")
    if kind == RuleType.STATIC:
        return StaticRule(_rule_value(raw, where))
    if kind == RuleType.SEGMENT:
        segment = raw.get("segment")
        if not isinstance(segment, str) or not FLAG_KEY_PATTERN.fullmatch(segment):
            raise RuleError(f"{where}.segment must be a segment key ([A-Za-z0-9._-]{{1,128}})")
        return SegmentRule(segment, _rule_value(raw, where))
    if kind == RuleType.PERCENTAGE:
        pct = raw.get("percentage")
        if isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 <= pct <= 100:
            raise RuleError(f"{where}.percentage must be a number from 0 to 100")
        if abs(pct * 100 - round(pct * 100)) > 1e-6:
            raise RuleError(f"{where}.percentage must have at most two decimals")
        return PercentageRule(float(pct), _rule_value(raw, where))
    raise RuleError(f"{where}.type must be one of STATIC, SEGMENT, PERCENTAGE")


def rule_to_json(rule: Rule) -> dict[str, Any]:
    if isinstance(rule, StaticRule):
        return {"type": "STATIC", "value": rule.value}
    if isinstance(rule, SegmentRule):
        return {"type": "SEGMENT", "segment": rule.segment, "value": rule.value}
    pct = float(rule.percentage)
    return {
        "type": "PERCENTAGE",
        "percentage": int(pct) if pct.is_integer() else pct,
        "value": rule.value,
    }
