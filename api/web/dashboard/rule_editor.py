"""The flag editor's ordered rules as an HTML form: rows in, a draft or a rule list out.

Without JavaScript every change is a round trip: the whole draft is posted with an ``op``
(``add:TYPE``, ``remove:I``, ``up:I``, ``down:I`` or ``save``), the server applies it and shows
the draft again; only ``save`` writes. Row fields repeat by name in document order, so a script
that moves rows in the page needs no renumbering: every row posts every column (``rule_type``,
``rule_value`` and ``rule_<field>`` for each field any rule type has), empty where its type
has no such field.

Nothing here is written per rule type: the types, their fields, labels and inputs come from
the registry (``flagsight_core.RULE_TYPES``, ``Rule.fields``), and parsing reuses the core's
``rule_from_json``, so the editor accepts exactly what the admin API accepts.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from flagsight_core import RULE_TYPES, Rule, RuleError, RuleField, rule_from_json, rule_to_json
from flagsight_core.contract import MAX_RULES

from api.web.dashboard.forms import Form

SEGMENT_INPUT = "segment"
"""A field naming one of the organization's segments (``RuleField.input``)."""
NUMBER_INPUT = "number"
"""A field holding a number (``RuleField.input``): typed as text, sent as a JSON number."""
_LABELS = {"type": "Type", "value": "Value"}


def columns() -> list[str]:
    """Every rule type's field names, once each, in order: the form's ``rule_<name>`` columns."""
    return list(dict.fromkeys(f.name for kind in RULE_TYPES.values() for f in kind.fields))


def _editor_fields(kind: str) -> tuple[RuleField, ...]:
    rule_type = RULE_TYPES.get(kind)
    return () if rule_type is None else rule_type.fields


@dataclass
class RuleRow:
    """One rule as the form holds it: text, possibly invalid, with errors per field."""

    type: str
    fields: dict[str, str] = field(default_factory=dict)
    """The text of each of its type's fields, by field name."""
    value: str = "true"
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def description(self) -> str:
        """What its type matches, for people; empty for a type that is not known."""
        rule_type = RULE_TYPES.get(self.type)
        return "" if rule_type is None else rule_type.description

    def editor_field(self, name: str) -> RuleField | None:
        """Its type's field of that name, or None when its type has none."""
        return next((f for f in _editor_fields(self.type) if f.name == name), None)


def rows_from_rules(rules: Sequence[Rule]) -> list[RuleRow]:
    rows = []
    for rule in rules:
        raw = rule_to_json(rule)
        rows.append(
            RuleRow(
                type=raw["type"],
                fields={f.name: str(raw.get(f.name, "")) for f in rule.fields},
                value="true" if raw["value"] else "false",
            )
        )
    return rows


def rows_from_form(form: Form) -> list[RuleRow]:
    """The rows as posted; a short column (a tampered form) leaves the missing fields empty."""
    types = form.getall("rule_type")
    values = form.getall("rule_value")
    texts = {name: form.getall(f"rule_{name}") for name in columns()}

    def cell(column: list[str], index: int, default: str = "") -> str:
        return column[index] if index < len(column) else default

    return [
        RuleRow(
            type=kind,
            fields={f.name: cell(texts[f.name], i).strip() for f in _editor_fields(kind)},
            value=cell(values, i, "true"),
        )
        for i, kind in enumerate(types)
    ]


def apply_op(rows: list[RuleRow], op: str) -> list[RuleRow] | None:
    """The draft after an editing op; None when ``op`` is not one (e.g. ``save``)."""
    verb, _, arg = op.partition(":")
    rows = list(rows)
    if verb == "add" and arg in RULE_TYPES:
        rows.append(RuleRow(type=arg, fields={f.name: f.default for f in _editor_fields(arg)}))
        return rows
    if not (arg.isascii() and arg.isdigit() and len(arg) <= 6) or int(arg) >= len(rows):
        return None
    index = int(arg)
    if verb == "remove":
        del rows[index]
    elif verb == "up" and index > 0:
        rows[index - 1], rows[index] = rows[index], rows[index - 1]
    elif verb == "down" and index + 1 < len(rows):
        rows[index + 1], rows[index] = rows[index], rows[index + 1]
    elif verb not in ("up", "down"):
        return None
    return rows


def parse_rows(rows: list[RuleRow], segment_keys: Collection[str]) -> list[Rule] | None:
    """The rules, or None after writing each problem into its row's ``errors``."""
    rules: list[Rule] = []
    for row in rows:
        try:
            rules.append(rule_from_json(_row_json(row), "rule"))
        except RuleError as exc:
            where, _, problem = str(exc).partition(" ")
            field_name = where.partition(".")[2] or "type"
            row.errors[field_name] = f"{_label(row, field_name)} {problem}"
            continue
        for editor_field in _editor_fields(row.type):
            text = row.fields.get(editor_field.name, "")
            if not text and not editor_field.required:
                continue  # an optional field left empty: the rule has none
            if editor_field.input == SEGMENT_INPUT and text not in segment_keys:
                row.errors[editor_field.name] = (
                    f"There is no segment '{text}' in this organization; create it on the"
                    " Segments page first"
                )
    if len(rows) > MAX_RULES:
        rows[-1].errors["type"] = f"A flag has at most {MAX_RULES} rules"
    return None if any(row.errors for row in rows) else rules


def _label(row: RuleRow, field_name: str) -> str:
    editor_field = row.editor_field(field_name)
    if editor_field is not None:
        return editor_field.label
    return _LABELS.get(field_name, "The rule")


def _row_json(row: RuleRow) -> dict[str, object]:
    raw: dict[str, object] = {"type": row.type, "value": row.value == "true"}
    if row.value not in ("true", "false"):
        raw["value"] = row.value
    for editor_field in _editor_fields(row.type):
        text = row.fields.get(editor_field.name, "")
        if not text and not editor_field.required:
            continue  # an optional field left empty is left out (a percentage's segment)
        raw[editor_field.name] = _number(text) if editor_field.input == NUMBER_INPUT else text
    return raw


def _number(text: str) -> float | int | str:
    """A number as typed (``12.5`` or ``12,5``); text that is not one stays text, so the rule
    parser reports it as not a number."""
    try:
        value = float(text.replace(",", "."))
    except ValueError:
        return text
    return int(value) if value.is_integer() else value
