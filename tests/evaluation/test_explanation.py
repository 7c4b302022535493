"""Explain in the core (``flagsight_core.explanation``, ``Rule.explain``): the answer is
``evaluate``'s and the rules explained are those reached, up to the deciding one; a rule that
consults a segment with conditions reports each condition, held or not, through the rule's
generic hook (its fields whose input is a segment), whatever the rule's type."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from flagsight_core import (
    NO_RULE,
    EvaluationContext,
    Flag,
    Result,
    Rule,
    RuleField,
    evaluate,
    register_rule_type,
    rule_from_json,
    unregister_rule_type,
)
from flagsight_core.conditions import Condition, Operator
from flagsight_core.context import context_of
from flagsight_core.contract import ErrorType, OfrepReason
from flagsight_core.engine import deciding_rule
from flagsight_core.explanation import explain
from flagsight_core.registry import Segments, rule_value

COUNTRY = Condition("country", Operator.IN, ("DE", "AT"))
VERSION = Condition("appVersion", Operator.SEMVER_GREATER_THAN, ("2.2.0",))


class ConditionalSegment:
    """A segment as one with conditions offers itself to the rules: a container of its
    listed members, and its ``conditions``."""

    def __init__(self, listed: set[str], conditions: tuple[Condition, ...]):
        self.listed = listed
        self.conditions = conditions

    def __contains__(self, user: object) -> bool:
        return user in self.listed


SEGMENTS: dict[str, Any] = {
    "staff": {"ann", "bob"},
    "europe": ConditionalSegment({"ann"}, (COUNTRY, VERSION)),
}


def rules(*raw: dict[str, Any]) -> tuple[Rule, ...]:
    return tuple(rule_from_json(r) for r in raw)


def test_the_rules_reached_up_to_the_deciding_one() -> None:
    flag = Flag("f", True, False, rules(
        {"type": "SEGMENT", "segment": "staff"},
        {"type": "PERCENTAGE", "percentage": 0},
        {"type": "STATIC", "value": False},
        {"type": "STATIC"},
    ))  # fmt: skip
    found = explain(flag, context_of("bob"), SEGMENTS)
    assert found == (Result(True, "SEGMENT"), ({"index": 0, "type": "SEGMENT", "matched": True},))
    found = explain(flag, context_of("carol"), SEGMENTS)
    assert found.result == Result(False, "STATIC")
    assert found.rules == (
        {"index": 0, "type": "SEGMENT", "matched": False},
        {"index": 1, "type": "PERCENTAGE", "matched": False},
        {"index": 2, "type": "STATIC", "matched": True},
    )


@pytest.mark.parametrize(
    ("flag", "error"),
    [
        (None, ErrorType.FLAG_NOT_FOUND),
        (Flag("f", True, True, rules({"type": "STATIC"})), ErrorType.FLAG_ARCHIVED),
        (Flag("f", False, False, rules({"type": "STATIC"})), ErrorType.FLAG_DISABLED),
        (Flag("f", False, True), ErrorType.FLAG_ARCHIVED),
    ],
)
def test_the_flags_state_decides_before_any_rule(flag: Flag | None, error: ErrorType) -> None:
    assert explain(flag, context_of("u"), {}) == (Result(False, None, error), ())


def test_no_rule_matched() -> None:
    flag = Flag("f", True, False, rules({"type": "PERCENTAGE", "percentage": 0}))
    assert explain(flag, context_of("u"), {}) == (
        Result(False),
        ({"index": 0, "type": "PERCENTAGE", "matched": False},),
    )
    assert explain(Flag("f", True), context_of("u"), {}) == (Result(False), ())


def test_a_segment_with_conditions_reports_each_one() -> None:
    flag = Flag("f", True, False, rules({"type": "SEGMENT", "segment": "europe"}))
    ctx = context_of("ann", {"country": "FR", "appVersion": "2.3.0"})
    [explained] = explain(flag, ctx, SEGMENTS).rules
    assert explained == {
        "index": 0, "type": "SEGMENT", "matched": True,
        "conditions": [{"attribute": "country", "operator": "IN", "held": False},
                       {"attribute": "appVersion", "operator": "SEMVER_GREATER_THAN",
                        "held": True}],
    }  # fmt: skip
    [rule] = flag.rules
    assert rule.segments_consulted() == ("europe",)
    assert rule.conditions_asked(SEGMENTS) == (COUNTRY, VERSION)
    assert rule.conditions_asked({}) == ()  # a segment the worker does not know asks none
    assert "conditions" not in rules({"type": "SEGMENT", "segment": "staff"})[0].explain(
        "f", ctx, SEGMENTS
    )


@dataclass(frozen=True, slots=True)
class SampleWithinRule(Rule):
    """A share of users, optionally within a segment: a rule type with an optional field
    whose input is a segment (the shape of contract 12's percentage within a segment)."""

    every: int
    value: bool = True
    within: str | None = None
    type: ClassVar[str] = "SAMPLE_WITHIN"
    ofrep_reason: ClassVar[str] = OfrepReason.SPLIT
    fields: ClassVar[tuple[RuleField, ...]] = (
        RuleField("every", {"type": "integer", "minimum": 1}, "Every", input="number"),
        RuleField("within", {"type": "string"}, "Within", input="segment", required=False),
    )

    def matches(self, flag_key: str, ctx: EvaluationContext, segments: Segments) -> bool:
        inside = self.within is None or ctx.user in segments.get(self.within, ())
        return inside and len(ctx.user) % self.every == 0

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "every": self.every, "within": self.within,
                "value": self.value}  # fmt: skip

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> SampleWithinRule:
        return cls(raw["every"], rule_value(raw, where), raw.get("within"))


@pytest.fixture
def sample_within() -> Iterator[None]:
    register_rule_type(SampleWithinRule)
    yield
    unregister_rule_type("SAMPLE_WITHIN")


def test_any_rule_type_naming_a_segment_reports_its_conditions(sample_within: None) -> None:
    """No code of explain knows the type: its segment field says which segment it consults."""
    ctx = context_of("ann", {"country": "AT"})
    within = SampleWithinRule(1, within="europe")
    assert within.explain("f", ctx, SEGMENTS) == {
        "matched": True,
        "conditions": [{"attribute": "country", "operator": "IN", "held": True},
                       {"attribute": "appVersion", "operator": "SEMVER_GREATER_THAN",
                        "held": False}],
    }  # fmt: skip
    assert SampleWithinRule(1).explain("f", ctx, SEGMENTS) == {"matched": True}  # none named


RAW_RULES = [
    {"type": "SEGMENT", "segment": "staff"},
    {"type": "SEGMENT", "segment": "europe", "value": False},
    {"type": "SEGMENT", "segment": "missing"},
    {"type": "PERCENTAGE", "percentage": 12.5},
    {"type": "PERCENTAGE", "percentage": 60, "value": False},
    {"type": "STATIC", "value": False},
]


@pytest.mark.parametrize("seed", range(20))
def test_explain_agrees_with_evaluation(seed: int) -> None:
    """The property: for random flags and users, the answer is ``evaluate``'s, the last rule
    explained is ``deciding_rule``'s and only it matched."""
    chance = random.Random(seed)
    raw = chance.sample(RAW_RULES, chance.randint(0, len(RAW_RULES)))
    flag = Flag("flag-" + str(seed), True, False, rules(*raw))
    for user in ["ann", "bob", "carol", *(f"user-{i}" for i in range(30))]:
        attributes = {"country": chance.choice(["DE", "FR"]), "appVersion": "2.3.0"}
        ctx = context_of(user, attributes, 1_800_000_000.0)
        found = explain(flag, ctx, SEGMENTS)
        assert found.result == evaluate(flag, user, SEGMENTS, attributes, at=ctx.at)
        decided = deciding_rule(flag, ctx, SEGMENTS)
        reached = len(flag.rules) if decided == NO_RULE else decided + 1
        assert [r["index"] for r in found.rules] == list(range(reached))
        assert [r["matched"] for r in found.rules] == [i == decided for i in range(reached)]
