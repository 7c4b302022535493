"""The segment form (contract 12): its members, the identifiers it excludes and its conditions,
each condition a row of an attribute's name, an operator from the catalogue and its values.

The admin API's body type checks what the form stands for (``SegmentPut``, with its
conditions' check), so the form refuses exactly what ``PUT .../segments/{segmentKey}``
refuses, in the API's words naming the field (``conditions[1].values[0]``), and the refusal is
shown next to the row it names. What only the form can get wrong (a line too long, a file that
is not text) is worded by ``parse_identifiers``.

Values are one per line; for numbers, versions and instants, whose values hold no comma, a
comma separates them too (a string, which may hold one, is one a line). ``EXISTS`` takes none.
``EQUALS`` compares with a string, a number or a boolean: ``42`` and ``true`` are read as
JSON's, a value in double quotes (``"42"``) as the string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from flagsight_core.conditions import (
    INSTANT,
    NUMBER,
    OPERATORS,
    SCALAR,
    VERSION,
    Condition,
    ConditionValue,
    Operator,
    ValueKind,
)
from flagsight_core.contract import CONDITIONS_MAX, MAX_SEGMENT_SIZE, USER_IDENTIFIER_MAX

from api.web.admin.bodies import convert
from api.web.admin.segments import SegmentPut, parsed_conditions
from api.web.dashboard.forms import Form
from api.web.errors import BadRequest

ATTRIBUTE, OPERATOR, VALUES = "condition_attribute", "condition_operator", "condition_values"
IDENTIFIERS, EXCLUDED, FILE = "identifiers", "excluded", "file"
KEEP_MEMBERS, KEEP_EXCLUDED = "keep_members", "keep_excluded"
EDITABLE_MAX = 1000
"""A list the edit form shows in full (its textarea is the list); a longer one is kept unless a
replacement is pasted, as a million identifiers do not belong in a page."""
EMPTY_ROWS = 2
"""Empty condition rows the form offers after those filled (up to ``CONDITIONS_MAX``)."""
COMMA_SEPARATED = (NUMBER, VERSION, INSTANT)
"""Kinds of values that hold no comma: a comma separates them as a line does."""
_CONDITION_FIELD = re.compile(r"Field 'conditions\[(\d+)\]")
_ROW_FIELD = re.compile(r"Field 'conditions\[\d+\]\.(attribute|operator|values)")


def operator_label(operator: Operator) -> str:
    """An operator as the list offers it: ``IN: is one of``, ``EQUALS: is / is one of``."""
    one, several = OPERATORS[operator].words
    return f"{operator}: {one}" if one == several else f"{operator}: {one} / {several}"


def values_hint(operator: Operator) -> str:
    """What an operator's values must be, and how the form separates them."""
    comparison = OPERATORS[operator]
    if comparison.most == 0:
        return "no values"
    how = "one" if comparison.most == 1 else "one per line"
    if comparison.values in COMMA_SEPARATED and comparison.most > 1:
        how += " or comma-separated"
    return f"{comparison.values.what}; {how}"


OPERATOR_CHOICES = tuple((str(o), operator_label(o), values_hint(o)) for o in OPERATORS)
"""Each operator's value, label and values' hint, in the contract's order."""
OPERATOR_HINTS = {value: hint for value, _, hint in OPERATOR_CHOICES}


def parse_identifiers(
    pasted: str, uploaded: bytes | None = None, where: str = "pasted list"
) -> list[str] | str:
    """The identifiers, in order, or an error message naming the line."""
    sources = [(where, pasted)]
    if uploaded:
        try:
            sources.append(("file", uploaded.decode("utf-8-sig")))
        except UnicodeDecodeError:
            return "The file is not UTF-8 text. Upload a plain text file, one identifier per line."
    identifiers: list[str] = []
    for source, text in sources:
        for number, line in enumerate(text.splitlines(), start=1):
            value = line.strip()
            if len(value) > USER_IDENTIFIER_MAX:
                return (
                    f"Line {number} of the {source} is longer than {USER_IDENTIFIER_MAX}"
                    " characters."
                )
            if value:
                identifiers.append(value)
    if len(identifiers) > MAX_SEGMENT_SIZE:
        return f"A segment holds at most {MAX_SEGMENT_SIZE:,} identifiers."
    return identifiers


# -- a condition's values as text, and back ----------------------------------------------------


def _kind(operator: str) -> ValueKind | None:
    comparison = OPERATORS.get(operator)  # type: ignore[call-overload]
    return comparison.values if comparison is not None else None


def _json_scalar(text: str) -> Any:
    """``text`` as JSON's number or boolean (or a quoted string), else None."""
    try:
        value = msgspec.json.decode(text.encode("utf-8", "surrogatepass"))
    except (msgspec.DecodeError, UnicodeError):
        return None
    return value if isinstance(value, str | int | float | bool) else None


def value_of(kind: ValueKind | None, text: str) -> Any:
    """One value as the API takes it: a number where the kind takes one and the text is one;
    JSON's for ``EQUALS``; else the text (the API words what is wrong with it)."""
    if kind is SCALAR:
        found = _json_scalar(text)
        quoted = text.startswith('"')
        return found if found is not None and (quoted or not isinstance(found, str)) else text
    if kind in (NUMBER, INSTANT):
        found = _json_scalar(text)
        is_number = isinstance(found, int | float) and not isinstance(found, bool)
        return found if is_number else text
    return text


def text_of(kind: ValueKind | None, value: ConditionValue) -> str:
    """One value as the form shows it (``value_of`` reads it back the same)."""
    if not isinstance(value, str):
        return json.dumps(value)
    if kind is SCALAR and (value.startswith('"') or _json_scalar(value) is not None):
        return json.dumps(value, ensure_ascii=False)
    return value


def split_values(kind: ValueKind | None, text: str) -> list[str]:
    """The values' texts: one a line (or between commas, for a kind that holds none)."""
    parts = text.splitlines()
    if kind in COMMA_SEPARATED:
        parts = [piece for line in parts for piece in line.split(",")]
    return [part.strip() for part in parts if part.strip()]


# -- the form ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConditionRow:
    """One row of the form: as typed, and the API's words on it when it was refused."""

    attribute: str = ""
    operator: str = str(Operator.EQUALS)
    values: str = ""
    error: str = ""

    @property
    def filled(self) -> bool:
        return bool(self.attribute.strip() or self.values.strip())

    @property
    def error_on(self) -> str:
        """The row's control its error names: ``attribute``, ``operator`` or ``values``."""
        found = _ROW_FIELD.match(self.error)
        return found[1] if found else "attribute" if self.error else ""

    @classmethod
    def of(cls, condition: Condition) -> ConditionRow:
        kind = OPERATORS[condition.operator].values
        shown = "\n".join(text_of(kind, value) for value in condition.values)
        return cls(condition.attribute, str(condition.operator), shown)

    def to_json(self) -> dict[str, Any]:
        """The condition the row stands for, as the API's body writes it."""
        kind = _kind(self.operator)
        values = [value_of(kind, text) for text in split_values(kind, self.values)]
        return {"attribute": self.attribute.strip(), "operator": self.operator, "values": values}


def rows_shown(rows: Sequence[ConditionRow]) -> list[ConditionRow]:
    """The rows filled, then empty ones, ``CONDITIONS_MAX`` in all at most."""
    empty = max(0, min(EMPTY_ROWS, CONDITIONS_MAX - len(rows)))
    return [*rows, *(ConditionRow() for _ in range(empty))]


@dataclass(frozen=True)
class SegmentDraft:
    """The form as the person filled it in. ``keep_members``/``keep_excluded``: a list too long
    for the page, kept as stored unless its textarea holds a replacement."""

    identifiers: str = ""
    excluded: str = ""
    rows: tuple[ConditionRow, ...] = ()
    keep_members: bool = False
    keep_excluded: bool = False

    @classmethod
    def from_form(cls, form: Form) -> SegmentDraft:
        rows = zip(form.getall(ATTRIBUTE), form.getall(OPERATOR), form.getall(VALUES),
                   strict=False)  # fmt: skip
        return cls(
            form.get(IDENTIFIERS),
            form.get(EXCLUDED),
            tuple(row for row in (ConditionRow(*fields) for fields in rows) if row.filled),
            form.get(KEEP_MEMBERS) == "yes",
            form.get(KEEP_EXCLUDED) == "yes",
        )

    @classmethod
    def of(
        cls, members: list[str], excluded: list[str], conditions: Sequence[Condition]
    ) -> SegmentDraft:
        """The edit form of a stored segment: each list in full when it is short enough."""
        keep_members, keep_excluded = len(members) > EDITABLE_MAX, len(excluded) > EDITABLE_MAX
        return cls(
            "" if keep_members else "\n".join(members),
            "" if keep_excluded else "\n".join(excluded),
            tuple(ConditionRow.of(c) for c in conditions),
            keep_members,
            keep_excluded,
        )

    def with_error(self, message: str) -> SegmentDraft:
        """The draft with the API's ``message`` on the row it names, if it names one."""
        found = _CONDITION_FIELD.match(message)
        if found is None or int(found[1]) >= len(self.rows):
            return self
        index = int(found[1])
        rows = list(self.rows)
        rows[index] = ConditionRow(rows[index].attribute, rows[index].operator,
                                   rows[index].values, message)  # fmt: skip
        return SegmentDraft(self.identifiers, self.excluded, tuple(rows), self.keep_members,
                            self.keep_excluded)  # fmt: skip


@dataclass(frozen=True)
class SegmentChange:
    """What saving the form writes: a list None is kept as stored."""

    members: list[str] | None
    excluded: list[str] | None
    conditions: tuple[Condition, ...]


def checked(
    draft: SegmentDraft, uploaded: bytes | None
) -> tuple[SegmentChange | None, dict[str, str]]:
    """The change the form stands for, or None and a message for each field it refuses
    (``conditions``: the API's words, naming the condition's field)."""
    errors: dict[str, str] = {}
    members = parse_identifiers(draft.identifiers, uploaded)
    if isinstance(members, str):
        errors[IDENTIFIERS] = members
    excluded = parse_identifiers(draft.excluded, where="list of excluded identifiers")
    if isinstance(excluded, str):
        errors[EXCLUDED] = excluded
    keep_members = draft.keep_members and not members
    keep_excluded = draft.keep_excluded and not excluded
    plain: dict[str, Any] = {"conditions": [row.to_json() for row in draft.rows]}
    if not errors:
        if not keep_members:
            plain["userIdentifiers"] = members
        if not keep_excluded:
            plain["excludedUserIdentifiers"] = excluded
    try:
        body = convert(SegmentPut, plain)
    except BadRequest as refused:
        message = str(refused.description)
        field_name = EXCLUDED if "'excludedUserIdentifiers" in message else (
            IDENTIFIERS if "'userIdentifiers" in message else "conditions"
        )  # fmt: skip
        errors.setdefault(field_name, message)
    if errors:
        return None, errors
    change = SegmentChange(
        None if keep_members else body.userIdentifiers or [],
        None if keep_excluded else body.excludedUserIdentifiers or [],
        parsed_conditions(body.conditions or [], "conditions"),
    )
    if change.members == [] and not change.conditions:
        return None, {IDENTIFIERS: NOBODY}
    return change, {}


NOBODY = (
    "Paste identifiers, choose a file (one per line) or add a condition: a segment with"
    " neither has no one in it."
)
