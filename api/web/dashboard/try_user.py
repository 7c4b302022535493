"""The flag page's "try a user" form (contract 12's explain): a user identifier and attributes,
given as JSON or as rows of a name, a kind and a value, answered with what the flag gives that
user now and each rule and condition in words.

It is the admin API's explain (``api.web.admin.explain``): the same body type checks the
input, so the form refuses exactly what ``POST .../explain`` refuses, in the API's words, and
the same computation answers (the flag and segments as every worker serves them, not the
editor's unsaved draft; nothing metered or logged). What only the form can get wrong is worded
here: JSON that is no JSON, a row's value that is not of its kind, a name given twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import msgspec
from flagsight_core import Rule
from flagsight_core.conditions import OPERATORS, Operator
from flagsight_core.segments import DefinedSegment

from api.web.admin.bodies import convert
from api.web.admin.explain import Explained, ExplainRequest
from api.web.dashboard.forms import Form
from api.web.errors import BadRequest
from api.web.jsonio import decode_json_overflowing

USER = "try_user"
ATTRIBUTES_JSON = "try_attributes"
ROW_NAME, ROW_KIND, ROW_VALUE = "try_name", "try_kind", "try_value"
KINDS = {
    "text": "Text",
    "number": "Number",
    "boolean": "true or false",
    "list": "List of text (commas between)",
}
"""A row's kinds: how its value is read."""
EMPTY_ROWS = 2
"""Empty rows the form offers after those filled (at least ``MIN_ROWS`` in all)."""
MIN_ROWS = 3


@dataclass(frozen=True)
class AttributeRow:
    name: str = ""
    kind: str = "text"
    value: str = ""

    @property
    def filled(self) -> bool:
        return bool(self.name.strip() or self.value.strip())


@dataclass(frozen=True)
class TryDraft:
    """The form as the person filled it in."""

    user: str = ""
    attributes_json: str = ""
    rows: tuple[AttributeRow, ...] = ()

    @classmethod
    def from_form(cls, form: Form) -> TryDraft:
        rows = zip(form.getall(ROW_NAME), form.getall(ROW_KIND), form.getall(ROW_VALUE),
                   strict=False)  # fmt: skip
        return cls(
            form.get(USER),
            form.get(ATTRIBUTES_JSON),
            tuple(row for row in (AttributeRow(*fields) for fields in rows) if row.filled),
        )

    def rows_shown(self) -> list[AttributeRow]:
        """The rows filled, then empty ones."""
        empty = max(EMPTY_ROWS, MIN_ROWS - len(self.rows))
        return [*self.rows, *(AttributeRow() for _ in range(empty))]

    def request(self) -> ExplainRequest:
        """The explain request the form stands for; ``BadRequest`` in the API's words (or the
        form's, for what only the form can get wrong)."""
        plain: dict[str, Any] = {"userIdentifier": self.user}
        attributes = self._json_attributes()
        for number, row in enumerate(self.rows, start=1):
            name = row.name.strip()
            if not name:
                raise BadRequest(f"Row {number} has a value but no attribute name")
            if not isinstance(attributes, dict):
                break  # the API words what is wrong with the JSON
            if name in attributes:
                raise BadRequest(f"Attribute '{name}' is given twice (row {number})")
            attributes[name] = _row_value(row, name, number)
        if attributes is not None:
            plain["attributes"] = attributes
        return convert(ExplainRequest, plain)

    def _json_attributes(self) -> Any:
        text = self.attributes_json.strip()
        if not text:
            return {} if self.rows else None
        try:
            return decode_json_overflowing(text.encode("utf-8", "surrogatepass"))
        except BadRequest as refused:
            detail = str(refused.description).removeprefix("Malformed JSON body: ")
            raise BadRequest(f"The attributes are not valid JSON: {detail}") from None


def _row_value(row: AttributeRow, name: str, number: int) -> Any:
    """A row's value as its kind reads it; ``BadRequest`` when it is not one."""
    where = f"Attribute '{name}' (row {number})"
    text = row.value.strip()
    if row.kind == "number":
        try:
            value = msgspec.json.decode(text.encode("utf-8", "surrogatepass"))
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeError):
            value = None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadRequest(f"{where} must be a number, such as 42 or -1.5")
        return value
    if row.kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise BadRequest(f"{where} must be true or false")
        return text.lower() == "true"
    if row.kind == "list":
        return [item.strip() for item in row.value.split(",") if item.strip()]
    if row.kind != "text":
        raise BadRequest(f"{where}: the kind must be one of {', '.join(KINDS.values())}")
    return row.value


# -- the answer in words ---------------------------------------------------------------------


@dataclass(frozen=True)
class ConditionShown:
    words: str
    held: bool


@dataclass(frozen=True)
class RuleShown:
    number: int
    """From 1, as the editor counts rules."""
    summary: str
    """The rule's type and fields: ``SEGMENT beta-testers``."""
    serves: str
    """``ON`` or ``OFF``."""
    matched: bool
    conditions: tuple[ConditionShown, ...] = ()
    segments: tuple[str, ...] = ()
    """What each segment the rule consults made of the user, in words (``segment_words``)."""


@dataclass(frozen=True)
class TrialShown:
    """The answer, each rule reached, and the API's answer as JSON."""

    headline: str
    reason: str
    value: bool | None
    rules: tuple[RuleShown, ...]
    answer_json: str


@dataclass
class Trial:
    """The section's state: the draft, and the answer or the problem."""

    draft: TryDraft = field(default_factory=TryDraft)
    shown: TrialShown | None = None
    problem: str | None = None


ERROR_WORDS = {
    "FLAG_NOT_FOUND": "no worker serves this flag yet (FLAG_NOT_FOUND)",
    "FLAG_ARCHIVED": "the flag is archived (FLAG_ARCHIVED): no rule is asked",
    "FLAG_DISABLED": "the flag is disabled (FLAG_DISABLED): no rule is asked",
}


def on_off(value: bool) -> str:
    return "ON (true)" if value else "OFF (false)"


def shown(user: str, found: Explained) -> TrialShown:
    """``found`` in words: what the user gets, why, and what each rule made of them."""
    answer = found.answer()
    rules = tuple(_rule_shown(user, found, entry) for entry in found.explanation.rules)
    if answer.error is not None:
        reason = ERROR_WORDS.get(answer.error.type, answer.error.message)
    elif answer.matchedRuleType is None:
        reason = "no rule matched" if rules else "the flag has no rules"
    else:
        reason = f"rule {rules[-1].number} ({answer.matchedRuleType}) decided"
    return TrialShown(
        headline=f"{user} gets {on_off(answer.value)}",
        reason=reason,
        value=None if answer.error is not None else answer.value,
        rules=rules,
        answer_json=json.dumps(msgspec.to_builtins(answer), indent=2, ensure_ascii=False),
    )


def _rule_shown(user: str, found: Explained, entry: dict[str, Any]) -> RuleShown:
    flag = found.flag
    assert flag is not None  # rules are explained only for a flag that is served
    rule = flag.rules[entry["index"]]
    asked = rule.conditions_asked(found.segments)
    held = entry.get("conditions") or []
    return RuleShown(
        number=entry["index"] + 1,
        summary=rule_summary(rule),
        serves="ON" if rule.value else "OFF",
        matched=entry["matched"],
        conditions=tuple(
            ConditionShown(_condition_words(asked, i, c), c["held"]) for i, c in enumerate(held)
        ),
        segments=tuple(
            segment_words(user, key, found.segments.get(key)) for key in rule.segments_consulted()
        ),
    )


def segment_words(user: str, key: str, segment: Any) -> str:
    """What a segment made of the user, by its lists (contract 12: listed is in, then excluded
    is out, then the conditions decide): ``vip-1 is listed in beta``."""
    if segment is None:
        return f"segment {key} does not exist, so no one is in it"
    if not isinstance(segment, DefinedSegment):
        return f"{user} is {'' if user in segment else 'not '}listed in segment {key}"
    if user in segment.listed:
        return f"{user} is listed in segment {key}: in, whatever its conditions say"
    if user in segment.excluded:
        return f"{user} is excluded from segment {key}: out, whatever its conditions say"
    return f"{user} is neither listed in nor excluded from segment {key}: its conditions decide"


def rule_summary(rule: Rule) -> str:
    """``SEGMENT beta-testers``, ``PERCENTAGE 30 %``, ``PERCENTAGE 30 %, segment eu``: the
    type, its first field's value, then each other field it has by its label."""
    document = rule.to_json()
    given = [(f, document[f.name]) for f in rule.fields if document.get(f.name) is not None]
    words = [rule.type]
    for index, (rule_field, value) in enumerate(given):
        shown = f"{value} %" if rule_field.name == "percentage" else str(value)
        words.append(f" {shown}" if index == 0 else f", {rule_field.label.lower()} {shown}")
    return "".join(words)


def _condition_words(asked: tuple[Any, ...], index: int, held: dict[str, Any]) -> str:
    """The condition in words (``country is one of "DE", "AT"``) when the rule still asks it
    at that place, else its attribute and operator."""
    condition = asked[index] if index < len(asked) else None
    same = condition is not None and (condition.attribute, str(condition.operator)) == (
        held["attribute"], held["operator"],
    )  # fmt: skip
    if same and hasattr(condition, "in_words"):
        return str(condition.in_words())
    operator = held["operator"]
    phrase = OPERATORS[Operator(operator)].words[0] if operator in OPERATORS else operator
    return f"{held['attribute']} {phrase} …"
