"""The flag editor's ordered rules as an HTML form: rows in, a draft or a rule list out.

Without JavaScript every change is a round trip: the whole draft is posted with an ``op``
(``add:TYPE``, ``remove:I``, ``up:I``, ``down:I`` or ``save``), the server applies it and shows
the draft again; only ``save`` writes. Row fields repeat by name in document order, so a script
that moves rows in the page needs no renumbering. Parsing reuses the evaluation core's
``rule_from_json``, so the editor accepts exactly what the admin API accepts.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from api.evaluation import Rule, RuleType, rule_from_json, rule_to_json
from api.evaluation.model import RuleError
from api.web.admin.fields import MAX_RULES
from api.web.dashboard.forms import Form

RULE_TYPES = tuple(t.value for t in RuleType)
_LABELS = {"type": "Type", "segment": "Segment", "percentage": "Percentage", "value": "Value"}


@dataclass
class RuleRow:
    """One rule as the form holds it: text, possibly invalid, with errors per field."""

    type: str
    segment: str = ""
    percentage: str = ""
    value: str = "true"
    errors: dict[str, str] = field(default_factory=dict)


def rows_from_rules(rules: Sequence[Rule]) -> list[RuleRow]:
    rows = []
    for rule in rules:
        raw = rule_to_json(rule)
        rows.append(
            RuleRow(
                type=raw["type"],
                segment=raw.get("segment", ""),
                percentage=str(raw.get("percentage", "")),
                value="true" if raw["value"] else "false",
            )
        )
    return rows


def rows_from_form(form: Form) -> list[RuleRow]:
    """The rows as posted; a short column (a tampered form) leaves the missing fields empty."""
    types = form.getall("rule_type")
    columns = [form.getall(name) for name in ("rule_segment", "rule_percentage", "rule_value")]

    def cell(column: list[str], index: int, default: str = "") -> str:
        return column[index] if index < len(column) else default

    return [
        RuleRow(
            type=kind,
            segment=cell(columns[0], i).strip(),
            percentage=cell(columns[1], i).strip(),
            value=cell(columns[2], i, "true"),
        )
        for i, kind in enumerate(types)
    ]


def apply_op(rows: list[RuleRow], op: str) -> list[RuleRow] | None:
    """The draft after an editing op; None when ``op`` is not one (e.g. ``save``)."""
    verb, _, arg = op.partition(":")
    rows = list(rows)
    if verb == "add" and arg in RULE_TYPES:
        rows.append(RuleRow(type=arg, percentage="50" if arg == RuleType.PERCENTAGE else ""))
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
            row.errors[field_name] = f"{_LABELS.get(field_name, 'The rule')} {problem}"
            continue
        if row.type == RuleType.SEGMENT and row.segment not in segment_keys:
            row.errors["segment"] = (
                f"There is no segment '{row.segment}' in this organization; create it on the"
                " Segments page first"
            )
    if len(rows) > MAX_RULES:
        rows[-1].errors["type"] = f"A flag has at most {MAX_RULES} rules"
    return None if any(row.errors for row in rows) else rules


def _row_json(row: RuleRow) -> dict[str, object]:
    raw: dict[str, object] = {"type": row.type, "value": row.value == "true"}
    if row.value not in ("true", "false"):
        raw["value"] = row.value
    if row.type == RuleType.SEGMENT:
        raw["segment"] = row.segment
    if row.type == RuleType.PERCENTAGE:
        raw["percentage"] = _number(row.percentage)
    return raw


def _number(text: str) -> float | int | str:
    """A number as typed (``12.5`` or ``12,5``); text that is not one stays text, so the rule
    parser reports it as not a number."""
    try:
        value = float(text.replace(",", "."))
    except ValueError:
        return text
    return int(value) if value.is_integer() else value
