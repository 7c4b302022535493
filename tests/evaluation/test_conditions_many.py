"""Conditions decided a column at a time (``Condition.holds_many``, ``all_hold_many``) and as
one function per segment (``all_hold``) answer as each condition does for each user alone
(``Condition.holds``, the golden cases' reading): for every operator, on columns of strings,
of floats, of both, with missing attributes, arrays, booleans, integers and odd shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from flagsight_core.conditions import Condition, _items, all_hold, all_hold_many
from flagsight_core.context import MISSING as _MISSING_VALUE
from flagsight_core.context import CodedColumn
from flagsight_core.contract import USER_IDENTIFIER_ATTRIBUTE
from hypothesis import given
from hypothesis import strategies as st

from tests.evaluation.test_conditions import HOLDS, condition_from_json, conditions, odd_shapes

strings = st.sampled_from(
    ["", "a", "b", "ab", "é", "1.0.0", "1.0.0-a", "2.0.0", "3.1.4", "2025-01-01T00:00:00Z",
     "2025-06-01T00:00:00+02:00", "1", "true", "\ud800"]
)  # fmt: skip
floats = st.one_of(
    st.integers(-3, 3).map(float),
    st.sampled_from([0.5, -0.0, 1e9, 1.7e9, float("nan"), float("inf"), float("-inf")]),
)
values = st.one_of(
    strings,
    floats,
    st.integers(-3, 3),
    st.booleans(),
    st.lists(strings, max_size=3),
    st.lists(strings, max_size=3).map(tuple),
    odd_shapes,
)
MISSING = object()
"""A user whose attributes lack the condition's attribute."""


def _attributes(value: object) -> dict[str, Any]:
    return {} if value is MISSING else {"a": value}


@given(conditions, st.lists(st.one_of(strings, st.just(MISSING)), max_size=30))
def test_a_column_of_strings(condition: Condition, column: list[object]) -> None:
    each = [condition.holds(_attributes(v), "u") for v in column]
    rows = [_attributes(v) for v in column]
    assert all_hold_many((condition,), rows, ["u"] * len(rows)).tolist() == each


@given(conditions, st.lists(st.one_of(floats, st.just(MISSING)), max_size=30))
def test_a_column_of_floats(condition: Condition, column: list[object]) -> None:
    each = [condition.holds(_attributes(v), "u") for v in column]
    rows = [_attributes(v) for v in column]
    assert all_hold_many((condition,), rows, ["u"] * len(rows)).tolist() == each
    found = [v for v in column if v is not MISSING]
    assert condition.holds_many(found).tolist() == [condition.holds_for(v) for v in found]


NON_FINITE = [float("inf"), float("-inf"), float("nan"), 2.0, -0.0]


@pytest.mark.parametrize(
    "raw",
    [
        {"attribute": "a", "operator": operator, "values": values}
        for operator in ("LESS_THAN", "LESS_OR_EQUAL", "GREATER_THAN", "GREATER_OR_EQUAL",
                         "EQUALS", "BEFORE", "AFTER")
        for values in ([0], [2], [-1e308, 1e308])
    ]
    + [{"attribute": "a", "operator": "EXISTS"}],
)  # fmt: skip
def test_a_non_finite_float_never_holds_in_a_column(raw: dict[str, Any]) -> None:
    condition = condition_from_json(raw)
    wanted = [condition.holds_for(v) for v in NON_FINITE]
    assert wanted[:3] == [False] * 3
    assert condition.holds_many(NON_FINITE).tolist() == wanted


@given(conditions, st.lists(st.one_of(values, st.just(MISSING)), max_size=30))
def test_a_column_of_anything(condition: Condition, column: list[object]) -> None:
    each = [condition.holds(_attributes(v), "u") for v in column]
    rows = [_attributes(v) for v in column]
    assert all_hold_many((condition,), rows, ["u"] * len(rows)).tolist() == each
    found = [v for v in column if v is not MISSING]
    assert condition.holds_many(found).tolist() == [condition.holds_for(v) for v in found]


@given(
    st.lists(conditions, min_size=1, max_size=4),
    st.lists(st.tuples(strings, st.dictionaries(st.just("a"), values)), max_size=20),
)
def test_several_conditions_many_users(
    several: list[Condition], users: list[tuple[str, dict[str, Any]]]
) -> None:
    by_identifier = condition_from_json(
        {"attribute": USER_IDENTIFIER_ATTRIBUTE, "operator": "IN", "values": ["a", "b", "é"]}
    )
    for chosen in (tuple(several), (*several, by_identifier), (by_identifier, *several)):
        wanted = [all(c.holds(attrs, user) for c in chosen) for user, attrs in users]
        hold = all_hold(chosen)
        assert [hold(attrs, user) for user, attrs in users] == wanted
        found = all_hold_many(chosen, [attrs for _, attrs in users], [u for u, _ in users])
        assert isinstance(found, np.ndarray) and found.dtype == bool
        assert found.tolist() == wanted


@pytest.mark.parametrize("case", HOLDS, ids=[c["name"] for c in HOLDS])
def test_golden_case_as_a_column(case: dict) -> None:
    """Each case among others (a column of three users: the case's, and two without it)."""
    condition = condition_from_json(case["condition"])
    user = case["userIdentifier"]
    rows = [{}, case["attributes"], {"other": 1}]
    found = all_hold_many((condition,), rows, ["x", user, "y"])
    assert found.tolist()[1] is case["holds"]
    assert all_hold((condition,))(case["attributes"], user) is case["holds"]


BIG_INTS = [0, 5, -5, 2**53 + 1, 10**308, -(10**308), 2**1024, 10**400, -(10**400)]


@pytest.mark.parametrize(
    "raw",
    [
        {"attribute": "a", "operator": operator, "values": values}
        for operator in ("LESS_THAN", "GREATER_OR_EQUAL", "EQUALS", "BEFORE", "AFTER")
        for values in ([0], [5], [9007199254740992], [1e308])
    ]
    + [{"attribute": "a", "operator": "EXISTS"}, {"attribute": "a", "operator": "NOT_IN",
                                                  "values": ["5"]}],
)  # fmt: skip
def test_an_int_is_decided_as_the_double_it_is(raw: dict[str, Any]) -> None:
    """An int's own path (``Condition.holds_for``, ``all_hold``) answers as the general one
    (its elements, ``_items``): compared as a double, one no double holds never holding."""
    condition = condition_from_json(raw)
    hold = all_hold((condition,))
    for value in BIG_INTS:
        items = _items(value)
        general = items is not None and condition._decide(items)
        assert condition.holds_for(value) is general, value
        assert hold({"a": value}, "u") is general, value
    assert condition.holds_many(BIG_INTS).tolist() == [condition.holds_for(v) for v in BIG_INTS]


@pytest.mark.parametrize("pattern", ["^a", "é$", "(?i)B+", "", "^$", "\\d{2}", "^.*$"])
def test_a_column_of_distinct_strings_matched_at_once(pattern: str) -> None:
    condition = condition_from_json({"attribute": "a", "operator": "MATCHES", "values": [pattern]})
    column = ["", "a", "ab", "bb", "é", "xé", "\ud800", "12", "a\n", "Ba", "日本語", "a1b22"]
    assert condition.holds_many(column).tolist() == [condition.holds_for(v) for v in column]


@given(
    conditions,
    st.lists(st.one_of(values, st.just(_MISSING_VALUE)), max_size=30),
    st.sets(st.sampled_from([str, float, int, bool, tuple, list, type(_MISSING_VALUE)])),
)
def test_kinds_given_by_a_reader_decide_as_kinds_found(
    condition: Condition, column: list[object], more: set[type]
) -> None:
    """A reader may name the column's kinds (the native decoder does), every type among the
    values and perhaps more: the answers are those of kinds found by looking at each value."""
    kinds = frozenset(map(type, column)) | more
    wanted = [condition.holds_for(v) for v in column]
    assert condition.holds_many(column, kinds).tolist() == wanted
    assert condition.holds_many(column, frozenset(map(type, column))).tolist() == wanted


@pytest.mark.parametrize("kinds", [frozenset({int}), frozenset({int, float}), frozenset({str})])
def test_an_empty_column_with_kinds_named_decides_nothing(kinds: frozenset[type]) -> None:
    """What hypothesis found: a reader's kinds may name ints for an empty column."""
    for raw in ({"attribute": "a", "operator": "GREATER_THAN", "values": [1]},
                {"attribute": "a", "operator": "EQUALS", "values": ["x"]}):  # fmt: skip
        assert condition_from_json(raw).holds_many([], kinds).tolist() == []


@given(
    conditions,
    st.lists(st.one_of(strings, floats, st.booleans()), max_size=6, unique_by=repr),
    st.lists(st.integers(0, 6), max_size=30),
    st.lists(st.integers(0, 29), max_size=30),
)
def test_a_coded_column_decides_as_its_values(
    condition: Condition, distinct: list[object], picks: list[int], chosen: list[int]
) -> None:
    """A ``CodedColumn`` (the native decoder's column of few distinct values) is decided a
    distinct value at a time: as the list of its values, whole and any rows of it."""
    coded_values = (_MISSING_VALUE, *distinct)
    codes = np.array([p % len(coded_values) for p in picks], dtype=np.uint8)
    column = CodedColumn(coded_values, codes)
    listed = column.values()
    assert listed == [coded_values[p] for p in codes.tolist()]
    wanted = [condition.holds_for(v) for v in listed]
    assert condition.holds_many(column).tolist() == wanted
    rows = np.array([c for c in chosen if c < len(codes)], dtype=np.intp)
    some = CodedColumn(coded_values, codes[rows])
    assert condition.holds_many(some).tolist() == [wanted[i] for i in rows.tolist()]
