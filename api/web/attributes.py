"""A user's attributes as a request sends them (contract 12, "Targeting by attributes").

``POST /v1/evaluate`` takes ``attributes``, one user's; ``POST /v1/evaluate/bulk`` takes
``attributes`` by user identifier of the request. An attribute's name matches
``[A-Za-z0-9._-]{1,64}`` and is not ``userIdentifier`` (a condition reads the identifier by that
name); its value is a string of at most 1,024 characters, a finite number, a boolean, or an
array of at most 100 such strings; at most 50 a user. Two readings of the same rules:

- **strict**, for ``/v1``: ``ATTRIBUTES`` and ``ATTRIBUTES_BY_USER`` are the msgspec types a
  valid body decodes into in one step (arrays as tuples, numbers as floats: the core compares
  numbers as IEEE doubles, so nothing is lost), every limit checked in C but the names' letters:
  ``valid_names`` checks those after the decoding, against the names already seen (a client
  sends the same few names on every request; msgspec's ``pattern`` runs Python's ``re`` on
  each name, 6 µs of a single evaluate's 1 KB attributes and 70 ms of a bulk request of
  10,000 users'). For a body they refuse, ``check_attributes`` and
  ``check_attributes_by_user`` raise the 400 naming the first wrong field, in the words of
  every other 400 (``Field 'attributes.plan' must be at most 1024 characters long``).
- **lenient**, for OFREP (``context_attributes``): every field of the context but
  ``targetingKey`` is read; a field of another shape (an object, null, a mixed array, a number
  no double holds) or with a name no condition can use is ignored, never an error; only a
  context over the limits is refused (``OverLimit``).

No message carries a value, only the field's name: a refusal's words, which the answer carries
and a log may too, never hold what the user's attributes are (contract 12's privacy).
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Annotated, Any

import msgspec
from flagsight_core import Attributes
from flagsight_core.attribute_rules import (
    TOO_LONG,
    attributes_problem,
    finite_number,
)
from flagsight_core.contract import (
    ATTRIBUTE_ARRAY_MAX,
    ATTRIBUTE_NAME_MAX,
    ATTRIBUTE_NAME_PATTERN,
    ATTRIBUTE_STRING_MAX,
    ATTRIBUTES_MAX,
    BULK_MAX_USERS,
    USER_IDENTIFIER_ATTRIBUTE,
    USER_IDENTIFIER_MAX,
)

from api.web.errors import BadRequest

# --- the strict reading's types (``/v1``) ---------------------------------------------------

_NAME = str
"""An attribute's name, as msgspec reads it: its length and letters are ``valid_names``'s
(a length constraint here would cost 0.4 µs of a 1 KB object's 1.9 µs, checked again)."""
_STRING = Annotated[str, msgspec.Meta(max_length=ATTRIBUTE_STRING_MAX)]
_VALUE = (
    _STRING
    | float
    | bool
    | Annotated[tuple[_STRING, ...], msgspec.Meta(max_length=ATTRIBUTE_ARRAY_MAX)]
)
ATTRIBUTES = Annotated[dict[_NAME, _VALUE], msgspec.Meta(max_length=ATTRIBUTES_MAX)]
"""One user's attributes, as a valid ``/v1`` body holds them."""
_USER = Annotated[str, msgspec.Meta(min_length=1, max_length=USER_IDENTIFIER_MAX)]
ATTRIBUTES_BY_USER = Annotated[dict[_USER, ATTRIBUTES], msgspec.Meta(max_length=BULK_MAX_USERS)]
"""A bulk request's attributes by user identifier (each one of its ``userIdentifiers``:
``check_users``)."""

# --- the strict reading's words -------------------------------------------------------------


def check_attributes(raw: object, where: str = "attributes") -> None:
    """Raise the 400 naming the first wrong field of one user's decoded ``attributes``
    (None: the request sent none): ``flagsight_core.attribute_rules``' words, which the SDK's
    local mode answers with too."""
    problem = attributes_problem(raw, where)
    if problem is not None:
        raise BadRequest(problem)


def check_attributes_by_user(raw: object, users: Container[str]) -> None:
    """Raise the 400 naming the first wrong field of a bulk request's decoded ``attributes``
    (None: none); ``users`` are the request's identifiers."""
    if raw is None:
        return
    if not isinstance(raw, dict):
        raise BadRequest(
            "Field 'attributes' must be a JSON object of attributes by user identifier"
        )
    check_users(raw, users)
    for user, attributes in raw.items():
        where = f"attributes['{user}']"
        if not isinstance(attributes, dict):
            raise BadRequest(f"Field '{where}' must be a JSON object of attributes by name")
        check_attributes(attributes, where)


def check_users(attributes: Mapping[str, object], users: Container[str]) -> None:
    """Raise the 400 for the first user of ``attributes`` that is not one of ``users``
    (a dict of them: its keys are compared in one C call when all are there)."""
    if isinstance(users, dict) and attributes.keys() <= users.keys():
        return
    for user in attributes:
        if user not in users:
            raise BadRequest(
                f"Field 'attributes['{user}']' names a user that is not in 'userIdentifiers'"
            )


# --- the lenient reading (OFREP) ------------------------------------------------------------


class OverLimit(ValueError):  # noqa: N818 - a refusal, named for what it refuses
    """A context over contract 12's limits; the message names the field."""


TARGETING_KEY = "targetingKey"


def context_attributes(context: Mapping[str, Any], where: str = "context") -> Attributes:
    """The attributes an OFREP evaluation context gives its user.

    Every field but ``targetingKey`` whose value has an attribute's shape counts towards the
    limits (at most 50 such fields, strings of at most 1,024 characters, arrays of at most
    100 strings): past them, ``OverLimit``. Of those, each whose name an attribute may have
    is an attribute; every other field is ignored, never an error.
    """
    taken: dict[str, Any] = {}
    shaped = 0
    for name, value in context.items():
        if name == TARGETING_KEY:
            continue
        kept = _lenient_value(value, where, name)
        if kept is None:
            continue
        shaped += 1
        if name != USER_IDENTIFIER_ATTRIBUTE and ATTRIBUTE_NAME_PATTERN.fullmatch(name):
            taken[name] = kept
    if shaped > ATTRIBUTES_MAX:
        raise OverLimit(
            f"Field '{where}' has {shaped} attributes; at most {ATTRIBUTES_MAX} are allowed"
        )
    return taken


def _lenient_value(value: object, where: str, name: str) -> Any:
    """``value`` as the core takes it, None for a shape it does not take; ``OverLimit`` for
    a string or an array over the limits."""
    if isinstance(value, str):
        if len(value) > ATTRIBUTE_STRING_MAX:
            raise OverLimit(f"Field '{_field(where, name)}' {TOO_LONG}")
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value) if finite_number(value) else None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        if len(value) > ATTRIBUTE_ARRAY_MAX:
            raise OverLimit(
                f"Field '{_field(where, name)}' has {len(value)} items;"
                f" at most {ATTRIBUTE_ARRAY_MAX} are allowed"
            )
        for index, item in enumerate(value):
            if len(item) > ATTRIBUTE_STRING_MAX:
                raise OverLimit(f"Field '{_field(where, name)}[{index}]' {TOO_LONG}")
        return tuple(value)
    return None


def _field(where: str, name: str) -> str:
    """``where.name``, a long name cut (an OFREP field's name may be anything)."""
    if len(name) > ATTRIBUTE_NAME_MAX:
        name = name[:ATTRIBUTE_NAME_MAX] + "…"
    return f"{where}.{name}"
