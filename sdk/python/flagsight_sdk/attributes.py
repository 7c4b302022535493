"""A user's attributes, as the application gives them and as the SDK passes them on
(contract section 12, "Targeting by attributes").

An attribute's value is a string, a finite number, a boolean, or an array of strings. The
client takes them as given: remote, they go in the request body (an array as a JSON array);
local, to the evaluation core (an array as a tuple, the core's form). The OpenFeature
provider takes the evaluation context's fields other than the targeting key and keeps only
those of a shape listed above, as the service's OFREP endpoints do: another shape (an object,
null, a mixed array) is ignored, never an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

AttributeValue = str | int | float | bool | Sequence[str]
Attributes = Mapping[str, AttributeValue]

ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""``flagsight_core.contract.ATTRIBUTE_NAME_PATTERN``, written again: the remote client must
import without the core's numpy (``tests/sdk/test_attributes.py`` holds the two equal)."""
TARGETING_KEY = "targetingKey"
RESERVED_NAME = "userIdentifier"
"""Conditions may name it (it is the user's identifier); a request may not send it."""


def for_core(attributes: Attributes) -> dict[str, Any]:
    """``attributes`` for the local core: a copy, its arrays as tuples, every other value as
    given. The copy in one C call, then only the lists replaced: a local evaluation's 1 KB of
    attributes in 0.7 µs instead of 2.4 µs for a comprehension."""
    kept = dict(attributes)
    for name, value in attributes.items():
        if isinstance(value, list):
            kept[name] = tuple(value)
    return kept


def body_attributes(attributes: Attributes) -> dict[str, Any]:
    """``attributes`` as a request body's JSON object (an array as a JSON array)."""
    return {
        name: list(value) if isinstance(value, list | tuple) else value
        for name, value in attributes.items()
    }


def from_openfeature(fields: Mapping[str, object]) -> dict[str, AttributeValue]:
    """An OpenFeature evaluation context's attributes: each field of a shape contract 12
    takes (an aware ``datetime`` as its RFC 3339 string), the targeting key, the reserved
    ``userIdentifier`` and names outside contract 12's pattern left out. A value over the
    limits is kept: the service refuses it, as OFREP refuses such a context."""
    kept: dict[str, AttributeValue] = {}
    for name, value in fields.items():
        if name in (TARGETING_KEY, RESERVED_NAME) or not ATTRIBUTE_NAME.fullmatch(name):
            continue  # a name no condition can use ("first name"), as OFREP ignores it
        shaped = _shaped(value)
        if shaped is not None:
            kept[name] = shaped
    return kept


def _shaped(value: object) -> AttributeValue | None:
    if isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        return value.isoformat() if value.utcoffset() is not None else None
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None
