"""Segments defined by conditions and a percentage within a segment (contract 12), in the core:
membership by the definition (listed, then excluded, then every condition), one user and many
alike; a percentage rule that applies only to its segment's members, whose other users are in
neither release-health arm; the native plan handing such flags on; the ruleset carrying it all
to a local client, which decides alike."""

from __future__ import annotations

import json

import numpy as np
import pytest
from flagsight_core import (
    EvaluationContext,
    EvaluationContexts,
    Flag,
    PercentageRule,
    RuleError,
    SegmentRule,
    StaticRule,
    decide,
    decide_one,
    rule_from_json,
)
from flagsight_core.conditions import conditions_from_json
from flagsight_core.engine import arm, outside_split
from flagsight_core.hashing import bucket, threshold
from flagsight_core.model import ARM_CONTROL, ARM_TREATMENT, NO_RULE, arm_of
from flagsight_core.ruleset import (
    FORMAT,
    TARGETING_FORMAT,
    Ruleset,
    ruleset_from_json,
    ruleset_to_json,
)
from flagsight_core.segments import (
    DefinedSegment,
    SaltedMembership,
    SegmentMembership,
    salted,
    segment_of,
)
from hypothesis import given
from hypothesis import strategies as st

SALT = bytes(range(16))
CONDITIONS = conditions_from_json(
    [
        {"attribute": "plan", "operator": "IN", "values": ["pro", "team"]},
        {"attribute": "seats", "operator": "GREATER_OR_EQUAL", "values": [5]},
    ]
)
USERS = [f"user-{i}" for i in range(40)]


def defined(listed=("alice",), excluded=("bob",), conditions=CONDITIONS) -> DefinedSegment:
    segment = segment_of(
        SegmentMembership.build(listed), SegmentMembership.build(excluded), conditions
    )
    assert isinstance(segment, DefinedSegment)
    return segment


# --- membership by the definition -------------------------------------------------------------

PRO = {"plan": "pro", "seats": 5}


@pytest.mark.parametrize(
    ("user", "attributes", "member"),
    [
        ("alice", {}, True),  # listed: in, whatever the conditions say
        ("bob", PRO, False),  # excluded: out, whatever the conditions say
        ("carol", PRO, True),  # every condition holds
        ("carol", {"plan": "pro", "seats": 4}, False),  # one does not
        ("carol", {"plan": "pro", "seats": "5"}, False),  # a string is never a number
        ("carol", {}, False),
    ],
)
def test_listed_then_excluded_then_every_condition(user, attributes, member) -> None:
    segment = defined(listed=["alice", "bob"] if user == "alice" else ["alice"])
    ctx = EvaluationContext(user, attributes)
    assert segment.includes(ctx) is member
    assert segment.includes_many(EvaluationContexts([user], {user: attributes})).tolist() == [
        member
    ]
    assert (user in segment) is segment.includes(EvaluationContext(user))


def test_a_segment_without_conditions_is_its_listed_members() -> None:
    listed = SegmentMembership.build(["alice"])
    assert segment_of(listed, SegmentMembership.build(["alice", "bob"]), ()) is listed


def test_on_the_identifier_alone_it_decides_as_without_attributes() -> None:
    by_identifier = conditions_from_json(
        [{"attribute": "userIdentifier", "operator": "ENDS_WITH", "values": ["@example.com"]}]
    )
    segment = defined(listed=(), excluded=("bob@example.com",), conditions=by_identifier)
    assert "ann@example.com" in segment and "bob@example.com" not in segment
    assert segment.contains_many(["ann@example.com", "bob@example.com", "x"]).tolist() == [
        True, False, False,
    ]  # fmt: skip


attributes_strategy = st.fixed_dictionaries(
    {},
    optional={
        "plan": st.sampled_from(["pro", "team", "free", 3, True]),
        "seats": st.one_of(st.integers(0, 9), st.floats(0, 9), st.sampled_from(["5", None])),
    },
)


@given(
    st.lists(st.sampled_from(USERS), max_size=30),
    st.dictionaries(st.sampled_from(USERS), attributes_strategy),
    st.lists(st.sampled_from(USERS), max_size=8),
    st.lists(st.sampled_from(USERS), max_size=8),
)
def test_many_users_are_decided_as_one_by_one(users, attributes, listed, excluded) -> None:
    segment = defined(listed, excluded)
    contexts = EvaluationContexts(users, attributes)
    assert segment.includes_many(contexts).tolist() == [segment.includes(c) for c in contexts]
    table = salted(segment, SALT)
    assert isinstance(table, DefinedSegment) and table.is_salted
    assert table.includes_many(contexts).tolist() == [segment.includes(c) for c in contexts]


# --- a percentage within a segment ------------------------------------------------------------


def test_a_percentage_names_a_segment_in_its_json() -> None:
    raw = {"type": "PERCENTAGE", "percentage": 12.5, "value": False, "segment": "beta"}
    rule = rule_from_json(raw)
    assert rule == PercentageRule(12.5, False, "beta") and rule.to_json() == raw
    plain = rule_from_json({"type": "PERCENTAGE", "percentage": 10})
    assert plain.segment is None and "segment" not in plain.to_json()
    fields = {f.name: f for f in PercentageRule.fields}
    assert (fields["segment"].input, fields["segment"].required) == ("segment", False)


@pytest.mark.parametrize("segment", [None, "", "has space", 3])
def test_a_percentage_segment_must_be_a_key(segment: object) -> None:
    with pytest.raises(RuleError, match=r"rules\[0\]\.segment must be a segment key"):
        rule_from_json({"type": "PERCENTAGE", "percentage": 1, "segment": segment}, "rules[0]")


def test_it_applies_to_the_members_only() -> None:
    segments = {"beta": defined()}
    rule = PercentageRule(100, True, "beta")
    assert rule.matches("f", EvaluationContext("alice"), segments)
    assert rule.matches("f", EvaluationContext("carol", PRO), segments)
    assert not rule.matches("f", EvaluationContext("carol"), segments)
    assert not rule.matches("f", EvaluationContext("bob", PRO), segments)
    assert not PercentageRule(100, True, "missing").matches("f", EvaluationContext("a"), segments)


def test_its_members_are_bucketed_as_everyone_is() -> None:
    segments = {"beta": SegmentMembership.build(USERS)}
    rule = PercentageRule(30, True, "beta")
    for user in USERS:
        expected = bucket("f", user) < threshold(30)
        assert rule.matches("f", EvaluationContext(user), segments) is expected


def test_a_flag_using_it_takes_the_python_path() -> None:
    within = Flag("f", True, False, (StaticRule(False), PercentageRule(10, True, "beta")))
    assert (within.plan, within.split_rule, within.split_segment) == (None, 1, "beta")
    plain = Flag("f", True, False, (SegmentRule("beta"), PercentageRule(10)))
    assert plain.plan == ((1, "beta"), (2, 1000)) and plain.split_segment is None


_rules = st.lists(
    st.one_of(
        st.builds(StaticRule, st.booleans()),
        st.builds(SegmentRule, st.sampled_from(["plain", "defined", "missing"]), st.booleans()),
        st.builds(
            PercentageRule,
            st.integers(0, 10000).map(lambda b: b / 100),
            st.booleans(),
            st.sampled_from([None, "plain", "defined", "missing"]),
        ),
    ),
    max_size=4,
)


def _segments(users: list[str]) -> dict[str, SegmentMembership]:
    return {
        "plain": SegmentMembership.build(users[::3]),
        "defined": defined(users[::4], users[1::4]),
    }


@given(
    _rules,
    st.lists(st.sampled_from(USERS), min_size=1, max_size=40),
    st.dictionaries(st.sampled_from(USERS), attributes_strategy),
)
def test_many_users_are_decided_as_one_by_one_with_attributes(rules, users, attributes) -> None:
    segments = _segments(USERS)
    flag = Flag("flag", True, False, tuple(rules))
    codes, decided = decide(flag, users, segments, attributes)
    for index, user in enumerate(users):
        one = decide_one(flag, user, segments, attributes.get(user))
        assert (codes[index : index + 1], decided[index : index + 1]) == one


# --- release-health arms ------------------------------------------------------------------------


def _arms(flag: Flag, users: list[str], segments, attributes) -> list[str | None]:
    _codes, rules = decide(flag, users, segments, attributes)
    return [
        arm(flag, rule, EvaluationContext(user, attributes.get(user, {})), segments)
        for user, rule in zip(users, rules, strict=True)
    ]


def test_users_outside_the_split_segment_are_in_neither_arm() -> None:
    segments = {"beta": defined(listed=USERS[:20], excluded=())}
    rules = (SegmentRule("vip"), PercentageRule(50, True, "beta"), StaticRule(False))
    flag = Flag("f", True, False, rules)
    arms = _arms(flag, USERS, segments, {})
    for user, found in zip(USERS, arms, strict=True):
        if user not in USERS[:20]:
            assert found is None  # reached the split outside its segment: neither arm
        elif bucket("f", user) < threshold(50):
            assert found == ARM_TREATMENT
        else:
            assert found == ARM_CONTROL
    assert {ARM_TREATMENT, ARM_CONTROL, None} == set(arms)


@given(
    _rules,
    st.lists(st.sampled_from(USERS), min_size=1, max_size=40),
    st.dictionaries(st.sampled_from(USERS), attributes_strategy),
)
def test_outside_split_names_the_users_whose_rule_byte_misreads_as_control(
    rules, users, attributes
) -> None:
    segments = _segments(USERS)
    flag = Flag("flag", True, False, tuple(rules))
    _codes, decided = decide(flag, users, segments, attributes)
    arms = _arms(flag, users, segments, attributes)
    outside = outside_split(flag, users, decided, segments, attributes)
    misread = [
        index for index, rule in enumerate(decided) if arm_of(rule, flag.split_rule) != arms[index]
    ]
    assert outside == misread
    assert all(arm_of(decided[i], flag.split_rule) == ARM_CONTROL for i in outside)
    if flag.split_segment is None:
        assert outside == []


def test_a_flag_decided_by_no_rule_still_reached_the_split() -> None:
    flag = Flag("f", True, False, (PercentageRule(0, True, "beta"),))
    segments = {"beta": SegmentMembership.build(["member"])}
    _codes, rules = decide(flag, ["member", "other"], segments)
    assert list(rules) == [NO_RULE, NO_RULE]
    assert outside_split(flag, ["member", "other"], rules, segments) == [1]


# --- the ruleset --------------------------------------------------------------------------------


def _served(flags: dict[str, Flag], segments: dict) -> dict:
    document = ruleset_to_json(Ruleset("env_00112233aabbccdd", 9, flags, segments, SALT))
    return json.loads(json.dumps(document))


def test_the_ruleset_carries_conditions_and_salted_exclusions() -> None:
    flags = {"f": Flag("f", True, False, (SegmentRule("beta"),))}
    document = _served(flags, {"beta": defined(listed=["alice"], excluded=["bob@example.com"])})
    assert document["format"] == TARGETING_FORMAT
    shipped = document["segments"]["beta"]
    assert (shipped["members"], shipped["excludedMembers"]) == (1, 1)
    assert shipped["conditions"] == [c.to_json() for c in CONDITIONS]
    assert "bob@example.com" not in json.dumps(document)
    read = ruleset_from_json(document)
    segment = read.segments["beta"]
    assert isinstance(segment, DefinedSegment) and isinstance(segment.excluded, SaltedMembership)
    assert not segment.includes(EvaluationContext("bob@example.com", PRO))
    assert segment.includes(EvaluationContext("carol", PRO))


def test_a_ruleset_without_targeting_stays_format_2() -> None:
    flags = {"f": Flag("f", True, False, (SegmentRule("beta"), PercentageRule(5)))}
    document = _served(flags, {"beta": SegmentMembership.build(["alice"])})
    assert document["format"] == FORMAT
    assert "conditions" not in document["segments"]["beta"]
    within = {"f": Flag("f", True, False, (PercentageRule(5, True, "beta"),))}
    assert _served(within, {"beta": SegmentMembership.build(["a"])})["format"] == TARGETING_FORMAT


@given(
    _rules,
    st.lists(st.sampled_from(USERS), min_size=1, max_size=20),
    st.dictionaries(st.sampled_from(USERS), attributes_strategy),
)
def test_a_local_client_decides_as_the_service(rules, users, attributes) -> None:
    segments = _segments(USERS)
    flag = Flag("flag", True, False, tuple(rules))
    local = ruleset_from_json(_served({"flag": flag}, segments))
    theirs = local.flags["flag"]
    for user in users:
        given_attributes = attributes.get(user)
        mine = decide_one(flag, user, segments, given_attributes)
        assert decide_one(theirs, user, local.segments, given_attributes) == mine
        ctx = EvaluationContext(user, given_attributes or {})
        rule = mine[1][0]
        assert arm(theirs, rule, ctx, local.segments) == arm(flag, rule, ctx, segments)


def test_bulk_membership_is_one_array() -> None:
    segment = defined(listed=USERS[:5], excluded=USERS[5:10])
    found = segment.includes_many(EvaluationContexts(USERS, {u: PRO for u in USERS[::2]}))
    assert isinstance(found, np.ndarray) and found.dtype == bool
    assert found[:5].all() and not found[5:10].any()
