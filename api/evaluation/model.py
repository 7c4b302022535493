"""Typed flag configuration and evaluation results: the one table of rule types and outcomes.

Every layer derives its names from here: the event log's outcome codes (``RESULTS``), OFREP's
reasons (``RULE_TYPES[...].ofrep_reason``), the admin API's rule JSON and the SDK's known rule
types (checked against this table by ``tests/sdk``).
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, NamedTuple

import numpy as np

from api.evaluation.hashing import bucket, buckets, threshold

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

Segments = Mapping[str, Container[str]]
_EMPTY: frozenset[str] = frozenset()


class RuleError(ValueError):
    """A rule's JSON is not one of the rule shapes; the message says why."""


def _rule_value(raw: dict[str, Any], where: str) -> bool:
    value = raw.get("value", True)
    if not isinstance(value, bool):
        raise RuleError(f"{where}.value must be a boolean")
    return value


@dataclass(frozen=True, slots=True)
class StaticRule:
    """Matches every user that reaches it."""

    value: bool = True
    type: ClassVar[RuleType] = RuleType.STATIC
    ofrep_reason: ClassVar[str] = "STATIC"

    def matches(self, flag_key: str, user: str, segments: Segments) -> bool:
        return True

    def matches_many(self, flag_key: str, users: Sequence[str], segments: Segments) -> np.ndarray:
        return np.ones(len(users), dtype=bool)

    def to_json(self) -> dict[str, Any]:
        return {"type": "STATIC", "value": self.value}

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> StaticRule:
        return cls(_rule_value(raw, where))


@dataclass(frozen=True, slots=True)
class SegmentRule:
    """Matches the members of an organization's segment."""

    segment: str
    value: bool = True
    type: ClassVar[RuleType] = RuleType.SEGMENT
    ofrep_reason: ClassVar[str] = "TARGETING_MATCH"

    def matches(self, flag_key: str, user: str, segments: Segments) -> bool:
        return user in segments.get(self.segment, _EMPTY)

    def matches_many(self, flag_key: str, users: Sequence[str], segments: Segments) -> np.ndarray:
        """One call where the members offer it (``SegmentMembership.contains_many``)."""
        members = segments.get(self.segment, _EMPTY)
        contains_many = getattr(members, "contains_many", None)
        if contains_many is not None:
            return contains_many(users)
        return np.fromiter((user in members for user in users), dtype=bool, count=len(users))

    def to_json(self) -> dict[str, Any]:
        return {"type": "SEGMENT", "segment": self.segment, "value": self.value}

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> SegmentRule:
        segment = raw.get("segment")
        if not isinstance(segment, str) or not FLAG_KEY_PATTERN.fullmatch(segment):
            raise RuleError(f"{where}.segment must be a segment key ([A-Za-z0-9._-]{{1,128}})")
        return cls(segment, _rule_value(raw, where))


@dataclass(frozen=True, slots=True)
class PercentageRule:
    """Matches users whose murmur3 bucket is below the percentage: the randomized rule.

    The first percentage rule of a flag splits the users who reach it into two arms
    (``Flag.split_rule``): those it matches (treatment) and those it does not (control).
    """

    percentage: float
    value: bool = True
    type: ClassVar[RuleType] = RuleType.PERCENTAGE
    ofrep_reason: ClassVar[str] = "SPLIT"
    threshold: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold", threshold(self.percentage))

    def matches(self, flag_key: str, user: str, segments: Segments) -> bool:
        return bucket(flag_key, user) < self.threshold

    def matches_many(self, flag_key: str, users: Sequence[str], segments: Segments) -> np.ndarray:
        return buckets(flag_key, users) < self.threshold

    def to_json(self) -> dict[str, Any]:
        pct = float(self.percentage)
        return {
            "type": "PERCENTAGE",
            "percentage": int(pct) if pct.is_integer() else pct,
            "value": self.value,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> PercentageRule:
        pct = raw.get("percentage")
        if isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 <= pct <= 100:
            raise RuleError(f"{where}.percentage must be a number from 0 to 100")
        if abs(pct * 100 - round(pct * 100)) > 1e-6:
            raise RuleError(f"{where}.percentage must have at most two decimals")
        return cls(float(pct), _rule_value(raw, where))


Rule = StaticRule | SegmentRule | PercentageRule

RULE_TYPES: dict[RuleType, type[StaticRule] | type[SegmentRule] | type[PercentageRule]] = {
    cls.type: cls for cls in (StaticRule, SegmentRule, PercentageRule)
}
"""Every rule type and the class that parses, matches and serializes it."""


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
stores the same bytes (``api.eventlog.schema.OUTCOMES`` is derived from this table): append
only."""

RESULT_CODES: dict[Result, int] = {result: code for code, result in enumerate(RESULTS)}
NO_MATCH_CODE = RESULT_CODES[Result(False)]

OUTCOMES: tuple[tuple[bool, str | None, str | None], ...] = tuple(
    (value, None if rule is None else str(rule), None if error is None else str(error))
    for value, rule, error in RESULTS
)
"""``RESULTS`` as plain (value, matched_rule_type, error_type) strings, as events and metrics
carry them. An event batch stores one byte per user, its index here: append only."""

NO_RULE = 255
"""A user's rule byte when no rule matched."""
NOT_EVALUATED = 254
"""A user's rule byte when the flag's state or the plan decided (an error outcome)."""


@dataclass(frozen=True, slots=True)
class Flag:
    key: str
    enabled: bool
    archived: bool = False
    rules: tuple[Rule, ...] = ()
    code_table: bytes = field(init=False, repr=False, compare=False)
    """``bytes.translate`` table from a user's rule byte (rule index or ``NO_RULE``) to its
    result code: the rules decide an index, the table names the outcome, in C."""
    split_rule: int = field(init=False, repr=False, compare=False)
    """The index of the first percentage rule (the randomized split), or -1."""
    split_percentage: float | None = field(init=False, repr=False, compare=False)
    """That rule's percentage: the share of reaching users in treatment (None without one)."""
    plan: int | tuple[tuple[int, object], ...] = field(init=False, repr=False, compare=False)
    """The flag as ``api.native`` reads it: the result code when its state decides (archived,
    disabled), else each rule as ``(RULE_KINDS[type], segment key or bucket threshold)``."""

    def __post_init__(self) -> None:
        if len(self.rules) >= NOT_EVALUATED:
            raise ValueError(f"a flag holds at most {NOT_EVALUATED - 1} rules")
        table = bytearray([NO_MATCH_CODE]) * 256
        for index, rule in enumerate(self.rules):
            table[index] = RESULT_CODES[Result(rule.value, rule.type)]
        object.__setattr__(self, "code_table", bytes(table))
        split = first_split(self.rules)
        object.__setattr__(self, "split_rule", split)
        percentage = self.rules[split].percentage if split >= 0 else None  # type: ignore[union-attr]
        object.__setattr__(self, "split_percentage", percentage)
        object.__setattr__(self, "plan", _plan(self))


def first_split(rules: Sequence[Rule]) -> int:
    """The index of the first percentage rule, or -1: the randomized split that release
    health compares and a guarded rollout moves."""
    return next((i for i, rule in enumerate(rules) if isinstance(rule, PercentageRule)), -1)


RULE_KINDS = {RuleType.STATIC: 0, RuleType.SEGMENT: 1, RuleType.PERCENTAGE: 2}
"""A rule type's number in ``Flag.plan`` (``api/native/fastpath.c`` has the same)."""


def _plan(flag: Flag) -> int | tuple[tuple[int, object], ...]:
    if flag.archived:
        return RESULT_CODES[Result(False, None, ErrorType.FLAG_ARCHIVED)]
    if not flag.enabled:
        return RESULT_CODES[Result(False, None, ErrorType.FLAG_DISABLED)]
    return tuple((RULE_KINDS[rule.type], _parameter(rule)) for rule in flag.rules)


def _parameter(rule: Rule) -> object:
    if isinstance(rule, SegmentRule):
        return rule.segment
    if isinstance(rule, PercentageRule):
        return rule.threshold
    return None


def rule_from_json(raw: Any, where: str = "rule") -> Rule:
    """Parse one rule of the contract's JSON shape; raise ``RuleError`` naming the field."""
    if not isinstance(raw, dict):
        raise RuleError(f"{where} must be an object")
    kind = raw.get("type")
    cls = RULE_TYPES.get(kind) if isinstance(kind, str) else None  # type: ignore[call-overload]
    if cls is None:
        raise RuleError(f"{where}.type must be one of {', '.join(RULE_TYPES)}")
    return cls.from_json(raw, where)


def rule_to_json(rule: Rule) -> dict[str, Any]:
    return rule.to_json()
