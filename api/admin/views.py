"""Records as the admin API's JSON: camelCase fields exactly as the contract names them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from api.controlplane.model import ApiKey, Environment, FlagRecord, Organization, Segment
from api.evaluation import rule_to_json
from api.metering.meter import month_label


def organization(org: Organization) -> dict[str, Any]:
    return {
        "id": org.id,
        "name": org.name,
        "plan": org.plan.value,
        "monthlyEvaluationLimit": org.monthly_evaluation_limit,
    }


def environment(env: Environment) -> dict[str, Any]:
    return {"id": env.id, "key": env.key, "name": env.name, "insightsEnabled": env.insights_enabled}


def api_key(key: ApiKey, plaintext: str | None = None) -> dict[str, Any]:
    """``key`` (the secret) only in the answer that created it."""
    body: dict[str, Any] = {"id": key.id, "name": key.name, "createdAt": key.created_at}
    if plaintext is not None:
        body["key"] = plaintext
    return body


def segment(seg: Segment, user_identifiers: list[str] | None = None) -> dict[str, Any]:
    """``userIdentifiers`` only when reading one segment (a list or PUT answer leaves it out)."""
    body: dict[str, Any] = {"key": seg.key, "size": seg.size, "updatedAt": seg.updated_at}
    if user_identifiers is not None:
        body["userIdentifiers"] = user_identifiers
    return body


def flag(record: FlagRecord) -> dict[str, Any]:
    return {
        "key": record.key,
        "enabled": record.enabled,
        "archived": record.archived,
        "rules": [rule_to_json(rule) for rule in record.rules],
        "updatedAt": record.updated_at,
    }


def usage(org: Organization, month: int, evaluations: int) -> dict[str, Any]:
    return {
        "month": month_label(month),
        "evaluations": evaluations,
        "limit": org.monthly_evaluation_limit,
        "hardLimit": org.hard_limit,
        "overage": evaluations > org.monthly_evaluation_limit,
        "blocked": evaluations >= org.hard_limit,
    }


def items(values: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Every list answers ``{"items": [...]}``."""
    return {"items": list(values)}
