"""The rule types: each one class that owns how it matches (one user and many), validates its
JSON, is described in the OpenAPI document, is edited in the dashboard and is encoded for the
native fast path (``flagsight_core.registry`` says what each attribute is for). A rule
decides from the user's evaluation context (``flagsight_core.context``: identifier,
attributes, time), so a rule that reads an attribute or the clock is one class too.

A new rule type is a class here, registered at the end of this module after the others (its
result codes follow theirs: the event log stores them). Nothing else in ``api`` changes: the
admin API, the OpenAPI document, the dashboard's editor, OFREP and the event log read the
registry. Flags that use a type without a ``native_kind`` are served by the Python path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

import numpy as np

from flagsight_core.context import EvaluationContext, EvaluationContexts
from flagsight_core.contract import (
    KEY_PATTERN,
    KEY_SCHEMA_PATTERN,
    KEY_SPEC,
    ErrorType,
    OfrepReason,
)
from flagsight_core.hashing import bucket, buckets, threshold
from flagsight_core.registry import (
    Result,
    Rule,
    RuleError,
    RuleField,
    Segments,
    add_results,
    register_rule_type,
    rule_value,
)

_EMPTY: frozenset[str] = frozenset()


class RuleType(StrEnum):
    """The built-in rule types' names (a registered type's name is its ``Rule.type``)."""

    STATIC = "STATIC"
    SEGMENT = "SEGMENT"
    PERCENTAGE = "PERCENTAGE"


@dataclass(frozen=True, slots=True)
class StaticRule(Rule):
    """Matches every user that reaches it."""

    value: bool = True
    type: ClassVar[str] = RuleType.STATIC
    ofrep_reason: ClassVar[str] = OfrepReason.STATIC
    description: ClassVar[str] = "matches every user"
    native_kind: ClassVar[int | None] = 0

    def matches(self, flag_key: str, ctx: EvaluationContext, segments: Segments) -> bool:
        return True

    def matches_many(
        self, flag_key: str, contexts: EvaluationContexts, segments: Segments
    ) -> np.ndarray:
        return np.ones(len(contexts), dtype=bool)

    def to_json(self) -> dict[str, Any]:
        return {"type": "STATIC", "value": self.value}

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> StaticRule:
        return cls(rule_value(raw, where))


@dataclass(frozen=True, slots=True)
class SegmentRule(Rule):
    """Matches the members of an organization's segment."""

    segment: str
    value: bool = True
    type: ClassVar[str] = RuleType.SEGMENT
    ofrep_reason: ClassVar[str] = OfrepReason.TARGETING_MATCH
    description: ClassVar[str] = "matches the segment's members"
    fields: ClassVar[tuple[RuleField, ...]] = (
        RuleField(
            "segment", {"type": "string", "pattern": KEY_SCHEMA_PATTERN}, "Segment", input="segment"
        ),
    )
    native_kind: ClassVar[int | None] = 1

    def matches(self, flag_key: str, ctx: EvaluationContext, segments: Segments) -> bool:
        return ctx.user in segments.get(self.segment, _EMPTY)

    def matches_many(
        self, flag_key: str, contexts: EvaluationContexts, segments: Segments
    ) -> np.ndarray:
        """One call where the members offer it (``SegmentMembership.contains_many``)."""
        users = contexts.users
        members = segments.get(self.segment, _EMPTY)
        contains_many = getattr(members, "contains_many", None)
        if contains_many is not None:
            return contains_many(users)
        return np.fromiter((user in members for user in users), dtype=bool, count=len(users))

    def native_parameter(self) -> object:
        return self.segment

    def to_json(self) -> dict[str, Any]:
        return {"type": "SEGMENT", "segment": self.segment, "value": self.value}

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> SegmentRule:
        segment = raw.get("segment")
        if not isinstance(segment, str) or not KEY_PATTERN.fullmatch(segment):
            raise RuleError(f"{where}.segment must be a segment key ({KEY_SPEC})")
        return cls(segment, rule_value(raw, where))


@dataclass(frozen=True, slots=True)
class PercentageRule(Rule):
    """Matches users whose murmur3 bucket is below the percentage: the randomized rule.

    The first percentage rule of a flag splits the users who reach it into two arms
    (``Flag.split_rule``): those it matches (treatment) and those it does not (control).
    """

    percentage: float
    value: bool = True
    type: ClassVar[str] = RuleType.PERCENTAGE
    ofrep_reason: ClassVar[str] = OfrepReason.SPLIT
    description: ClassVar[str] = "matches a stable share of users"
    fields: ClassVar[tuple[RuleField, ...]] = (
        RuleField(
            "percentage",
            {
                "type": "number",
                "minimum": 0,
                "maximum": 100,
                "multipleOf": 0.01,
                "description": "At most two decimals; matches when bucket < round(P * 100)",
            },
            "Percentage",
            prompt="Percentage of users (0–100)",
            input="number",
            default="50",
        ),
    )
    native_kind: ClassVar[int | None] = 2
    threshold: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold", threshold(self.percentage))

    def matches(self, flag_key: str, ctx: EvaluationContext, segments: Segments) -> bool:
        return bucket(flag_key, ctx.user) < self.threshold

    def matches_many(
        self, flag_key: str, contexts: EvaluationContexts, segments: Segments
    ) -> np.ndarray:
        return buckets(flag_key, contexts.users) < self.threshold

    def native_parameter(self) -> object:
        return self.threshold

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
        return cls(float(pct), rule_value(raw, where))


# The order below is the result codes' (``RESULTS``), which the event log stores: no match,
# then each rule type's (matched, value true / false), with the errors after the first three.
# Add a rule type at the end.
add_results(Result(False))
register_rule_type(StaticRule)
register_rule_type(SegmentRule)
register_rule_type(PercentageRule)
add_results(*(Result(False, None, error) for error in ErrorType))
