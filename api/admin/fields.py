"""Validation of admin request bodies and path parameters; every 400 names its field."""

from __future__ import annotations

from typing import Any

from api.controlplane.model import Plan
from api.controlplane.store import KEY_PATTERN, MAX_SEGMENT_SIZE
from api.errors import BadRequest
from api.evaluation import Rule, rule_from_json
from api.evaluation.model import RuleError
from api.jsonio import require_bool, require_list, require_str

MAX_NAME_LENGTH = 200
MAX_USER_IDENTIFIER_LENGTH = 1024
MAX_RULES = 100
_PLANS = ", ".join(plan.value for plan in Plan)


def key_param(value: str, name: str) -> str:
    """A flag, segment or environment key from the path or body."""
    if not KEY_PATTERN.fullmatch(value):
        raise BadRequest(f"'{name}' must match [A-Za-z0-9._-]{{1,128}} (got {value[:140]!r})")
    return value


def plan(body: dict[str, Any], *, required: bool) -> Plan | None:
    value = body.get("plan")
    if value is None and not required:
        return None
    if value is None:
        raise BadRequest("Field 'plan' is required")
    if not isinstance(value, str) or value not in Plan._value2member_map_:
        raise BadRequest(f"Field 'plan' must be one of {_PLANS}")
    return Plan(value)


def monthly_limit(body: dict[str, Any]) -> int | None:
    value = body.get("monthlyEvaluationLimit")
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 12073.0 is the integer 12073 in JSON (and JSON Schema)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise BadRequest("Field 'monthlyEvaluationLimit' must be an integer or null")
    return value


def name(body: dict[str, Any]) -> str:
    return require_str(body, "name", max_len=MAX_NAME_LENGTH)


def optional_name(body: dict[str, Any], *, min_len: int = 1) -> str | None:
    if body.get("name") is None:
        return None
    return require_str(body, "name", min_len=min_len, max_len=MAX_NAME_LENGTH)


def optional_bool(body: dict[str, Any], field_name: str) -> bool | None:
    if body.get(field_name) is None:
        return None
    return require_bool(body, field_name)


def environment_key(body: dict[str, Any]) -> str:
    value = require_str(body, "key", max_len=128)
    if not KEY_PATTERN.fullmatch(value):
        raise BadRequest("Field 'key' must match [A-Za-z0-9._-]{1,128}")
    return value


def user_identifiers(body: dict[str, Any]) -> list[str]:
    values = require_list(body, "userIdentifiers", max_items=MAX_SEGMENT_SIZE)
    for index, value in enumerate(values):
        if type(value) is not str or not 0 < len(value) <= MAX_USER_IDENTIFIER_LENGTH:
            raise BadRequest(
                f"Field 'userIdentifiers[{index}]' must be a string of 1 to"
                f" {MAX_USER_IDENTIFIER_LENGTH} characters"
            )
    return values


def rules(body: dict[str, Any]) -> list[Rule]:
    raw = require_list(body, "rules", max_items=MAX_RULES)
    try:
        return [rule_from_json(rule, f"rules[{index}]") for index, rule in enumerate(raw)]
    except RuleError as exc:
        where, _, problem = str(exc).partition(" ")
        raise BadRequest(f"Field '{where}' {problem}") from None
