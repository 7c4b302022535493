"""Contract 12's conditions: what a segment asks of a user's attributes, each operator once.

A condition is ``{"attribute": NAME, "operator": OP, "values": [...]}``. ``condition_from_json``
checks one as a rule is checked (``RuleError``, its message starting with the field:
``conditions[2].values[0] must be ...``) and prepares its operands once (sets of strings, a
compiled expression, parsed versions, instants as Unix seconds), so that ``holds`` only
compares: a string attribute (most are) in one call, often a C one (a set's ``__contains__``,
a ``methodcaller``). ``all_hold`` decides a segment's conditions for one user as one function;
``all_hold_many`` for many users, a condition at a time over a column of values (a column
of strings or floats in a few C calls, each distinct value asked once where that pays).
``OPERATORS`` is the catalogue: for each operator, what its values must be, how many it takes,
whether it is a negation, and its words for people. ``in_segment`` combines a segment's lists
and conditions. Pure: no I/O, clock or logging.

The type rules, the same in every implementation (``tests/cases/conditions.json``):

- The attribute ``userIdentifier`` is the user's identifier (an attribute of that name is never
  read); any other is read from the attributes.
- A missing attribute, or one of a shape contract 12 does not take (null, an object, a number
  that is not finite, an array holding anything but strings), never holds, whatever the
  operator: ``EXISTS`` and the negations included.
- An attribute of a type the operator does not take never holds either, negations included: a
  string is never read as a number, a boolean is not a number, ``NOT_IN`` on a number is false.
- An array of strings: a positive operator holds when it holds for some element; ``NOT_EQUALS``
  and ``NOT_IN`` hold when no element is equal or in (so they, and ``EXISTS``, hold for an empty
  array, and nothing else does).
- Several values: a positive operator holds when it holds against some value
  (``LESS_THAN [10, 20]`` is ``< 20``); ``NOT_EQUALS`` and ``NOT_IN`` when the attribute equals
  none. ``MATCHES`` takes exactly one expression, ``EXISTS`` no values, the others 1 to 100.
- ``EQUALS`` compares a string with the string values, a boolean with the boolean values and a
  number with the number values, numerically (``1`` equals ``1.0``, never ``"1"`` nor ``true``).
  Numbers compare as IEEE doubles, as JSON's numbers are in every implementation.
- ``CONTAINS``, ``STARTS_WITH``, ``ENDS_WITH``: case-sensitive, on code points.
- ``MATCHES`` searches the string (anchor with ``^`` and ``$`` to match all of it), RE2 syntax.
- ``SEMVER_*``: Semantic Versioning 2.0.0 precedence (a pre-release is below its release,
  numeric identifiers compare numerically, build metadata is ignored: ``1.0.0+a`` equals
  ``1.0.0+b``); an attribute that is not a valid version does not hold.
- ``BEFORE``, ``AFTER``: the attribute is an RFC 3339 instant with its offset (``Z`` or
  ``+HH:MM``; a date alone or a time without offset is no instant) or Unix seconds, compared with
  the values' instants as Unix seconds, IEEE doubles (a second of 60, a leap second, counts as
  the next minute's first; years 0001 to 9999).

Dependencies. The core ships alone to applications (``sdk/core/pyproject.toml``; the SDK's
``local`` extra repeats them), so each is small, maintained and needed:

- ``google-re2``, Google's own bindings of RE2 (prebuilt wheels, no dependencies): ``MATCHES``
  runs in time linear in the attribute's length whatever the expression, so no segment can
  stall a worker; Python's ``re`` backtracks (``(a+)+$`` against thirty ``a`` and a ``b`` takes
  over a minute, and each further ``a`` doubles it). Expressions are compiled as UTF-8 bytes and strings matched as UTF-8 bytes encoded
  with ``surrogatepass``, so an identifier holding a lone surrogate (JSON allows one) is matched
  and never raises; RE2's error log is off (the core writes nothing). A condition calls the
  compiled ``_re2.RE2``'s ``Match`` itself, as google-re2's ``search`` does for bytes (0.7 µs
  a call against 2 µs through ``search``'s generator), each expression compiled once.
- ``semver`` (python-semver, pure Python, no dependencies): SemVer 2.0.0 parsing and precedence,
  from 3.1.2, whose parser is ASCII-only and anchored at the very end; the tests check it against
  the specification's examples. ``packaging.version`` is PEP 440, not SemVer: it refuses
  ``1.0.0-alpha.beta`` and takes ``1.0`` and ``v1.0.0``.


A host may compile ``MATCHES`` expressions its own way (``use_expressions``), with RE2's
semantics: the service plugs in RE2 natively (``api.native.expressions``), which the core may
not import; the golden cases are decided alike either way.

Our own fixed patterns (an instant's) use Python's ``re``: they cannot backtrack much.
"""

from __future__ import annotations

import json
import math
import operator as op
import re
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from datetime import date
from enum import StrEnum
from fractions import Fraction
from functools import lru_cache
from itertools import repeat
from math import isfinite
from operator import itemgetter, methodcaller
from typing import Any, NamedTuple, Protocol

import numpy as np
import re2
import semver
from re2 import _re2

from flagsight_core.attribute_rules import finite_number
from flagsight_core.context import MISSING, CodedColumn, Column, ColumnReader, Kinds, _Missing
from flagsight_core.contract import (
    ATTRIBUTE_NAME_PATTERN,
    ATTRIBUTE_NAME_SPEC,
    CONDITION_PATTERN_MAX,
    CONDITION_VALUES_MAX,
    CONDITIONS_MAX,
    USER_IDENTIFIER_ATTRIBUTE,
)
from flagsight_core.registry import RuleError
from flagsight_core.words import counted

AttributeValue = str | int | float | bool | tuple[str, ...] | list[str]
"""An attribute's value as contract 12 takes it: a string, a finite number, a boolean, or an
array of strings (a list is read as a tuple). Anything else found in a mapping never holds."""

Attributes = Mapping[str, AttributeValue]
"""A user's attributes by name."""

ConditionValue = str | int | float | bool
"""One of a condition's values, as its JSON holds it (``values`` echoes them)."""

Scalar = str | int | float | bool
"""One element of an attribute: the value itself, or one string of an array."""


class Operator(StrEnum):
    """Contract 12's operators, named exactly."""

    EQUALS = "EQUALS"
    NOT_EQUALS = "NOT_EQUALS"
    IN = "IN"
    NOT_IN = "NOT_IN"
    CONTAINS = "CONTAINS"
    STARTS_WITH = "STARTS_WITH"
    ENDS_WITH = "ENDS_WITH"
    MATCHES = "MATCHES"
    LESS_THAN = "LESS_THAN"
    LESS_OR_EQUAL = "LESS_OR_EQUAL"
    GREATER_THAN = "GREATER_THAN"
    GREATER_OR_EQUAL = "GREATER_OR_EQUAL"
    SEMVER_EQUALS = "SEMVER_EQUALS"
    SEMVER_LESS_THAN = "SEMVER_LESS_THAN"
    SEMVER_GREATER_THAN = "SEMVER_GREATER_THAN"
    BEFORE = "BEFORE"
    AFTER = "AFTER"
    EXISTS = "EXISTS"


# --- reading attributes -----------------------------------------------------------------------


_DOUBLE_MAX = sys.float_info.max


def _double(number: int) -> float:
    """The double an int is compared as (an int no double holds: infinity, which never
    holds)."""
    return float(number) if -_DOUBLE_MAX <= number <= _DOUBLE_MAX else math.inf


def _is_number(item: object) -> bool:
    return isinstance(item, int | float) and not isinstance(item, bool)


def _items(value: object) -> tuple[Scalar, ...] | None:
    """The elements of an attribute's value (the value itself, or each string of an array), or
    None for a value of a shape contract 12 does not take (it never holds)."""
    if isinstance(value, str | bool):
        return (value,)
    if isinstance(value, int | float):
        return (value,) if finite_number(value) else None
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None


_EPOCH_DAY = date(1970, 1, 1).toordinal()
_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:[Zz]|([+-])(\d\d):(\d\d))",
    re.ASCII,
)


_FRACTION_DIGITS = 64
"""Digits of an instant's fraction read: far beyond a double's precision at any instant."""


@lru_cache(maxsize=1024)
def _instant(text: str) -> float | None:
    """Unix seconds of an RFC 3339 instant with its offset, or None when ``text`` is not one.

    Rounded once to the nearest double (the fraction is exact until then, to its first
    ``_FRACTION_DIGITS`` digits: RFC 3339 sets no bound, and Python refuses to read an int of
    more than 4,300 digits, which made a segment's condition of such an instant a 500)."""
    found = _RFC3339.fullmatch(text)
    if found is None:
        return None
    year, month, day, hour, minute, second = (int(found[i]) for i in range(1, 7))
    if hour > 23 or minute > 59 or second > 60:
        return None
    try:
        days = date(year, month, day).toordinal() - _EPOCH_DAY
    except ValueError:
        return None
    offset = 0
    if found[8]:
        hours, minutes = int(found[9]), int(found[10])
        if hours > 23 or minutes > 59:
            return None
        offset = (hours * 60 + minutes) * 60 * (1 if found[8] == "+" else -1)
    whole = days * 86_400 + hour * 3_600 + minute * 60 + second - offset
    digits = (found[7] or "")[:_FRACTION_DIGITS].rstrip("0")
    if not digits:
        return float(whole)
    return float(whole + Fraction(int(digits), 10 ** len(digits)))


def _instant_of(item: Scalar) -> float | None:
    """An attribute's instant: an RFC 3339 string's, or a number of Unix seconds."""
    if isinstance(item, str):
        return _instant(item)
    return float(item) if _is_number(item) else None


@lru_cache(maxsize=1024)
def _version(text: str) -> semver.Version | None:
    """The Semantic Versioning 2.0.0 version ``text`` is, or None."""
    try:
        return semver.Version.parse(text)
    except (TypeError, ValueError):
        return None


def _precedence_key(version: semver.Version) -> tuple[Any, ...]:
    """SemVer 2.0.0 precedence (semver.org, item 11) as a tuple Python orders alike: major,
    minor, patch, then a release above any of its pre-releases, whose identifiers compare
    numerically when all digits, below any alphanumeric one, which compare in ASCII order,
    more identifiers above fewer when all before are equal; build metadata ignored. Compared
    as tuples it is some twenty times faster than ``Version.compare``, which a condition on an
    application's version runs for every user evaluated. A numeric identifier has no leading
    zero (item 9), so it orders as its length, then its digits: no int is made of it (Python
    refuses one of more than 4,300 digits)."""
    if version.prerelease is None:
        release: tuple[Any, ...] = (1,)
    else:
        release = (0, *((0, len(part), part) if part.isdigit() else (1, part)
                        for part in version.prerelease.split(".")))  # fmt: skip
    return (version.major, version.minor, version.patch, release)


@lru_cache(maxsize=4096)
def _precedence(text: str) -> tuple[Any, ...] | None:
    """The precedence key of the version ``text`` is, or None: an attribute's few distinct
    versions (an application's releases) are each parsed once."""
    found = _version(text)
    return None if found is None else _precedence_key(found)


# --- the values a condition takes ---------------------------------------------------------------


class _Invalid(ValueError):
    """A value a condition does not take; its message, if any, says why."""


class ValueKind(NamedTuple):
    """What an operator's values must be: in words, as JSON Schema, and how one becomes its
    operand."""

    what: str
    """The end of the message ``<field> must be <what>``."""
    operand: Callable[[Any], Any]
    """The operand of one valid value; ``_Invalid`` for any other."""
    schema: dict[str, Any]
    """One value's JSON Schema, as far as one states it (an RE2 expression's syntax is the
    one thing it cannot: ``what`` says it)."""


def _string(raw: object) -> str:
    if not isinstance(raw, str):
        raise _Invalid
    return raw


def _scalar(raw: object) -> ConditionValue:
    if isinstance(raw, str | bool) or finite_number(raw):
        return raw  # type: ignore[return-value]
    raise _Invalid


def _number(raw: object) -> float:
    if not finite_number(raw):
        raise _Invalid
    return float(raw)  # type: ignore[arg-type]


def _semver(raw: object) -> semver.Version:
    found = _version(raw) if isinstance(raw, str) else None
    if found is None:
        raise _Invalid
    return found


def _when(raw: object) -> float:
    found = _instant(raw) if isinstance(raw, str) else None
    if found is None and finite_number(raw):
        found = float(raw)  # type: ignore[arg-type]
    if found is None:
        raise _Invalid
    return found


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.never_capture = True  # only whether it matches is wanted
_RE2_OPTIONS.log_errors = False  # an invalid expression is our error to word, not RE2's to log


@lru_cache(maxsize=1024)
def _compiled(pattern: bytes) -> Any:
    """RE2's compiled ``pattern`` (``_re2.RE2``, what ``re2.compile`` wraps), each pattern
    compiled once for every segment and configuration that holds it; ``re2.error`` for an
    invalid one, as ``re2.compile`` raises it."""
    compiled = _re2.RE2(pattern, _RE2_OPTIONS)
    if not compiled.ok():
        raise re2.error(compiled.error())
    return compiled


def expression_size(pattern: str) -> int:
    """The RE2 instructions ``pattern`` (a valid ``MATCHES`` expression) compiles to: what its
    matching costs per byte at worst (``contract.CONDITION_PROGRAM_MAX``)."""
    return int(_compiled(pattern.encode("utf-8")).ProgramSize())


class Expression(NamedTuple):
    """A ``MATCHES`` operand: the expression as given, and RE2's compiled form of it."""

    source: str
    compiled: Any


def _expression(raw: object) -> Expression:
    if not isinstance(raw, str) or len(raw) > CONDITION_PATTERN_MAX:
        raise _Invalid
    try:
        return Expression(raw, _compiled(raw.encode("utf-8")))
    except UnicodeEncodeError:
        raise _Invalid("it is not valid Unicode") from None
    except re2.error as error:
        detail = error.args[0] if error.args else ""
        raise _Invalid(
            detail.decode("utf-8", "replace") if isinstance(detail, bytes) else detail
        ) from None


_NUMERIC = "(?:0|[1-9][0-9]*)"
_PRERELEASE = f"(?:{_NUMERIC}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
SEMVER_SCHEMA_PATTERN = (
    f"^{_NUMERIC}\\.{_NUMERIC}\\.{_NUMERIC}"
    f"(?:-{_PRERELEASE}(?:\\.{_PRERELEASE})*)?(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?$"
)
"""Semantic Versioning 2.0.0's own expression (semver.org), ASCII digits only, as a JSON
Schema ``pattern``: what ``semver`` 3.1.2 parses."""

STRING = ValueKind("a string", _string, {"type": "string"})
SCALAR = ValueKind(
    "a string, a finite number or a boolean", _scalar, {"type": ["string", "number", "boolean"]}
)
NUMBER = ValueKind("a finite number", _number, {"type": "number"})
VERSION = ValueKind(
    "a Semantic Versioning 2.0.0 version (such as 1.4.0 or 2.0.0-rc.1)",
    _semver,
    {"type": "string", "pattern": SEMVER_SCHEMA_PATTERN},
)
INSTANT = ValueKind(
    "an RFC 3339 instant with its offset (such as 2025-06-01T00:00:00Z) or Unix seconds",
    _when,
    {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "number"}]},
)
EXPRESSION = ValueKind(
    f"an RE2 regular expression of at most {CONDITION_PATTERN_MAX} characters",
    _expression,
    {
        "type": "string",
        "maxLength": CONDITION_PATTERN_MAX,
        "description": "RE2 syntax, searched in the string (anchor with ^ and $)",
    },
)
NO_VALUE = ValueKind("nothing", _string, {})  # EXISTS: never asked, as it takes no values


# --- how each operator decides one element ------------------------------------------------------

Test = Callable[[Scalar], bool]
"""Whether an operator's positive comparison holds for one element (false for an element of a
type it does not take); a negation is decided from its positive comparison."""

StringTest = Callable[[str], bool]
"""An operator's positive comparison of a string element."""

FloatsTest = Callable[[np.ndarray], np.ndarray]
"""An operator's positive comparison of many floats at once, as a boolean array."""


def _never(item: object) -> bool:
    return False


def _always(item: object) -> bool:
    return True


class Tests(NamedTuple):
    """An operator's positive comparison, built once from a condition's operands: of any
    element, and of the elements most attributes are, strings and (for the numeric operators)
    floats, each as few Python steps as it can be (a condition decides every user a request
    evaluates: a single evaluate's budget is a few microseconds, a bulk request's users are
    decided a column at a time)."""

    scalar: Test
    """Of any element (``Scalar``)."""
    string: StringTest
    """Of a string element: the same answers as ``scalar``."""
    direct: bool = False
    """Whether ``string`` is one C call (a set's ``__contains__``, a ``methodcaller``): asked
    of each value of a column, never of its distinct values first."""
    floats: FloatsTest | None = None
    """Of many floats, finite or not (a non-finite one never holds), when the operator
    takes numbers."""
    number: Callable[[float], bool] = _never
    """Of one float, finite or not (a non-finite one never holds)."""
    strings: Callable[[Sequence[str]], np.ndarray] | None = None
    """Of many strings at once, as a boolean array, where that costs less than ``string`` of
    each (for a column of mostly distinct values)."""


def _strings_only(string: StringTest, direct: bool = False) -> Tests:
    """The tests of an operator that takes strings alone."""
    return Tests(lambda item: isinstance(item, str) and string(item), string, direct)


def _equals(operands: tuple[ConditionValue, ...]) -> Tests:
    strings = frozenset(v for v in operands if isinstance(v, str))
    flags = frozenset(v for v in operands if isinstance(v, bool))
    numbers = frozenset(float(v) for v in operands if _is_number(v))
    listed = np.array(sorted(numbers), dtype=float)

    def test(item: Scalar) -> bool:
        if isinstance(item, str):
            return item in strings
        if isinstance(item, bool):
            return item in flags
        return float(item) in numbers

    def floats(values: np.ndarray) -> np.ndarray:
        return np.isin(values, listed)  # a value equal to a (finite) operand is finite

    return Tests(test, strings.__contains__, True, floats, numbers.__contains__)


def _one_of(operands: tuple[str, ...]) -> Tests:
    return _strings_only(frozenset(operands).__contains__, direct=True)


def _contains(operands: tuple[str, ...]) -> Tests:
    if len(operands) == 1:  # ``part in item``, as one C call
        return _strings_only(methodcaller("__contains__", operands[0]), direct=True)
    return _strings_only(lambda item: any(part in item for part in operands))


def _starts_with(operands: tuple[str, ...]) -> Tests:
    return _strings_only(methodcaller("startswith", operands), direct=True)


def _ends_with(operands: tuple[str, ...]) -> Tests:
    return _strings_only(methodcaller("endswith", operands), direct=True)


_UNANCHORED = _re2.RE2.Anchor.UNANCHORED
_FIRST = itemgetter(0)


class NativeExpression(Protocol):
    """A host's compiled form of a ``MATCHES`` expression, with RE2's semantics: an unanchored
    search of a string's UTF-8 bytes (a lone surrogate encoded with surrogatepass)."""

    def search(self, text: str, /) -> bool:
        """Whether the expression is found in ``text``."""
        ...

    def search_column(self, items: list[str], /) -> bytes | bytearray:
        """A byte per item, 1 where the expression is found in it."""
        ...


ExpressionCompiler = Callable[[str], "NativeExpression | None"]
"""A host's compiler of ``MATCHES`` expressions: None for one it does not take (the core's own
RE2 then decides it)."""

_compiler: list[ExpressionCompiler | None] = [None]


def use_expressions(compile_expression: ExpressionCompiler | None) -> None:
    """Set (None: clear) how the conditions made from now on search ``MATCHES`` expressions:
    the same RE2 semantics, without google-re2's Python binding around each search. The
    service sets its native RE2 (``api.native.expressions``) before it reads any segment; an
    application's SDK sets none."""
    _compiler[0] = compile_expression


def _matches(operands: tuple[Expression, ...]) -> Tests:
    """The host's compiled expression when it has one (the service's: a single search 0.1 µs
    of C, 10,000 e-mail addresses 0.6 ms in one call). Else RE2's own ``Match`` (``_re2``), as
    google-re2's ``search`` calls it for bytes: a third of the cost of ``search``, which is a
    generator around it, and 1.4 µs a search all the same."""
    source, compiled = operands[0]
    compile_expression = _compiler[0]
    native = compile_expression(source) if compile_expression is not None else None
    if native is not None:
        search_column = native.search_column

        def found(items: Sequence[str]) -> np.ndarray:
            column = items if type(items) is list else list(items)
            return np.frombuffer(search_column(column), np.bool_)

        return _strings_only(native.search)._replace(strings=found)
    match = compiled.Match

    def string(item: str) -> bool:
        text = item.encode("utf-8", "surrogatepass")
        return match(_UNANCHORED, text, 0, len(text))[0][0] >= 0

    def strings(items: Sequence[str]) -> np.ndarray:
        """``string`` of each item as one chain of C calls: no Python frame per item (a
        seventh less than ``string`` of each, which is RE2's ``Match`` mostly)."""
        texts = [item.encode("utf-8", "surrogatepass") for item in items]
        spans = map(match, repeat(_UNANCHORED), texts, repeat(0), map(len, texts))
        starts = map(_FIRST, map(_FIRST, spans))  # the match's start, -1 for none
        return np.fromiter(starts, np.int64, len(texts)) >= 0

    return _strings_only(string)._replace(strings=strings)


def _numbers(compare: Callable[[Any, Any], Any], pick: Callable[..., float]) -> Callable:
    """Compared with some value: with the largest for ``<``, the smallest for ``>``."""

    def build(operands: tuple[float, ...]) -> Tests:
        bound = pick(operands)

        def floats(values: np.ndarray) -> np.ndarray:
            return compare(values, bound) & np.isfinite(values)

        def number(value: float) -> bool:
            return compare(value, bound) and isfinite(value)

        return Tests(
            lambda item: _is_number(item) and compare(float(item), bound),
            _never,
            True,
            floats,
            number,
        )

    return build


def _versions(want: Callable[[Any, Any], bool], pick: Callable[..., Any] | None) -> Callable:
    """``want(version, value)`` for some value (``pick``'s one when it says), on precedence
    keys (``_precedence_key``): each attribute string parsed once."""

    def build(operands: tuple[semver.Version, ...]) -> Tests:
        keys = tuple(_precedence_key(operand) for operand in operands)
        if pick is None:  # equality: some value's key, in one set lookup
            known = frozenset(keys)

            def string(item: str) -> bool:
                return _precedence(item) in known

        else:
            bound = pick(keys)

            def string(item: str) -> bool:
                found = _precedence(item)
                return found is not None and want(found, bound)

        return _strings_only(string)

    return build


def _instants(compare: Callable[[Any, Any], Any], pick: Callable[..., float]) -> Callable:
    def build(operands: tuple[float, ...]) -> Tests:
        bound = pick(operands)

        def test(item: Scalar) -> bool:
            found = _instant_of(item)
            return found is not None and compare(found, bound)

        def string(item: str) -> bool:
            found = _instant(item)
            return found is not None and compare(found, bound)

        def floats(values: np.ndarray) -> np.ndarray:
            return compare(values, bound) & np.isfinite(values)

        def number(value: float) -> bool:
            return compare(value, bound) and isfinite(value)

        return Tests(test, string, False, floats, number)

    return build


def _exists(operands: tuple[()]) -> Tests:
    """``EXISTS`` holds for any value of a shape the contract takes (``_decider``), an empty
    array too, which has no element to test."""
    return Tests(_always, _always, True, lambda values: np.isfinite(values), isfinite)


# --- the catalogue ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """One operator: everything about it, as data the other layers read."""

    operator: Operator
    values: ValueKind
    """What each of its values must be."""
    build: Callable[[tuple[Any, ...]], Tests]
    """Its comparison of one element, from its operands."""
    words: tuple[str, str]
    """How people read it, with one value and with several (``is``, ``is one of``)."""
    negated: bool = False
    """``NOT_EQUALS``, ``NOT_IN``: holds when its positive comparison holds for no element."""
    least: int = 1
    most: int = CONDITION_VALUES_MAX
    """How many values it takes."""


OPERATORS: dict[Operator, Comparison] = {
    c.operator: c
    for c in (
        Comparison(Operator.EQUALS, SCALAR, _equals, ("is", "is one of")),
        Comparison(Operator.NOT_EQUALS, STRING, _one_of, ("is not", "is not one of"), True),
        Comparison(Operator.IN, STRING, _one_of, ("is one of", "is one of")),
        Comparison(Operator.NOT_IN, STRING, _one_of, ("is not one of", "is not one of"), True),
        Comparison(Operator.CONTAINS, STRING, _contains, ("contains", "contains one of")),
        Comparison(
            Operator.STARTS_WITH, STRING, _starts_with, ("starts with", "starts with one of")
        ),
        Comparison(Operator.ENDS_WITH, STRING, _ends_with, ("ends with", "ends with one of")),
        Comparison(Operator.MATCHES, EXPRESSION, _matches, ("matches", "matches"), most=1),
        Comparison(
            Operator.LESS_THAN,
            NUMBER,
            _numbers(op.lt, max),
            ("is less than", "is less than one of"),
        ),
        Comparison(
            Operator.LESS_OR_EQUAL,
            NUMBER,
            _numbers(op.le, max),
            ("is at most", "is at most one of"),
        ),
        Comparison(
            Operator.GREATER_THAN,
            NUMBER,
            _numbers(op.gt, min),
            ("is greater than", "is greater than one of"),
        ),
        Comparison(
            Operator.GREATER_OR_EQUAL,
            NUMBER,
            _numbers(op.ge, min),
            ("is at least", "is at least one of"),
        ),
        Comparison(
            Operator.SEMVER_EQUALS,
            VERSION,
            _versions(op.eq, None),
            ("is version", "is one of versions"),
        ),
        Comparison(
            Operator.SEMVER_LESS_THAN,
            VERSION,
            _versions(op.lt, max),
            ("is a version below", "is a version below one of"),
        ),
        Comparison(
            Operator.SEMVER_GREATER_THAN,
            VERSION,
            _versions(op.gt, min),
            ("is a version above", "is a version above one of"),
        ),
        Comparison(
            Operator.BEFORE, INSTANT, _instants(op.lt, max), ("is before", "is before one of")
        ),
        Comparison(Operator.AFTER, INSTANT, _instants(op.gt, min), ("is after", "is after one of")),
        Comparison(
            Operator.EXISTS, NO_VALUE, _exists, ("is present", "is present"), least=0, most=0
        ),
    )
}
"""Every operator's ``Comparison``, in the contract's order."""


# --- conditions ---------------------------------------------------------------------------------


_MISSING = MISSING
"""What ``Condition.value_of`` reads for a missing attribute: never holds."""
_STRINGS = frozenset({str})
_FLOATS = frozenset({float})
_PLAIN = frozenset({str, float, _Missing})
"""Kinds of which no two values are equal as dict keys (a string never equals a float), so a
column of them is decided by distinct value as it is."""
_NUMBERS = (frozenset({int}), frozenset({int, float}))


def _doubles_exactly(kinds: Kinds, values: Sequence[Any]) -> bool:
    """Whether a column of ints (and floats) converts to doubles as ``_double`` compares each:
    every int within the doubles' range (JSON's integers, a count of seats)."""
    return kinds in _NUMBERS and (
        not values or (min(values) >= -_DOUBLE_MAX and max(values) <= _DOUBLE_MAX)
    )  # no values: a reader's kinds (a superset) may name ints for an empty subset


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition on a user's attributes. Constructing one checks it (``RuleError`` naming
    the field; ``where`` is the condition's place, e.g. ``conditions[2]``)."""

    attribute: str
    operator: Operator
    values: tuple[ConditionValue, ...] = ()
    where: InitVar[str] = "condition"
    _decide: Callable[[tuple[Scalar, ...]], bool] = field(init=False, repr=False, compare=False)
    _tests: Tests = field(init=False, repr=False, compare=False)
    _string: StringTest = field(init=False, repr=False, compare=False)
    """Whether the condition holds for a string value (``holds_for`` of a ``str``)."""
    _number: Callable[[float], bool] = field(init=False, repr=False, compare=False)
    """Whether the condition holds for a float value (``holds_for`` of a ``float``)."""

    def __post_init__(self, where: str) -> None:
        if not isinstance(self.attribute, str) or not ATTRIBUTE_NAME_PATTERN.fullmatch(
            self.attribute
        ):
            raise RuleError(f"{where}.attribute must be an attribute name ({ATTRIBUTE_NAME_SPEC})")
        if not isinstance(self.operator, str) or self.operator not in OPERATORS:
            raise RuleError(f"{where}.operator must be one of {', '.join(OPERATORS)}")
        comparison = OPERATORS[Operator(self.operator)]
        object.__setattr__(self, "operator", comparison.operator)
        object.__setattr__(self, "values", tuple(self.values))
        tests = comparison.build(_operands(comparison, self.values, where))
        object.__setattr__(self, "_tests", tests)
        object.__setattr__(self, "_decide", _decider(comparison, tests.scalar))
        object.__setattr__(self, "_string", _string_decider(comparison, tests.string))
        object.__setattr__(self, "_number", _never if comparison.negated else tests.number)

    def holds(self, attributes: Attributes, user_identifier: str) -> bool:
        """Whether the user's attributes satisfy this condition (contract 12's type rules, in
        the module's docstring). Never raises."""
        return self.holds_for(self.value_of(attributes, user_identifier))

    def value_of(self, attributes: Attributes, user_identifier: str) -> object:
        """What the condition reads: the attribute's value (the identifier for
        ``userIdentifier``), or a marker that it is missing."""
        if self.attribute == USER_IDENTIFIER_ATTRIBUTE:
            return user_identifier
        return attributes.get(self.attribute, _MISSING)

    def holds_for(self, value: object) -> bool:
        """Whether the condition holds for that value (``value_of``): the same value always
        gives the same answer, so many users' answers can be kept by value."""
        kind = value.__class__
        if kind is str:
            return self._string(value)  # type: ignore[arg-type]
        if kind is float:
            return self._number(value)  # type: ignore[arg-type]
        if kind is int:
            return self._number(_double(value))  # type: ignore[arg-type]
        items = _items(value)
        return items is not None and self._decide(items)

    def holds_many(self, values: Column, kinds: Kinds | None = None) -> np.ndarray:
        """``holds_for`` of each value (``value_of`` of many users), as a boolean array. A
        ``CodedColumn`` is decided a distinct value at a time, then read out by its codes; a
        column of strings is a few C calls (each distinct value asked once where that pays),
        a column of floats one array comparison for the numeric operators; any other column
        is decided by distinct value (``value_key``). ``kinds``: the values' types where the
        caller knows them (every type among them, perhaps more: a decoder's column), else
        found here, one look at each value (a tenth of a 10,000-user request)."""
        if isinstance(values, CodedColumn):
            return self.holds_many(values.distinct)[values.codes]
        count = len(values)
        if kinds is None:
            kinds = frozenset(map(type, values))
        tests = self._tests
        if kinds == _STRINGS:
            hits = (
                np.fromiter(map(tests.string, values), bool, count)
                if tests.direct
                else _by_distinct(tests.string, values, count, tests.strings)
            )
            return ~hits if OPERATORS[self.operator].negated else hits
        if tests.floats is not None and (kinds == _FLOATS or _doubles_exactly(kinds, values)):
            return tests.floats(np.fromiter(values, float, count))  # type: ignore[arg-type]
        if kinds <= _PLAIN:
            return _by_distinct(self.holds_for, values, count)
        known: dict[Hashable, bool] = {}
        found = np.empty(count, dtype=bool)
        for index, value in enumerate(values):
            key = value_key(value)
            held = None if key is None else known.get(key)
            if held is None:
                held = self.holds_for(value)
                if key is not None:
                    known[key] = held
            found[index] = held
        return found

    def to_json(self) -> dict[str, Any]:
        """The condition's JSON, its values as given (``condition_from_json`` reads it back)."""
        return {
            "attribute": self.attribute,
            "operator": str(self.operator),
            "values": [*self.values],
        }

    def in_words(self) -> str:
        """The condition for people: ``country is one of "DE", "AT"``."""
        one, several = OPERATORS[self.operator].words
        shown = ", ".join(json.dumps(value, ensure_ascii=False) for value in self.values)
        phrase = one if len(self.values) < 2 else several
        return f"{self.attribute} {phrase} {shown}".rstrip()


def value_key(value: object) -> Hashable | None:
    """A dict key for an attribute's value that tells apart what the conditions tell apart:
    ``True`` from ``1``, ``1`` from ``"1"`` (a list as its tuple); None for a value that has
    none (an object: it never holds, and is decided each time)."""
    key = (list, tuple(value)) if isinstance(value, list) else (value.__class__, value)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _operands(comparison: Comparison, values: tuple[Any, ...], where: str) -> tuple[Any, ...]:
    """Each value's operand; ``RuleError`` naming the first value (or the count) not taken."""
    least, most = comparison.least, comparison.most
    if not least <= len(values) <= most:
        if most == 0:
            wanted = "no values"
        elif least == most:
            wanted = f"exactly {counted(most, 'value')}"
        else:
            wanted = f"{least} to {counted(most, 'value')}"
        raise RuleError(f"{where}.values must hold {wanted} for {comparison.operator}")
    operands = []
    for index, raw in enumerate(values):
        try:
            operands.append(comparison.values.operand(raw))
        except _Invalid as invalid:
            why = f": {invalid}" if str(invalid) else ""
            raise RuleError(
                f"{where}.values[{index}] must be {comparison.values.what}{why}"
            ) from None
    return tuple(operands)


def _string_decider(comparison: Comparison, positive: StringTest) -> StringTest:
    """How a condition decides a string value: its operator's comparison, negated for
    ``NOT_EQUALS`` and ``NOT_IN``; ``EXISTS`` holds."""
    if comparison.operator is Operator.EXISTS:
        return _always
    if comparison.negated:
        return lambda item: not positive(item)
    return positive


def _by_distinct(
    test: Callable[[Any], bool],
    values: Sequence[Any],
    count: int,
    many: Callable[[Sequence[Any]], np.ndarray] | None = None,
) -> np.ndarray:
    """``test`` of each value (no two of them equal unless their answers are), each distinct
    value asked once when they repeat enough for a dict to cost less than asking (``many``
    asks them all at once, when given)."""
    distinct = set(values)
    if len(distinct) * 4 > count * 3:
        if many is not None:
            return many(values)
        return np.fromiter(map(test, values), bool, count)
    answers = {value: test(value) for value in distinct}
    return np.fromiter(map(answers.__getitem__, values), bool, count)


def _decider(comparison: Comparison, test: Test) -> Callable[[tuple[Scalar, ...]], bool]:
    """How a condition decides an attribute's elements: some element for a positive operator;
    for a negation, every element a string and none passing the positive comparison."""
    if comparison.operator is Operator.EXISTS:
        return lambda items: True  # any value of a shape the contract takes, an empty array too
    if comparison.negated:
        return lambda items: all(isinstance(i, str) for i in items) and not any(map(test, items))
    return lambda items: any(map(test, items))


def condition_from_json(raw: Any, where: str = "condition") -> Condition:
    """One condition of the contract's JSON shape; ``RuleError`` naming the field. ``values``
    may be left out (only ``EXISTS`` takes none); other fields are ignored."""
    if not isinstance(raw, dict):
        raise RuleError(f"{where} must be an object")
    values = raw.get("values", [])
    if not isinstance(values, list):
        raise RuleError(f"{where}.values must be an array")
    return Condition(raw.get("attribute"), raw.get("operator"), tuple(values), where)  # type: ignore[arg-type]


def conditions_from_json(raw: Any, where: str = "conditions") -> tuple[Condition, ...]:
    """A segment's conditions (at most ``CONDITIONS_MAX``); ``RuleError`` naming the field."""
    if not isinstance(raw, list):
        raise RuleError(f"{where} must be an array")
    if len(raw) > CONDITIONS_MAX:
        raise RuleError(f"{where} must hold at most {counted(CONDITIONS_MAX, 'condition')}")
    return tuple(condition_from_json(item, f"{where}[{i}]") for i, item in enumerate(raw))


def condition_schema() -> dict[str, Any]:
    """A condition's JSON Schema, from the catalogue: one alternative per operator, with
    what its values must be and how many it takes (``condition_from_json`` checks the rest:
    an RE2 expression's syntax, an instant's calendar)."""
    attribute = {"type": "string", "pattern": f"^{ATTRIBUTE_NAME_SPEC}$"}
    alternatives = []
    for comparison in OPERATORS.values():
        values: dict[str, Any] = {"type": "array", "maxItems": comparison.most}
        if comparison.most:
            values.update(items=comparison.values.schema, minItems=comparison.least)
        required = ["attribute", "operator", *(["values"] if comparison.least else [])]
        alternatives.append(
            {
                "type": "object",
                "required": required,
                "properties": {
                    "attribute": attribute,
                    "operator": {"const": str(comparison.operator)},
                    "values": values,
                },
            }
        )
    return {"oneOf": alternatives}


def held(
    conditions: Iterable[Condition], attributes: Attributes, user_identifier: str
) -> tuple[bool, ...]:
    """Whether each condition holds, in order (explain)."""
    return tuple(c.holds(attributes, user_identifier) for c in conditions)


def explain(
    conditions: Iterable[Condition], attributes: Attributes, user_identifier: str
) -> list[dict[str, Any]]:
    """Each condition as explain shows it: ``{"attribute", "operator", "held"}`` (contract 12)."""
    return [
        {
            "attribute": c.attribute,
            "operator": str(c.operator),
            "held": c.holds(attributes, user_identifier),
        }
        for c in conditions
    ]


def in_segment(
    listed: bool,
    excluded: bool,
    conditions: tuple[Condition, ...],
    attributes: Attributes,
    user_identifier: str,
) -> bool:
    """Membership of a segment by its definition (contract 12): a user listed in
    ``userIdentifiers`` is in; otherwise one listed in ``excludedUserIdentifiers`` is out;
    otherwise the user is in when there are conditions and every one holds.
    (``flagsight_core.segments`` answers the two lists.)"""
    if listed:
        return True
    if excluded:
        return False
    return bool(conditions) and all(c.holds(attributes, user_identifier) for c in conditions)


AllHold = Callable[[Attributes, str], bool]
"""Whether every condition of a segment holds for a user's attributes and identifier."""

HoldPlan = tuple[
    tuple[str | None, StringTest, Callable[[float], bool], Callable[[object], bool]], ...
]
"""A segment's conditions as ``all_hold`` walks them (and the native path, ``api.native``):
for each, the attribute it reads (None: the user's identifier), its answer for a ``str``
value, for a ``float`` value, and for any other value (a missing attribute never holds)."""


def hold_plan(conditions: tuple[Condition, ...]) -> HoldPlan:
    """``conditions`` as ``HoldPlan``: each condition's own answers, made once."""
    return tuple(
        (
            None if c.attribute == USER_IDENTIFIER_ATTRIBUTE else c.attribute,
            c._string,
            c._number,
            c.holds_for,
        )
        for c in conditions
    )


def all_hold(conditions: tuple[Condition, ...]) -> AllHold:
    """``all(c.holds(attributes, user) for c in conditions)`` as one function made once per
    segment, walking ``hold_plan``: a string or a float attribute (most are) costs a dict
    lookup and one call, often in C."""
    plan = hold_plan(conditions)

    def hold(attributes: Attributes, user_identifier: str) -> bool:
        for name, string, number, other in plan:
            value = user_identifier if name is None else attributes.get(name, _MISSING)
            kind = value.__class__
            if kind is str:
                if not string(value):  # type: ignore[arg-type]
                    return False
            elif kind is float:
                if not number(value):  # type: ignore[arg-type]
                    return False
            elif not (number(_double(value)) if kind is int else other(value)):  # type: ignore[arg-type]
                return False
        return True

    return hold


def all_hold_many(
    conditions: tuple[Condition, ...], attributes: Sequence[Attributes], users: Sequence[str]
) -> np.ndarray:
    """``all_hold`` for many users (``attributes[i]`` is ``users[i]``'s), as a boolean array:
    ``all_hold_columns`` over columns made from each user's attributes."""

    def read(name: str, chosen: np.ndarray | None) -> tuple[list[object], None]:
        if chosen is None:
            return [each.get(name, _MISSING) for each in attributes], None
        return [attributes[i].get(name, _MISSING) for i in chosen.tolist()], None

    return all_hold_columns(conditions, read, users)


def all_hold_columns(
    conditions: tuple[Condition, ...], read: ColumnReader, users: Sequence[str]
) -> np.ndarray:
    """``all_hold`` for many users, as a boolean array: a condition at a time over a column of
    its attribute's values (``read``; ``Condition.holds_many``), each asked only of the users
    every earlier one held for."""
    found = np.ones(len(users), dtype=bool)
    pending: np.ndarray | None = None  # the users still in, by index; None: every one
    for condition in conditions:
        if not users or (pending is not None and not pending.size):
            break
        kinds: Kinds | None = None
        if condition.attribute == USER_IDENTIFIER_ATTRIBUTE:
            values: Column = users if pending is None else [users[i] for i in pending.tolist()]
        else:
            values, kinds = read(condition.attribute, pending)
        hits = condition.holds_many(values, kinds)
        if hits.all():
            continue
        if pending is None:
            found[~hits] = False
            pending = np.flatnonzero(hits)
        else:
            found[pending[~hits]] = False
            pending = pending[hits]
    return found
