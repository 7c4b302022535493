"""Validation of admin request bodies and path parameters; every 400 names its field."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from flagsight_core import RuleError, rule_from_json
from flagsight_core.contract import (
    KEY_MAX,
    KEY_PATTERN,
    KEY_SPEC,
    MAX_NAME_LENGTH,
    MAX_RULES,
    MAX_SEGMENT_SIZE,
    USER_IDENTIFIER_MAX,
)

from api.controlplane.changes import (
    GUARDRAIL_UNITS,
    GUARDRAILS,
    EventType,
    FlagBody,
    RolloutPlan,
)
from api.controlplane.documents import iso_time
from api.controlplane.model import OWNER_MAX, FlagKind, FlagMeta, Plan
from api.controlplane.webhook_targets import ForbiddenTarget, check_url
from api.web.errors import BadRequest
from api.web.jsonio import optional_bool as optional_json_bool
from api.web.jsonio import optional_str, require_bool, require_list, require_str

_PLANS = ", ".join(plan.value for plan in Plan)


def key_param(value: str, name: str) -> str:
    """A flag, segment or environment key from the path or body."""
    if not KEY_PATTERN.fullmatch(value):
        raise BadRequest(f"'{name}' must match {KEY_SPEC} (got {value[:140]!r})")
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
    value = require_str(body, "key", max_len=KEY_MAX)
    if not KEY_PATTERN.fullmatch(value):
        raise BadRequest(f"Field 'key' must match {KEY_SPEC}")
    return value


def user_identifiers(body: dict[str, Any]) -> list[str]:
    values = require_list(body, "userIdentifiers", max_items=MAX_SEGMENT_SIZE)
    for index, value in enumerate(values):
        if type(value) is not str or not 0 < len(value) <= USER_IDENTIFIER_MAX:
            raise BadRequest(
                f"Field 'userIdentifiers[{index}]' must be a string of 1 to"
                f" {USER_IDENTIFIER_MAX} characters"
            )
    return values


DEFAULT_STEPS = (10.0, 25.0, 50.0, 100.0)
DEFAULT_STEP_MINUTES = 10.0
MAX_STEPS = 20
MAX_STEP_MINUTES = 7 * 24 * 60
MAX_TOLERANCE = {"pp": 100.0, "ms": 3_600_000.0}
"""A tolerance above these could never be exceeded (percentage points) or means nothing (an
hour of p95 latency)."""
MAX_URL_LENGTH = 2048
MAX_MOMENT = 253_402_300_800  # 10000-01-01T00:00:00Z


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def rollout_plan(body: dict[str, Any]) -> RolloutPlan:
    """A rollout's steps (increasing percentages with at most two decimals, ending at 100),
    minutes per step and guardrails; each defaults as docs/admin-api.md says."""
    steps = body.get("steps", list(DEFAULT_STEPS))
    if not isinstance(steps, list) or not 0 < len(steps) <= MAX_STEPS:
        raise BadRequest(f"Field 'steps' must be an array of 1 to {MAX_STEPS} percentages")
    for index, step in enumerate(steps):
        if not _number(step) or not 0 < step <= 100 or round(step * 100) != step * 100:
            raise BadRequest(
                f"Field 'steps[{index}]' must be a number above 0 and at most 100, with at most"
                " two decimals"
            )
        if index and step <= steps[index - 1]:
            raise BadRequest(f"Field 'steps[{index}]' must be greater than the step before it")
    if steps[-1] != 100:
        raise BadRequest("Field 'steps' must end at 100")
    minutes = body.get("stepMinutes", DEFAULT_STEP_MINUTES)
    if not _number(minutes) or not 0 < minutes <= MAX_STEP_MINUTES:
        raise BadRequest(
            f"Field 'stepMinutes' must be a number above 0 and at most {MAX_STEP_MINUTES}"
        )
    guardrails = body.get("guardrails", list(GUARDRAILS))
    if not isinstance(guardrails, list) or any(g not in GUARDRAILS for g in guardrails):
        raise BadRequest(f"Field 'guardrails' must be an array of {', '.join(GUARDRAILS)}")
    if len(set(guardrails)) != len(guardrails):
        raise BadRequest("Field 'guardrails' names a guardrail twice")
    tolerances = rollout_tolerances(body, guardrails)
    return RolloutPlan(
        tuple(float(s) for s in steps), float(minutes), tuple(guardrails), tolerances
    )


def rollout_tolerances(
    body: dict[str, Any], guardrails: list[str]
) -> tuple[tuple[str, float], ...]:
    """The ``tolerances`` object: a positive number per guardrail the rollout watches, in its
    unit (percentage points, milliseconds); a guardrail it does not name takes its default."""
    tolerances = body.get("tolerances", {})
    if not isinstance(tolerances, dict):
        raise BadRequest("Field 'tolerances' must be an object of guardrail names to numbers")
    for name, value in tolerances.items():
        if name not in guardrails:
            raise BadRequest(
                f"Field 'tolerances' names {name!r}, which is not one of the rollout's"
                f" guardrails ({', '.join(guardrails) or 'none'})"
            )
        top = MAX_TOLERANCE[GUARDRAIL_UNITS[name]]
        if not _number(value) or not 0 < value <= top or not math.isfinite(value):
            raise BadRequest(
                f"Field 'tolerances' must give {name} a number above 0 and at most {top:g}"
                f" ({GUARDRAIL_UNITS[name]})"
            )
    return tuple(sorted((name, float(value)) for name, value in tolerances.items()))


def flag_body(body: dict[str, Any], where: str = "") -> FlagBody:
    """What ``PUT .../flags/{flagKey}`` takes: ``enabled``, ``archived?``, ``rules``."""
    enabled = require_bool(body, "enabled", where=where)
    archived = optional_json_bool(body, "archived", False, where=where) or False
    try:
        parsed = [
            rule_from_json(rule, f"{where}rules[{index}]")
            for index, rule in enumerate(
                require_list(body, "rules", max_items=MAX_RULES, where=where)
            )
        ]
    except RuleError as exc:
        field_name, _, problem = str(exc).partition(" ")
        raise BadRequest(f"Field '{field_name}' {problem}") from None
    return FlagBody(enabled, archived, tuple(parsed))


def flag_meta(body: dict[str, Any]) -> FlagMeta:
    """``kind``, ``owner`` and ``expiresAt`` of a flag's ``PUT``; left out, each takes its
    default (the ``PUT`` replaces the flag whole), ``expiresAt`` kept in UTC."""
    kind = body.get("kind", FlagKind.TEMPORARY.value)
    if not isinstance(kind, str) or kind not in FlagKind._value2member_map_:
        raise BadRequest(f"Field 'kind' must be one of {', '.join(FlagKind)}")
    owner = optional_str(body, "owner", max_len=OWNER_MAX)
    expires = None if body.get("expiresAt") is None else iso_time(moment(body, "expiresAt"))
    return FlagMeta(FlagKind(kind), owner, expires)


def moment(body: dict[str, Any], name: str) -> float:
    """An ISO-8601 time with its offset (``Z`` or ``+hh:mm``), as unix seconds."""
    value = require_str(body, name, max_len=64)
    try:
        parsed = datetime.fromisoformat(value)
        seconds = parsed.timestamp()
    except (ValueError, OverflowError):
        raise BadRequest(
            f"Field '{name}' must be an ISO-8601 time, e.g. 2026-01-31T09:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        raise BadRequest(f"Field '{name}' must give its offset from UTC (e.g. a final Z)")
    if not 0 <= seconds < MAX_MOMENT:
        raise BadRequest(f"Field '{name}' must be between 1970 and 9999")
    return seconds


def webhook_url(body: dict[str, Any], allow_private: bool) -> str:
    """The webhook's URL, refused unless it may receive deliveries (``webhook_targets``)."""
    value = require_str(body, "url", max_len=MAX_URL_LENGTH)
    try:
        check_url(value, allow_private)
    except ForbiddenTarget as refused:
        raise BadRequest(f"Field 'url' {refused}") from None
    return value


def webhook_events(body: dict[str, Any]) -> list[str]:
    known = [str(event) for event in EventType]
    values = require_list(body, "events", max_items=len(known))
    if not values or any(v not in known for v in values) or len(set(values)) != len(values):
        raise BadRequest(f"Field 'events' must be a non-empty array of distinct {', '.join(known)}")
    return values
