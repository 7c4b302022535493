"""The native decoder of a bulk request's attributes (``attribute_columns.c``) against the Python
path it stands in for: msgspec's typed decoding (``ATTRIBUTES_BY_USER``), the names' check and
the users' check (``api.web.public.evaluate.decode_bulk``).

Whatever the native decoder takes, the Python path takes too, with equal values (each value's
type and, for a number, its bits); whatever the Python path refuses, the native decoder hands
on (None). It may hand on more than that (an escaped name, a surrogate pair in a name, more
distinct names than ``COLUMNS_MAX``), but never the common shape: a body of plain names and
values is read natively, or the speed it exists for is gone."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import msgspec
import numpy as np
import pytest
from flagsight_core.attribute_rules import valid_names_by_user
from flagsight_core.context import MISSING, AttributeColumns, CodedColumn
from flagsight_core.contract import (
    ATTRIBUTE_ARRAY_MAX,
    ATTRIBUTE_NAME_MAX,
    ATTRIBUTE_STRING_MAX,
    ATTRIBUTES_MAX,
    USER_IDENTIFIER_ATTRIBUTE,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from api.native import fastpath
from api.web.attributes import ATTRIBUTES_BY_USER
from api.web.public.evaluate import COLUMNS_MAX

pytestmark = pytest.mark.skipif(fastpath is None, reason="the native path is switched off")

USERS = [f"user-{i}" for i in range(6)] + ["ünï", "😀-user"]
ROWS = {user: row for row, user in enumerate(USERS)}
_TYPED = msgspec.json.Decoder(ATTRIBUTES_BY_USER)


def _python(text: bytes) -> dict[str, dict[str, Any]] | None:
    """What the Python path makes of the attributes, or None where it refuses them."""
    try:
        decoded = _TYPED.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    if decoded and not valid_names_by_user(decoded):
        return None
    if any(user not in ROWS for user in decoded):
        return None
    return {user: attributes for user, attributes in decoded.items() if attributes}


def _columns(text: bytes, max_columns: int = COLUMNS_MAX) -> dict[str, list] | None:
    """The native decoder over ``text`` as a request's attributes (a view of the body); the
    kinds it gives with them are every column's types, exactly (``Condition.holds_many``
    chooses its way by them)."""
    body = b'{"userIdentifiers":[],"attributes":' + text + b"}"
    at = body.index(b":", body.index(b'"attributes"')) + 1
    view = memoryview(body)[at : at + len(text)]
    kinds: dict[str, frozenset[type]] = {}
    coded: dict[str, tuple[tuple[object, ...], bytes]] = {}
    columns = fastpath.attribute_columns(body, view, ROWS, MISSING, max_columns, kinds, coded)
    assert columns == fastpath.attribute_columns(body, view, ROWS, MISSING, max_columns)
    if columns is not None:
        assert kinds == {name: frozenset(map(type, column)) for name, column in columns.items()}
        _check_coded(columns, coded)
    return columns


def _value_key(value: Any) -> tuple:
    """What tells two decoded values apart: their type, and a number's bits."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    return (type(value).__name__, value)


def _check_coded(columns: dict[str, list], coded: dict[str, tuple[tuple, bytes]]) -> None:
    """A column is coded exactly when its values are strings, numbers and booleans of at most
    255 distinct ones; then ``MISSING`` comes first among the distinct values, each is there
    once, and each row's code names the very object its list holds."""
    for name, column in columns.items():
        present = [v for v in column if v is not MISSING]
        codable = all(type(v) in (str, float, bool) for v in present)
        few = len({_value_key(v) for v in present}) <= 255
        assert (name in coded) == (codable and few), name
        if name not in coded:
            continue
        distinct, codes = coded[name]
        assert distinct[0] is MISSING and len(codes) == len(column)
        assert len({_value_key(v) for v in distinct[1:]}) == len(distinct) - 1
        assert all(distinct[code] is value for code, value in zip(codes, column, strict=True))


def _native(text: bytes) -> dict[str, dict[str, Any]] | None:
    columns = _columns(text)
    if columns is None:
        return None
    return dict(AttributeColumns(USERS, ROWS, columns))


def _exactly(attributes: dict[str, dict[str, Any]]) -> dict:
    """Values compared with their types and a number's bits (-0.0 is not 0.0)."""
    return {u: {n: _value_key(v) for n, v in a.items()} for u, a in attributes.items()}


def _agree(text: bytes) -> dict | None:
    native, python = _native(text), _python(text)
    if native is not None:
        assert python is not None, f"native took what Python refuses: {text[:300]!r}"
        assert _exactly(native) == _exactly(python), text[:300]
    return native


# --- random bodies --------------------------------------------------------------------------

NAMES = st.one_of(
    st.sampled_from(["plan", "country", "a", "x.y_z-1", "A" * ATTRIBUTE_NAME_MAX]),
    st.text(alphabet="abcXYZ09._-", min_size=1, max_size=ATTRIBUTE_NAME_MAX + 2),
    st.sampled_from(["", " bad", "ü", "a/b", USER_IDENTIFIER_ATTRIBUTE, "B" * 65]),
)
STRINGS = st.one_of(
    st.text(max_size=12),
    st.text(alphabet='aé😀"\\\n\t\x00\x7f/', max_size=12),
    st.sampled_from(
        ["a" * ATTRIBUTE_STRING_MAX, "é" * ATTRIBUTE_STRING_MAX, "😀" * 1025, "b" * 1025]
    ),
)
NUMBERS = st.one_of(
    st.integers(min_value=-(10**25), max_value=10**25),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -0.0, 2**53 + 1, 10**18 - 1, 10**19 + 7, -(2**63), 2**64]),
)
VALUES = st.one_of(
    STRINGS,
    NUMBERS,
    st.booleans(),
    st.none(),
    st.lists(STRINGS, max_size=4),
    st.lists(st.one_of(STRINGS, NUMBERS), min_size=1, max_size=3),
    st.sampled_from([["x"] * ATTRIBUTE_ARRAY_MAX, ["x"] * (ATTRIBUTE_ARRAY_MAX + 1), {"a": 1}]),
)
USERS_NAMED = st.one_of(st.sampled_from(USERS), st.sampled_from(["stranger", ""]))
BODIES = st.dictionaries(USERS_NAMED, st.dictionaries(NAMES, VALUES, max_size=6), max_size=5)


def _write(body: Any, ensure_ascii: bool, spaced: bool) -> bytes:
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps(body, ensure_ascii=ensure_ascii, separators=separators).encode()


@settings(max_examples=600)
@given(BODIES, st.booleans(), st.booleans())
def test_random_attributes_are_read_as_the_python_path_reads_them(
    body: dict, ensure_ascii: bool, spaced: bool
) -> None:
    _agree(_write(body, ensure_ascii, spaced))


@settings(max_examples=300)
@given(BODIES, st.integers(min_value=0, max_value=400), st.binary(min_size=1, max_size=3))
def test_damaged_bodies_are_never_taken_wrongly(body: dict, at: int, junk: bytes) -> None:
    """Bytes cut, inserted or replaced anywhere: taken only where both agree."""
    text = _write(body, False, False)
    at = min(at, len(text))
    for damaged in (text[:at], text[:at] + junk + text[at:], text[:at] + junk + text[at + 1 :]):
        _agree(damaged)


@settings(max_examples=300)
@given(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(10**40), 10**40))
def test_numbers_are_read_to_the_same_double(number: float | int) -> None:
    for text in (json.dumps(number), f"{number!r}".replace("inf", "1e999")):
        body = b'{"user-0":{"n":' + text.encode() + b"}}"
        _agree(body)


@pytest.mark.parametrize(
    "literal", ["-0", "0", "-0.0", "1e-400", "-1e-400", "1E+2", "0.1e1", "123456789012345678",
                "1234567890123456789", "-9223372036854775808", "18446744073709551617",
                "9007199254740993", "1" * 40, "2.5e308", "1e999"],
)  # fmt: skip
def test_number_literals(literal: str) -> None:
    _agree(b'{"user-0":{"n":' + literal.encode() + b"}}")


# --- the common shape is read natively ------------------------------------------------------


def test_the_common_shape_is_read_natively() -> None:
    body = {
        user: {"country": "DE", "plan": ("pro", "free")[i % 2], "seats": i, "share": i / 3,
               "beta": i % 2 == 0, "tags": ["a", "b"], "email": f"{user}@example.com"}
        for i, user in enumerate(USERS)
    }  # fmt: skip
    for ensure_ascii in (True, False):
        for spaced in (True, False):
            assert _agree(_write(body, ensure_ascii, spaced)) is not None


def test_users_without_attributes_and_empty_objects() -> None:
    assert _agree(b"{}") == {}
    assert _agree(b'{"user-1":{}}') == {}
    columns = _columns(b'{"user-1":{},"user-2":{"a":"x"}}')
    held = AttributeColumns(USERS, ROWS, columns, {"a": frozenset({str, type(MISSING)})})
    assert bool(held) and len(held) == 1 and dict(held) == {"user-2": {"a": "x"}}
    assert held.get("user-1") is None and "user-1" not in held and "user-2" in held
    values, kinds = held.reader(USERS)("a", None)
    assert values[2] == "x" and values[1] is MISSING and kinds == {str, type(MISSING)}
    assert held.reader(USERS)("absent", np.array([1, 2])) == ([MISSING, MISSING], {type(MISSING)})
    assert held.reader(USERS)("a", np.array([2, 1]))[0] == ["x", MISSING]


def test_a_reader_never_names_fewer_kinds_than_its_values_have() -> None:
    """A condition trusts the kinds it is given to be every type among the values: a user
    outside the decoder's rows reads MISSING, so its kind joins the column's."""
    columns = _columns(b'{"user-1":{"a":"x"},"user-2":{"a":"y"}}')
    held = AttributeColumns(USERS[1:3], {"user-1": 0, "user-2": 1}, {"a": columns["a"][1:3]},
                            {"a": frozenset({str})})  # fmt: skip
    values, kinds = held.reader(["user-2", "nobody"])("a", None)
    assert values == ["y", MISSING] and kinds == {str, type(MISSING)}
    values, kinds = held.reader(USERS[1:3])("a", None)
    assert values == ["x", "y"] and kinds == {str}
    plain = AttributeColumns(USERS[1:3], {"user-1": 0, "user-2": 1}, {"a": ["x", "y"]})
    assert plain.reader(USERS[1:3])("a", None) == (["x", "y"], None)  # not known: found


# --- each limit, at it and past it (the contract's numbers, not the C file's) ---------------


def _one(attributes: dict[str, Any]) -> bytes:
    return _write({"user-0": attributes}, False, False)


@pytest.mark.parametrize(
    ("at_limit", "past_limit"),
    [
        (
            {f"a{i}": 1 for i in range(ATTRIBUTES_MAX)},
            {f"a{i}": 1 for i in range(ATTRIBUTES_MAX + 1)},
        ),
        ({"n" * ATTRIBUTE_NAME_MAX: 1}, {"n" * (ATTRIBUTE_NAME_MAX + 1): 1}),
        ({"s": "é" * ATTRIBUTE_STRING_MAX}, {"s": "é" * (ATTRIBUTE_STRING_MAX + 1)}),
        ({"s": "😀" * ATTRIBUTE_STRING_MAX}, {"s": "😀" * (ATTRIBUTE_STRING_MAX + 1)}),
        ({"t": ["x"] * ATTRIBUTE_ARRAY_MAX}, {"t": ["x"] * (ATTRIBUTE_ARRAY_MAX + 1)}),
        ({"t": ["y" * ATTRIBUTE_STRING_MAX]}, {"t": ["y" * (ATTRIBUTE_STRING_MAX + 1)]}),
    ],
    ids=["attributes", "name", "string", "astral string", "array", "array string"],
)
def test_a_limit_is_taken_at_it_and_handed_on_past_it(at_limit: dict, past_limit: dict) -> None:
    assert _agree(_one(at_limit)) is not None
    assert _native(_one(past_limit)) is None and _python(_one(past_limit)) is None


@pytest.mark.parametrize(
    "text",
    [
        b'{"user-0":{"a":1},"user-0":{"b":2}}',  # a user twice
        b'{"user-0":{"a":1,"a":2}}',  # a name twice
        b'{"stranger":{"a":1}}',  # not a user of the request
        b'{"user-0":{"userIdentifier":"x"}}',
        b'{"user-0":{"\\u0061":1}}',  # an escaped name (the Python path takes it)
        b'{"user-0":{"a":"\\ud800"}}',  # a lone surrogate
        b'{"user-0":{"a":null}}',
        b'{"user-0":{"a":{"b":1}}}',
        b'{"user-0":{"a":[1]}}',
        b'{"user-0":{"a":1e999}}',
        b'{"user-0":{"a":01}}',
        b'{"user-0":{"a":"\x01"}}',
        b'{"user-0":{"a":"\xff"}}',
        b'{"user-0":{"a":1}} x',
        b'{"user-0":[]}',
        b"[]",
    ],
)
def test_what_it_hands_on(text: bytes) -> None:
    assert _native(text) is None


def test_more_names_than_columns_are_handed_on() -> None:
    many = {user: {f"{user}-n{i}": 1 for i in range(20)} for user in USERS[:4]}
    assert _python(_write(many, False, False)) is not None
    assert _columns(_write(many, False, False), 64) is None
    assert _columns(_write(many, False, False), 80) is not None


def test_a_shared_string_is_one_object() -> None:
    """Users sharing a value share its object (a string is immutable): fewer to make and free."""
    text = _write({u: {"country": "DE"} for u in USERS}, False, False)
    column = _columns(text)["country"]
    assert len({id(value) for value in column}) == 1 and column[0] == "DE"


def test_a_float_reads_as_python_reads_it() -> None:
    for value in (0.1, 1 / 3, 5e-324, 1.7976931348623157e308, -2.5):
        found = _native(_one({"x": value}))
        assert found is not None and math.copysign(1, found["user-0"]["x"]) == math.copysign(
            1, value
        )
        assert found["user-0"]["x"] == value


@pytest.mark.parametrize(
    "attributes_twice",
    [
        b'"attributes":{"u":{"a":null}},"attributes":{"u":{"a":"ok"}}',
        b'"attributes":{"u":{"a":"' + b"x" * 2000 + b'"}},"attributes":{"u":{"a":"ok"}}',
        b'"attribute\\u0073":{"u":{"a":null}},"attributes":{"u":{"a":"ok"}}',
        b'"attributes":{"u":{"a":null}},"attribute\\u0073":{"u":{"a":"ok"}}',
    ],
)
def test_a_body_naming_attributes_twice_is_refused_as_before(attributes_twice: bytes) -> None:
    """JSON allows a key twice and msgspec keeps the last one's text for the native decoder
    without checking the first: such a body goes to msgspec whole, which refuses it."""
    from api.web.errors import BadRequest
    from api.web.jsonio import MALFORMED
    from api.web.public.evaluate import decode_bulk

    body = b'{"flagKey":"f","userIdentifiers":["u"],' + attributes_twice + b"}"
    with pytest.raises((*MALFORMED, BadRequest)):
        decode_bulk(body)
    once = b'{"flagKey":"f","userIdentifiers":["u"],"attributes":{"u":{"a":"ok"}}}'
    assert dict(decode_bulk(once).attributes) == {"u": {"a": "ok"}}


def test_the_attributes_must_be_a_view_of_the_body() -> None:
    body = b'{"attributes":{"user-0":{"a":1}}}'
    copy = bytes(memoryview(body)[14:-1])
    assert fastpath.attribute_columns(body, copy, ROWS, MISSING, 64) is None
    assert fastpath.attribute_columns(body, memoryview(body)[14:-1], ROWS, MISSING, 64)


@pytest.mark.parametrize("distinct", [1, 255, 256, 400])
@pytest.mark.parametrize("kind", ["strings", "numbers", "then an array"])
def test_a_column_is_coded_up_to_255_distinct_values(distinct: int, kind: str) -> None:
    """Past 255 distinct values (or at a value of another kind) a column stops being coded,
    and the values read after that point are as msgspec reads them."""
    users = [f"u{i}" for i in range(600)]
    rows = {user: row for row, user in enumerate(users)}

    def value(i: int) -> object:
        if kind == "then an array" and i == 500:
            return ["x"]
        return f"v{i % distinct}" if kind != "numbers" else float(i % distinct) / 4

    given = {user: {"a": value(i)} for i, user in enumerate(users) if i % 7}
    body = json.dumps({"userIdentifiers": users, "attributes": given}).encode()
    text = json.dumps(given).encode()
    at = body.index(text)
    coded: dict[str, tuple] = {}
    columns = fastpath.attribute_columns(
        body, memoryview(body)[at : at + len(text)], rows, MISSING, 64, {}, coded
    )
    assert columns is not None
    read = [given.get(u, {}).get("a", MISSING) for u in users]
    assert columns["a"] == [tuple(v) if isinstance(v, list) else v for v in read]
    _check_coded(columns, coded)
    assert ("a" in coded) is (distinct <= 255 and kind != "then an array")
    held = AttributeColumns(users, rows, columns, None, coded)
    values, _ = held.reader(users)("a", None)
    assert isinstance(values, CodedColumn) is ("a" in coded)
    listed = values.values() if isinstance(values, CodedColumn) else values
    assert listed == columns["a"]
    some, _ = held.reader(users)("a", np.array([3, 1, 599]))
    if isinstance(some, CodedColumn):
        some = some.values()
    assert some == [columns["a"][3], columns["a"][1], columns["a"][599]]


def test_a_bulk_request_hands_its_conditions_coded_columns() -> None:
    """The service's decoding of a bulk request keeps the decoder's coded columns, so that a
    condition on a country or a plan decides two values, not one per user."""
    from api.web.public.evaluate import decode_bulk

    users = [f"u{i}" for i in range(50)]
    attributes = {u: {"country": ("DE", "FR")[i % 2], "email": f"{u}@x.org", "tags": ["a"]}
                  for i, u in enumerate(users)}  # fmt: skip
    request = decode_bulk(json.dumps({"flagKey": "f", "userIdentifiers": users,
                                      "attributes": attributes}).encode())  # fmt: skip
    held = request.attributes
    assert isinstance(held, AttributeColumns)
    country, kinds = held.reader(request.users)("country", None)
    assert isinstance(country, CodedColumn) and country.distinct == (MISSING, "DE", "FR")
    assert country.values() == [a["country"] for a in attributes.values()] and kinds == {str}
    tags, _ = held.reader(request.users)("tags", None)
    assert tags == [("a",)] * 50  # an array is not coded
