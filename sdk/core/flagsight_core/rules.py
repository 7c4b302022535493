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
from flagsight_core.segments import DefinedSegment, member, members_of

_EMPTY: frozenset[str] = frozenset()
_SEGMENT_SCHEMA = {"type": "string", "pattern": KEY_SCHEMA_PATTERN}


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
        RuleField("segment", _SEGMENT_SCHEMA, "Segment", input="segment"),
    )
    native_kind: ClassVar[int | None] = 1

    def matches(self, flag_key: str, ctx: EvaluationContext, segments: Segments) -> bool:
        members = segments.get(self.segment, _EMPTY)
        if type(members) is DefinedSegment:  # ``segments.member``, written out: every request
            return members.includes(ctx)
        return ctx.user in members

    def matches_many(
        self, flag_key: str, contexts: EvaluationContexts, segments: Segments
    ) -> np.ndarray:
        """One call where the segment offers it (``segments.members_of``): a segment of
        lists alone is one table probe per user, with no object made per user."""
        return members_of(segments.get(self.segment, _EMPTY), contexts)

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
    Naming a ``segment`` (contract 12), it applies only to that segment's members: any other
    user goes on to the next rule, and is in neither arm (``applies``, ``engine.arm``).
    """

    percentage: float
    value: bool = True
    segment: str | None = None
    type: ClassVar[str] = RuleType.PERCENTAGE
    ofrep_reason: ClassVar[str] = OfrepReason.SPLIT
    description: ClassVar[str] = "matches a stable share of users (of a segment's, if named)"
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
        RuleField(
            "segment",
            {
                **_SEGMENT_SCHEMA,
                "description": "Optional: the rule applies only to this segment's members;"
                " others go on to the next rule and are in neither release-health arm",
            },
            "Segment",
            prompt="Only within segment (optional)",
            input="segment",
            required=False,
        ),
    )
    native_kind: ClassVar[int | None] = 2
    threshold: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold", threshold(self.percentage))

    def applies(self, ctx: EvaluationContext, segments: Segments) -> bool:
        """Whether the rule decides for this user at all: every user, or its segment's
        members when it names one."""
        return self.segment is None or member(segments.get(self.segment, _EMPTY), ctx)

    def applies_many(self, contexts: EvaluationContexts, segments: Segments) -> np.ndarray:
        """``applies`` for each user, as a boolean array."""
        if self.segment is None:
            return np.ones(len(contexts), dtype=bool)
        return members_of(segments.get(self.segment, _EMPTY), contexts)

    def matches(self, flag_key: str, ctx: EvaluationContext, segments: Segments) -> bool:
        if bucket(flag_key, ctx.user) >= self.threshold:
            return False
        return self.segment is None or member(segments.get(self.segment, _EMPTY), ctx)

    def matches_many(
        self, flag_key: str, contexts: EvaluationContexts, segments: Segments
    ) -> np.ndarray:
        """The buckets in one call; a segment's membership asked only of the users whose
        bucket is below the threshold."""
        hits = buckets(flag_key, contexts.users) < self.threshold
        if self.segment is None:
            return hits
        below = np.flatnonzero(hits)
        if below.size:
            users = contexts.users
            asked = (
                contexts
                if below.size == len(users)
                else contexts.among([users[i] for i in below.tolist()])
            )
            hits[below] = self.applies_many(asked, segments)
        return hits

    def native_parameter(self) -> object:
        return self.threshold

    def to_json(self) -> dict[str, Any]:
        pct = float(self.percentage)
        raw: dict[str, Any] = {
            "type": "PERCENTAGE",
            "percentage": int(pct) if pct.is_integer() else pct,
            "value": self.value,
        }
        if self.segment is not None:
            raw["segment"] = self.segment
        return raw

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> PercentageRule:
        pct = raw.get("percentage")
        if isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 <= pct <= 100:
            raise RuleError(f"{where}.percentage must be a number from 0 to 100")
        if abs(pct * 100 - round(pct * 100)) > 1e-6:
            raise RuleError(f"{where}.percentage must have at most two decimals")
        segment = raw.get("segment")
        if "segment" in raw and (
            not isinstance(segment, str) or not KEY_PATTERN.fullmatch(segment)
        ):
            raise RuleError(f"{where}.segment must be a segment key ({KEY_SPEC})")
        return cls(float(pct), rule_value(raw, where), segment)


# The order below is the result codes' (``RESULTS``), which the event log stores: no match,
# then each rule type's (matched, value true / false), with the errors after the first three.
# Add a rule type at the end.
add_results(Result(False))
register_rule_type(StaticRule)
register_rule_type(SegmentRule)
register_rule_type(PercentageRule)
add_results(*(Result(False, None, error) for error in ErrorType))
