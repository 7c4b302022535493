"""What a user's attributes may be (contract 12), in the words of the service's 400s.

The service refuses a request whose attributes break these rules (``api/web/attributes.py``
decodes them in one step and, for a body it refuses, asks ``attributes_problem`` for the
words); the SDK's local mode asks the same before it decides, so that it answers as the
service would, never deciding (and reporting) what the service refuses. An attribute's name
matches ``[A-Za-z0-9._-]{1,64}`` and is not ``userIdentifier``; its value is a string of at
most 1,024 characters, a finite number, a boolean, or an array of at most 100 such strings;
at most 50 a user. No message carries a value, only the field's name (contract 12's privacy).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from flagsight_core.contract import (
    ATTRIBUTE_ARRAY_MAX,
    ATTRIBUTE_NAME_MAX,
    ATTRIBUTE_NAME_PATTERN,
    ATTRIBUTE_STRING_MAX,
    ATTRIBUTES_MAX,
    USER_IDENTIFIER_ATTRIBUTE,
)

NAME_IN_WORDS = f"1 to {ATTRIBUTE_NAME_MAX} letters, digits, '.', '_' or '-'"
VALUE_IN_WORDS = (
    f"a string of at most {ATTRIBUTE_STRING_MAX} characters, a finite number, a boolean"
    f" or an array of at most {ATTRIBUTE_ARRAY_MAX} such strings"
)
TOO_LONG = f"must be at most {ATTRIBUTE_STRING_MAX} characters long"

NAMES_REMEMBERED = 4_096
"""Valid names ``valid_names`` keeps (applications send a few dozen); past this many, a new
name is checked each time it comes, so what clients send cannot grow a process."""

_valid_names: set[str] = set()
known_names = _valid_names.issuperset
"""Whether every one of some names was found valid before: one C call, asked first."""


def valid_names(names: Iterable[object]) -> bool:
    """Whether each of ``names`` is an attribute's name: 1 to 64 of its letters, and not
    ``userIdentifier``. One C call for names seen before (``NAMES_REMEMBERED``); a refused one
    is never remembered (a client sends the same few names every time, and a regular
    expression per name cost a single evaluate 6 µs of its 1 KB attributes)."""
    if _valid_names.issuperset(names):
        return True
    for name in names:
        if name not in _valid_names:
            if (
                not isinstance(name, str)
                or name == USER_IDENTIFIER_ATTRIBUTE
                or not ATTRIBUTE_NAME_PATTERN.fullmatch(name)
            ):
                return False
            if len(_valid_names) < NAMES_REMEMBERED:
                _valid_names.add(name)
    return True


def valid_names_by_user(attributes: Mapping[str, Mapping[str, object]]) -> bool:
    """``valid_names`` for every user's attributes at once: the distinct names of all of
    them, gathered in C (a bulk request's users share their names)."""
    return valid_names(set().union(*attributes.values()))


def attributes_problem(raw: object, where: str = "attributes") -> str | None:
    """Why one user's ``attributes`` (as decoded from JSON, or as an application gives them)
    are refused, naming the first wrong field; None when contract 12 takes them (or there are
    none). Valid attributes, what every call but a mistaken one holds, cost one pass over
    their values (``_taken``); the words are found only for a refusal."""
    if raw is None or (type(raw) is dict and _taken(raw)):
        return None
    return _first_problem(raw, where)


def _first_problem(raw: object, where: str) -> str | None:
    """The full check: the words for the first wrong field, or None."""
    if not isinstance(raw, dict):
        return f"Field '{where}' must be a JSON object of attributes by name"
    if len(raw) > ATTRIBUTES_MAX:
        return f"Field '{where}' has {len(raw)} attributes; at most {ATTRIBUTES_MAX} are allowed"
    for name, value in raw.items():
        if name == USER_IDENTIFIER_ATTRIBUTE:
            return (
                f"Field '{where}.{name}' is not allowed: the name is reserved for the user's"
                " identifier, which conditions read by that name"
            )
        if not isinstance(name, str) or not ATTRIBUTE_NAME_PATTERN.fullmatch(name):
            return (
                f"Field '{where}' has an attribute named {shown(name)}; a name is {NAME_IN_WORDS}"
            )
        problem = _value_problem(value)
        if problem is not None:
            return f"Field '{where}.{name}{problem[0]}' {problem[1]}"
    return None


_INT_PAST_DOUBLE = 2**1024 - 2**970
"""The least int Python's conversion to a double overflows at (``finite_number`` refuses it)."""


def _taken(raw: dict) -> bool:
    """Whether contract 12 takes these attributes, checked as fast as Python allows (a local
    evaluate pays it on every call): the names against those seen valid in one C call, then
    each value by its exact type, inline; anything unusual goes to the full check."""
    if len(raw) > ATTRIBUTES_MAX or not (_valid_names.issuperset(raw) or valid_names(raw)):
        return False
    for value in raw.values():
        kind = type(value)
        if kind is str:
            if len(value) > ATTRIBUTE_STRING_MAX:
                return False
        elif kind is float:
            if value - value != 0:  # NaN and the infinities
                return False
        elif kind is int:
            if not -_INT_PAST_DOUBLE < value < _INT_PAST_DOUBLE:  # no double holds it
                return False
        elif kind is tuple or kind is list:
            if len(value) > ATTRIBUTE_ARRAY_MAX:
                return False
            for item in value:
                if type(item) is not str or len(item) > ATTRIBUTE_STRING_MAX:
                    return False
        elif kind is not bool and _value_problem(value) is not None:
            return False
    return True


def finite_number(value: object) -> bool:
    """Whether ``value`` is a finite number (a JSON integer has no size limit, so a 400-digit
    one is a Python ``int`` that no float can hold); a boolean is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _value_problem(value: object) -> tuple[str, str] | None:
    """What is wrong with an attribute's value: where inside it (an array's item) and what;
    None when it is one contract 12 takes. An array is a list, or a tuple as the core holds
    it."""
    if isinstance(value, str):
        return None if len(value) <= ATTRIBUTE_STRING_MAX else ("", TOO_LONG)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return None if finite_number(value) else ("", "must be a finite number")
    if isinstance(value, list | tuple):
        if len(value) > ATTRIBUTE_ARRAY_MAX:
            return "", f"has {len(value)} items; at most {ATTRIBUTE_ARRAY_MAX} are allowed"
        for index, item in enumerate(value):
            if not isinstance(item, str):
                return f"[{index}]", "must be a string: an array attribute holds strings only"
            if len(item) > ATTRIBUTE_STRING_MAX:
                return f"[{index}]", TOO_LONG
        return None
    return "", f"must be {VALUE_IN_WORDS}"


def shown(name: object) -> str:
    """A name that is not an attribute's, quoted for a message (cut if long)."""
    text = name if isinstance(name, str) else str(name)
    return repr(text if len(text) <= ATTRIBUTE_NAME_MAX else text[:ATTRIBUTE_NAME_MAX] + "…")
