"""Contract 12's conditions (``flagsight_core.conditions``) against the language-neutral cases in
``tests/cases/conditions.json``, and their properties: negations, arrays, numbers, Semantic
Versioning precedence against an oracle written here from the specification, instants written
with offsets against Unix seconds, and expressions that answer in linear time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from flagsight_core.conditions import (
    OPERATORS,
    Condition,
    Operator,
    condition_from_json,
    conditions_from_json,
    explain,
    held,
    in_segment,
)
from flagsight_core.contract import (
    ATTRIBUTE_ARRAY_MAX,
    ATTRIBUTE_NAME_PATTERN,
    ATTRIBUTE_STRING_MAX,
    ATTRIBUTES_MAX,
    CONDITIONS_MAX,
    USER_IDENTIFIER_ATTRIBUTE,
)
from flagsight_core.registry import RuleError
from hypothesis import given
from hypothesis import strategies as st

CASES = json.loads((Path(__file__).parents[1] / "cases" / "conditions.json").read_text())
HOLDS = CASES["cases"] + CASES["oddAttributes"]


# --- the golden cases ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", HOLDS, ids=[c["name"] for c in HOLDS])
def test_golden_case(case: dict, engine) -> None:
    condition = condition_from_json(case["condition"])
    assert condition.holds(case["attributes"], case["userIdentifier"]) is case["holds"]


@pytest.mark.parametrize("case", CASES["invalid"], ids=[c["name"] for c in CASES["invalid"]])
def test_golden_invalid_condition(case: dict) -> None:
    with pytest.raises(RuleError) as raised:
        condition_from_json(case["condition"])
    assert str(raised.value).startswith(case["error"] + " ")


def test_the_cases_hold_and_fail_for_every_operator() -> None:
    outcomes = {(c["condition"]["operator"], c["holds"]) for c in CASES["cases"]}
    assert outcomes == {(operator.value, holds) for operator in Operator for holds in (True, False)}


def test_the_cases_keep_within_what_v1_takes() -> None:
    """``cases`` must run through ``/v1/evaluate`` too: names, sizes and shapes as it takes them."""
    for case in CASES["cases"]:
        attributes = case["attributes"]
        assert len(attributes) <= ATTRIBUTES_MAX and USER_IDENTIFIER_ATTRIBUTE not in attributes
        assert all(ATTRIBUTE_NAME_PATTERN.fullmatch(name) for name in attributes)
        for value in attributes.values():
            assert isinstance(value, str | int | float | list)  # booleans are ints
            items = value if isinstance(value, list) else [value]
            assert len(items) <= ATTRIBUTE_ARRAY_MAX
            assert not isinstance(value, list) or all(isinstance(i, str) for i in items)
            assert all(len(i) <= ATTRIBUTE_STRING_MAX for i in items if isinstance(i, str))


# --- messages -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("x", "condition must be an object"),
        (
            {"attribute": "a b", "operator": "EXISTS"},
            "condition.attribute must be an attribute name ([A-Za-z0-9._-]{1,64})",
        ),
        (
            {"attribute": "a", "operator": "LIKE"},
            "condition.operator must be one of " + ", ".join(Operator),
        ),
        ({"attribute": "a", "operator": "IN", "values": "x"}, "condition.values must be an array"),
        (
            {"attribute": "a", "operator": "IN", "values": []},
            "condition.values must hold 1 to 100 values for IN",
        ),
        (
            {"attribute": "a", "operator": "MATCHES", "values": ["a", "b"]},
            "condition.values must hold exactly 1 value for MATCHES",
        ),
        (
            {"attribute": "a", "operator": "EXISTS", "values": ["a"]},
            "condition.values must hold no values for EXISTS",
        ),
        (
            {"attribute": "a", "operator": "IN", "values": ["a", 1]},
            "condition.values[1] must be a string",
        ),
        (
            {"attribute": "a", "operator": "EQUALS", "values": [None]},
            "condition.values[0] must be a string, a finite number or a boolean",
        ),
        (
            {"attribute": "a", "operator": "LESS_THAN", "values": ["1"]},
            "condition.values[0] must be a finite number",
        ),
        (
            {"attribute": "a", "operator": "SEMVER_EQUALS", "values": ["1.0"]},
            "condition.values[0] must be a Semantic Versioning 2.0.0 version"
            " (such as 1.4.0 or 2.0.0-rc.1)",
        ),
        (
            {"attribute": "a", "operator": "AFTER", "values": ["2025-01-01"]},
            "condition.values[0] must be an RFC 3339 instant with its offset"
            " (such as 2025-06-01T00:00:00Z) or Unix seconds",
        ),
        (
            {"attribute": "a", "operator": "MATCHES", "values": ["("]},
            "condition.values[0] must be an RE2 regular expression of at most 256 characters:"
            " missing ): (",
        ),
    ],
)
def test_messages_name_the_field(raw: Any, message: str) -> None:
    with pytest.raises(RuleError) as raised:
        condition_from_json(raw)
    assert str(raised.value) == message


def test_a_list_of_conditions_names_each_one_and_takes_at_most_twenty() -> None:
    exists = {"attribute": "plan", "operator": "EXISTS"}
    assert len(conditions_from_json([exists] * CONDITIONS_MAX)) == CONDITIONS_MAX
    with pytest.raises(RuleError, match=r"^conditions must hold at most 20 conditions$"):
        conditions_from_json([exists] * (CONDITIONS_MAX + 1))
    with pytest.raises(RuleError, match=r"^segment\.conditions must be an array$"):
        conditions_from_json({}, "segment.conditions")
    bad = {"attribute": "age", "operator": "LESS_THAN", "values": [1, "2"]}
    with pytest.raises(RuleError, match=r"^conditions\[2\]\.values\[1\] must be a finite number$"):
        conditions_from_json([exists, exists, bad])


def test_a_condition_made_in_code_is_checked_as_one_read_from_json() -> None:
    assert Condition("plan", "IN", ["pro"]) == condition_from_json(  # type: ignore[arg-type]
        {"attribute": "plan", "operator": "IN", "values": ["pro"]}
    )
    assert Condition("plan", "IN", ("pro",)).operator is Operator.IN  # type: ignore[arg-type]
    with pytest.raises(RuleError, match=r"^condition\.values\[0\] must be a string$"):
        Condition("plan", Operator.IN, (1,))


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf"), 10**400])
def test_numbers_must_be_finite(number: float) -> None:
    """JSON cannot write these, but Python's parser makes them (``NaN``, ``1e400``)."""
    for operator in ("EQUALS", "LESS_THAN", "BEFORE"):
        with pytest.raises(RuleError, match=r"^condition\.values\[0\] must be "):
            condition_from_json({"attribute": "n", "operator": operator, "values": [number]})
    for operator, values in (("EXISTS", []), ("LESS_THAN", [1e308]), ("GREATER_THAN", [0])):
        condition = condition_from_json({"attribute": "n", "operator": operator, "values": values})
        assert not condition.holds({"n": number}, "u")


@pytest.mark.parametrize(
    "version", ["1.0.0\n", "\u0661.\u0660.\u0660", "1.0.0 ", "1.0.0-0a.\u00e9"]
)
def test_versions_are_ascii_and_whole(version: str) -> None:
    with pytest.raises(RuleError):
        condition_from_json({"attribute": "v", "operator": "SEMVER_EQUALS", "values": [version]})
    condition = condition_from_json(
        {"attribute": "v", "operator": "SEMVER_GREATER_THAN", "values": ["0.0.1"]}
    )
    assert not condition.holds({"v": version}, "u")


# --- expressions --------------------------------------------------------------------------------


@pytest.mark.timeout(20)  # a backtracking engine would run for ages; RE2 takes microseconds
def test_a_catastrophic_expression_answers_in_linear_time() -> None:
    condition = condition_from_json({"attribute": "s", "operator": "MATCHES", "values": ["(a+)+$"]})
    assert condition.holds({"s": "a" * 50_000 + "b"}, "u") is False
    assert condition.holds({"s": "a" * 50_000}, "u") is True
    nested = condition_from_json(
        {"attribute": "s", "operator": "MATCHES", "values": ["^(\\w+\\s?)*$"]}
    )
    assert nested.holds({"s": "word " * 10_000 + "!"}, "u") is False


def test_a_lone_surrogate_is_matched_never_raised() -> None:
    """JSON allows ``"\\ud800"``; the service takes such identifiers (segments hash them)."""
    user = "user-\ud800"
    for operator, values in (("MATCHES", ["^user-"]), ("STARTS_WITH", ["user-"])):
        condition = condition_from_json(
            {"attribute": "userIdentifier", "operator": operator, "values": values}
        )
        assert condition.holds({}, user)
    anything = condition_from_json({"attribute": "s", "operator": "MATCHES", "values": ["^.*$"]})
    assert anything.holds({"s": "\udfff"}, "u")


def test_an_invalid_expression_writes_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    """RE2 logs parse errors to stderr unless told not to; the core writes nothing."""
    with pytest.raises(RuleError):
        condition_from_json({"attribute": "s", "operator": "MATCHES", "values": ["(?<=x)"]})
    assert capfd.readouterr() == ("", "")


# --- type rules as properties -------------------------------------------------------------------

texts = st.text(alphabet="abcAB-é", max_size=4)
string_values = st.lists(texts, min_size=1, max_size=4)
attribute_values = st.one_of(
    texts,
    st.lists(texts, max_size=4),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)


def _condition(operator: str, values: list[Any], attribute: str = "a") -> Condition:
    return condition_from_json({"attribute": attribute, "operator": operator, "values": values})


@given(st.one_of(texts, st.lists(texts, max_size=4)), string_values)
def test_a_negation_is_the_opposite_on_a_present_string(value: Any, values: list[str]) -> None:
    attributes = {"a": value}
    for positive, negated in (("EQUALS", "NOT_EQUALS"), ("IN", "NOT_IN")):
        assert _condition(negated, values).holds(attributes, "u") is not _condition(
            positive, values
        ).holds(attributes, "u")


@given(st.one_of(st.integers(-5, 5), st.floats(allow_nan=False), st.booleans()), string_values)
def test_a_negation_does_not_hold_on_a_mistyped_attribute(value: Any, values: list[str]) -> None:
    for operator in ("NOT_EQUALS", "NOT_IN", "EQUALS", "IN", "CONTAINS"):
        assert not _condition(operator, values).holds({"a": value}, "u")


VALUES_OF = {
    Operator.EQUALS: st.lists(st.one_of(texts, st.integers(-3, 3), st.booleans()), min_size=1),
    Operator.MATCHES: st.sampled_from([["^a"], ["b$"], ["é"], ["(?i)A+"], [""]]),
    Operator.SEMVER_EQUALS: st.lists(st.sampled_from(["1.0.0", "1.0.0-a", "2.0.0"]), min_size=1),
    Operator.BEFORE: st.lists(st.sampled_from(["2025-01-01T00:00:00Z", 0, 1e9]), min_size=1),
    Operator.EXISTS: st.just([]),
}
VALUES_OF |= {o: VALUES_OF[Operator.SEMVER_EQUALS] for o in Operator if o.startswith("SEMVER")}
VALUES_OF |= {Operator.AFTER: VALUES_OF[Operator.BEFORE]}
VALUES_OF |= {
    o: st.lists(st.integers(-3, 3), min_size=1)
    for o in (Operator.LESS_THAN, Operator.LESS_OR_EQUAL, Operator.GREATER_THAN)
}
VALUES_OF |= {Operator.GREATER_OR_EQUAL: VALUES_OF[Operator.LESS_THAN]}
VALUES_OF |= {o: string_values for o in Operator if o not in VALUES_OF}
conditions = st.sampled_from(list(Operator)).flatmap(
    lambda operator: VALUES_OF[operator].map(lambda values: _condition(operator, values))
)
array_elements = st.lists(
    st.one_of(texts, st.sampled_from(["1.0.0", "1.0.0-a", "3.1.4", "2025-06-01T00:00:00+02:00"])),
    min_size=1,
    max_size=4,
)


@given(conditions, array_elements)
def test_an_array_holds_as_its_elements_do(condition: Condition, elements: list[str]) -> None:
    """A positive operator: for some element; a negation: for every element (none equal or in)."""
    each = [condition.holds({"a": element}, "u") for element in elements]
    combine = all if OPERATORS[condition.operator].negated else any
    assert condition.holds({"a": elements}, "u") is combine(each)
    assert condition.holds({"a": tuple(elements)}, "u") is combine(each)


odd_shapes = st.one_of(
    st.none(),
    st.dictionaries(texts, texts, max_size=2),
    st.lists(st.integers(), min_size=1, max_size=3),
    st.lists(st.one_of(texts, st.none()), min_size=1).filter(lambda xs: None in xs),
    st.sampled_from([float("nan"), float("inf"), 10**400, object()]),
)


@given(conditions, odd_shapes)
def test_nothing_holds_on_a_missing_or_odd_attribute(condition: Condition, value: Any) -> None:
    assert not condition.holds({}, "u")
    assert not condition.holds({"b": "x"}, "u")
    assert not condition.holds({"a": value}, "u")


@given(conditions, st.dictionaries(st.sampled_from(["a", "b"]), attribute_values), texts)
def test_holds_is_a_boolean_and_a_condition_reads_back_from_its_json(
    condition: Condition, attributes: dict[str, Any], user: str
) -> None:
    assert isinstance(condition.holds(attributes, user), bool)
    assert condition_from_json(json.loads(json.dumps(condition.to_json()))) == condition


@given(st.one_of(st.integers(-(10**6), 10**6), st.floats(allow_nan=False, allow_infinity=False)))
def test_equals_compares_numbers_never_their_strings(number: float) -> None:
    condition = _condition("EQUALS", [number])
    assert condition.holds({"a": number}, "u")
    assert condition.holds({"a": float(number)}, "u")
    assert not condition.holds({"a": str(number)}, "u")
    assert not condition.holds({"a": json.dumps(number)}, "u")
    assert not _condition("EQUALS", [str(number)]).holds({"a": number}, "u")


# --- Semantic Versioning against an oracle written from the specification ---------------------


def _precedence_key(version: str) -> tuple:
    """SemVer 2.0.0 section 11, written again: major, minor, patch numerically; a version
    without pre-release above one with; identifiers numeric (numerically) below alphanumeric
    (ASCII order), then the longer list above; build metadata ignored."""
    core, _, _build = version.partition("+")
    release, dash, pre = core.partition("-")
    numbers = tuple(int(n) for n in release.split("."))
    if not dash:
        return (numbers, 1, ())
    identifiers = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in pre.split("."))
    return (numbers, 0, identifiers)


identifiers = st.one_of(
    st.integers(0, 12).map(str), st.sampled_from(["alpha", "beta", "rc", "a1", "A", "x-y", "1a"])
)
versions = st.builds(
    lambda numbers, pre, build: (
        ".".join(map(str, numbers))
        + ("-" + ".".join(pre) if pre else "")
        + ("+" + ".".join(build) if build else "")
    ),
    st.tuples(st.integers(0, 2), st.integers(0, 11), st.integers(0, 2)),
    st.lists(identifiers, max_size=3),
    st.lists(st.sampled_from(["build", "001", "sha-5"]), max_size=2),
)


@given(versions, versions)
def test_semver_precedence_follows_the_specification(left: str, right: str) -> None:
    below, above = (
        _precedence_key(left) < _precedence_key(right),
        _precedence_key(left) > _precedence_key(right),
    )
    attributes = {"v": left}
    assert _condition("SEMVER_LESS_THAN", [right], "v").holds(attributes, "u") is below
    assert _condition("SEMVER_GREATER_THAN", [right], "v").holds(attributes, "u") is above
    assert _condition("SEMVER_EQUALS", [right], "v").holds(attributes, "u") is (
        not below and not above
    )


def test_numeric_identifiers_past_pythons_int_limit_order_as_numbers() -> None:
    """Python makes no int of more than 4,300 digits; a pre-release identifier may have more
    (a condition of one was a 500 at PUT). Numerically: more digits is more, and any numeric
    identifier is below an alphanumeric one."""
    long, longer = "1.0.0-" + "9" * 5_000, "1.0.0-1" + "0" * 5_000
    assert _condition("SEMVER_LESS_THAN", [longer], "v").holds({"v": long}, "u")
    assert _condition("SEMVER_GREATER_THAN", [long], "v").holds({"v": longer}, "u")
    assert _condition("SEMVER_LESS_THAN", ["1.0.0-alpha"], "v").holds({"v": longer}, "u")
    assert _condition("SEMVER_EQUALS", [long], "v").holds({"v": long}, "u")


# --- instants -----------------------------------------------------------------------------------


@given(
    st.integers(-(10**9), 4 * 10**9),
    st.integers(-23 * 60 - 59, 23 * 60 + 59),
    st.integers(-2, 2),
    st.sampled_from(["", ".5", ".250", ".000"]),
)
def test_an_instant_with_any_offset_compares_as_its_unix_seconds(
    seconds: int, offset_minutes: int, step: int, fraction: str
) -> None:
    zone = timezone(timedelta(minutes=offset_minutes))
    local = datetime.fromtimestamp(seconds, UTC).astimezone(zone)
    text = local.strftime("%Y-%m-%dT%H:%M:%S") + fraction + local.strftime("%z")
    text = text[:-2] + ":" + text[-2:]  # +0130 -> +01:30, as RFC 3339 writes it
    exact = seconds + float("0" + fraction) if fraction else seconds
    for operator in ("BEFORE", "AFTER"):
        value = seconds + step
        by_text = _condition(operator, [value], "t").holds({"t": text}, "u")
        by_number = _condition(operator, [value], "t").holds({"t": exact}, "u")
        assert by_text is by_number
        assert _condition(operator, [text], "t").holds({"t": value}, "u") is _condition(
            operator, [exact], "t"
        ).holds({"t": value}, "u")


# --- explain and segments -----------------------------------------------------------------------

PRO = condition_from_json({"attribute": "plan", "operator": "EQUALS", "values": ["pro"]})
DE = condition_from_json({"attribute": "country", "operator": "IN", "values": ["DE", "AT"]})


def test_explain_says_which_conditions_held() -> None:
    attributes = {"plan": "pro", "country": "FR"}
    assert held((PRO, DE), attributes, "u") == (True, False)
    assert explain((PRO, DE), attributes, "u") == [
        {"attribute": "plan", "operator": "EQUALS", "held": True},
        {"attribute": "country", "operator": "IN", "held": False},
    ]


@pytest.mark.parametrize(
    ("listed", "excluded", "conditions", "attributes", "member"),
    [
        (True, True, (PRO,), {}, True),  # listed wins over excluded and over conditions
        (True, False, (), {}, True),
        (False, True, (PRO,), {"plan": "pro"}, False),  # excluded wins over conditions
        (False, False, (PRO, DE), {"plan": "pro", "country": "DE"}, True),
        (False, False, (PRO, DE), {"plan": "pro", "country": "FR"}, False),  # every one holds
        (False, False, (), {"plan": "pro"}, False),  # no conditions: the lists alone
    ],
)
def test_segment_membership_by_definition(
    listed: bool, excluded: bool, conditions: tuple, attributes: dict, member: bool
) -> None:
    assert in_segment(listed, excluded, conditions, attributes, "u") is member


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (
            {"attribute": "country", "operator": "IN", "values": ["DE", "AT"]},
            'country is one of "DE", "AT"',
        ),
        ({"attribute": "plan", "operator": "EQUALS", "values": ["pro"]}, 'plan is "pro"'),
        ({"attribute": "seats", "operator": "LESS_THAN", "values": [10]}, "seats is less than 10"),
        ({"attribute": "plan", "operator": "EXISTS"}, "plan is present"),
        (
            {"attribute": "v", "operator": "SEMVER_GREATER_THAN", "values": ["2.3.0"]},
            'v is a version above "2.3.0"',
        ),
    ],
)
def test_a_condition_in_words(raw: dict, words: str) -> None:
    assert condition_from_json(raw).in_words() == words


# --- many users at once -------------------------------------------------------------------------

VALUES = st.one_of(
    st.sampled_from([True, False, 1, 0, 1.0, "1", "DE", "2.4.0", "2.3.0", "a@example.com"]),
    st.lists(st.sampled_from(["DE", "1", "x"]), max_size=2),
    st.just({"an": "object"}),
)


@given(st.lists(st.dictionaries(st.sampled_from(["a", "b"]), VALUES, max_size=2), max_size=30))
def test_a_segment_decides_many_users_as_it_decides_each(people: list[dict[str, Any]]) -> None:
    """``includes_many`` keeps each condition's answer per distinct value: it must tell apart
    what the conditions tell apart (``True`` and ``1``, ``1`` and ``"1"``, a list and a
    string) and decide objects anew, giving the answers ``includes`` gives one by one."""
    from flagsight_core.context import EvaluationContext, EvaluationContexts
    from flagsight_core.segments import DefinedSegment, SegmentMembership

    conditions = (
        _condition("EQUALS", [1], "a"),
        _condition("NOT_IN", ["x"], "b"),
    )
    segment = DefinedSegment(
        SegmentMembership.build(["u0"]), SegmentMembership.build(["u1"]), conditions
    )
    users = [f"u{index}" for index in range(len(people))]
    attributes = dict(zip(users, people, strict=True))
    many = segment.includes_many(EvaluationContexts(users, attributes))
    one_by_one = [segment.includes(EvaluationContext(u, attributes[u])) for u in users]
    assert many.tolist() == one_by_one


@pytest.fixture(params=["the core's RE2", "the service's native RE2"])
def engine(request):
    """Each test of a long column runs with the core's own RE2 and with the one the service
    plugs in (``api.native.expressions``), and leaves none set."""
    from flagsight_core.conditions import use_expressions

    from api.native import expressions

    if request.param == "the service's native RE2":
        assert expressions is not None, "run make install (api.native.build, libre2-dev)"
        use_expressions(expressions)
    yield request.param
    use_expressions(None)


def test_every_case_decides_alike_in_a_long_column(engine) -> None:
    """A bulk request's column of a condition's attribute takes other paths than one value:
    ints compared as one array of doubles, a long column of strings through the host's column
    search for ``MATCHES`` (its ``strings``, for a column of mostly distinct strings). Each
    golden case's value, among enough others of the same kind to take them, is decided as the
    case says."""
    from flagsight_core.conditions import condition_from_json

    from tests.support.condition_cases import HOLDS

    for case in HOLDS:
        condition = condition_from_json(case["condition"])
        value = condition.value_of(case["attributes"], case["userIdentifier"])
        fillers = {str: [f"filler {i}" for i in range(LONG_COLUMN)],  # distinct: as e-mails
                   int: [7] * LONG_COLUMN, float: [7.5] * LONG_COLUMN}  # fmt: skip
        column = [*fillers.get(type(value), [value] * LONG_COLUMN), value]
        assert bool(condition.holds_many(column)[-1]) is case["holds"], case["name"]


LONG_COLUMN = 256
"""Values of a column long enough to take every column path."""
LONG_COLUMN_HALF = 200
"""Pairs of strings in a column long enough for the column search."""


@pytest.mark.parametrize(
    ("values", "operator", "operand"),
    [
        ([3, 10**400, 5], "GREATER_OR_EQUAL", 4),  # an int no double holds never holds
        ([3, -(10**400), 5], "LESS_THAN", 4),
        ([1, 2.5, 3], "GREATER_THAN", 2),  # ints and floats together
        (
            [f"{i}{tail}@example.com" for i in range(LONG_COLUMN_HALF) for tail in ("\ud800", "")],
            "MATCHES",
            "@example",
        ),
    ],
)
def test_a_column_decides_as_each_value_does(
    values: list[Any], operator: str, operand, engine
) -> None:
    """Where a column's fast path is not the value's own (an int beyond every double, a string
    with a lone surrogate, which has no UTF-8 form), the answers are still each value's own."""
    condition = _condition(operator, [operand])
    assert condition.holds_many(values).tolist() == [condition.holds_for(v) for v in values]


def test_an_instant_with_thousands_of_fraction_digits_is_that_instant() -> None:
    """RFC 3339 bounds no fraction; one of 5,000 digits (a 500 at PUT, past Python's int
    limit) is read to its 64th digit, far beyond a double's precision."""
    many = "2024-01-01T00:00:00." + "1" * 5_000 + "Z"
    assert _condition("BEFORE", [many], "t").holds({"t": "2024-01-01T00:00:00.1Z"}, "u")
    assert _condition("AFTER", [many], "t").holds({"t": "2024-01-01T00:00:00.2Z"}, "u")
    assert not _condition("BEFORE", [many], "t").holds({"t": many}, "u")
    assert not _condition("AFTER", [many], "t").holds({"t": 1_704_067_200.1111111}, "u")
