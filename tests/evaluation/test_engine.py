"""The pure core against language-neutral JSON cases, and its properties."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flagsight_core import (
    RESULT_CODES,
    RESULTS,
    Flag,
    PercentageRule,
    RuleType,
    SegmentRule,
    StaticRule,
    decide,
    decide_one,
    evaluate,
    evaluate_codes,
    evaluate_many,
    rule_from_json,
    rule_to_json,
)
from flagsight_core.hashing import bucket, buckets
from flagsight_core.model import OUTCOMES, RuleError
from flagsight_core.segments import SegmentMembership
from hypothesis import given
from hypothesis import strategies as st

CASES = json.loads((Path(__file__).parents[1] / "cases" / "evaluation.json").read_text())


def _flag(raw: dict | None) -> Flag | None:
    if raw is None:
        return None
    rules = tuple(rule_from_json(r) for r in raw["rules"])
    return Flag(raw["key"], raw["enabled"], raw["archived"], rules)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_golden_case(case: dict) -> None:
    segments = {k: frozenset(v) for k, v in case["segments"].items()}
    result = evaluate(_flag(case["flag"]), case["userIdentifier"], segments)
    assert {
        "value": result.value,
        "matchedRuleType": result.matched_rule_type,
        "error": result.error_type,
    } == case["expected"]


@given(
    st.lists(st.text(min_size=1, max_size=20), max_size=50),
    st.integers(0, 10000),
    st.integers(0, 10000),
)
def test_raising_a_percentage_never_removes_a_user(users: list[str], a: int, b: int) -> None:
    low, high = sorted((a / 100, b / 100))
    before = evaluate_many(Flag("rollout", True, False, (PercentageRule(low),)), users, {})
    after = evaluate_many(Flag("rollout", True, False, (PercentageRule(high),)), users, {})
    for was, now in zip(before, after, strict=True):
        assert not was.value or now.value


def test_rollout_share_follows_the_percentage() -> None:
    flag = Flag("share", True, False, (PercentageRule(25),))
    on = sum(r.value for r in evaluate_many(flag, [f"u{i}" for i in range(20_000)], {}))
    assert 4_700 < on < 5_300


def test_evaluate_many_matches_evaluate_one_by_one() -> None:
    flag = Flag("f", True, False, (PercentageRule(40), StaticRule(False)))
    users = [f"user-{i}" for i in range(500)]
    assert evaluate_many(flag, users, {}) == [evaluate(flag, u, {}) for u in users]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"type": "RANDOM"}, "rule.type must be one of STATIC, SEGMENT, PERCENTAGE"),
        ({"type": "STATIC", "value": "yes"}, "rule.value must be a boolean"),
        ({"type": "SEGMENT"}, "rule.segment must be a segment key"),
        (
            {"type": "PERCENTAGE", "percentage": 100.5},
            "rule.percentage must be a number from 0 to 100",
        ),
        (
            {"type": "PERCENTAGE", "percentage": True},
            "rule.percentage must be a number from 0 to 100",
        ),
        (
            {"type": "PERCENTAGE", "percentage": 12.345},
            "rule.percentage must have at most two decimals",
        ),
        ("STATIC", "rule must be an object"),
    ],
)
def test_invalid_rules_are_refused_naming_the_field(raw: object, message: str) -> None:
    with pytest.raises(RuleError, match=message.replace(".", r"\.")[:30]):
        rule_from_json(raw)


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "STATIC", "value": False},
        {"type": "SEGMENT", "segment": "beta-testers", "value": True},
        {"type": "PERCENTAGE", "percentage": 12.5, "value": True},
        {"type": "PERCENTAGE", "percentage": 50, "value": False},
    ],
)
def test_rules_round_trip_through_json(raw: dict) -> None:
    assert rule_to_json(rule_from_json(raw)) == raw


def test_matched_rule_type_names_the_rule() -> None:
    assert (
        evaluate(Flag("f", True, False, (StaticRule(),)), "u", {}).matched_rule_type
        is RuleType.STATIC
    )


def test_a_rule_built_with_an_integer_percentage_serialises() -> None:
    assert rule_to_json(PercentageRule(10)) == {
        "type": "PERCENTAGE",
        "percentage": 10,
        "value": True,
    }


_rules = st.lists(
    st.one_of(
        st.builds(StaticRule, st.booleans()),
        st.builds(SegmentRule, st.sampled_from(["a", "b", "missing"]), st.booleans()),
        st.builds(PercentageRule, st.integers(0, 10000).map(lambda b: b / 100), st.booleans()),
    ),
    max_size=4,
)


@given(
    _rules, st.lists(st.text(min_size=1, max_size=12), max_size=40), st.booleans(), st.booleans()
)
def test_batch_evaluation_gives_the_same_answers_as_one_by_one(
    rules, users, enabled, archived
) -> None:
    segments = {"a": frozenset(users[::2]), "b": frozenset(users[::3])}
    flag = Flag("batch", enabled, archived, tuple(rules))
    assert evaluate_many(flag, users, segments) == [evaluate(flag, u, segments) for u in users]


@given(_rules, st.lists(st.text(min_size=1, max_size=12), min_size=8, max_size=60, unique=True))
def test_result_codes_with_worker_segments_match_one_by_one(rules, users) -> None:
    """As the workers run it: segments held as ``SegmentMembership`` tables, looked up in bulk."""
    segments = {
        "a": SegmentMembership.build(users[::2]),
        "b": SegmentMembership.build(users[::3]),
    }
    flag = Flag("batch", True, False, tuple(rules))
    codes = evaluate_codes(flag, users, segments)
    assert [RESULTS[code] for code in codes] == [evaluate(flag, u, segments) for u in users]
    assert all(RESULT_CODES[RESULTS[code]] == code for code in codes)


@given(
    _rules, st.lists(st.text(min_size=1, max_size=12), max_size=20), st.booleans(), st.booleans()
)
def test_decide_one_gives_the_same_answer_as_decide(rules, users, enabled, archived) -> None:
    segments = {"a": SegmentMembership.build(users[::2]), "b": frozenset(users[::3])}
    for flag in (Flag("one", enabled, archived, tuple(rules)), None):
        for user in users:
            assert decide_one(flag, user, segments) == decide(flag, [user], segments)


def test_result_codes_are_the_event_logs_outcomes() -> None:
    """The event log stores result codes as outcome bytes: both tables must agree, in order."""
    assert [tuple(result) for result in RESULTS] == list(OUTCOMES)


def test_batch_buckets_equal_single_buckets() -> None:
    users = [f"u{i}" for i in range(1000)] + ["\ud800", "ünï"]
    assert buckets("flag", users).tolist() == [bucket("flag", u) for u in users]


@pytest.mark.parametrize("kind", [{}, [], 3, None, "GEO"])
def test_a_rule_type_that_is_not_a_known_name_is_refused(kind: object) -> None:
    with pytest.raises(RuleError, match="type must be one of STATIC, SEGMENT, PERCENTAGE"):
        rule_from_json({"type": kind, "value": True})
