"""Records as the admin API's JSON: camelCase fields exactly as the contract names them.

The records the audit log also keeps use ``api.controlplane.documents``: one shape each."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from api.controlplane import documents
from api.controlplane.changes import AuditRecord, CreatedWebhook, Schedule
from api.controlplane.model import ApiKey, Segment
from api.web.admin.error_messages import schedule_error

organization = documents.organization
environment = documents.environment
flag = documents.flag
rollout = documents.rollout
webhook = documents.webhook


def schedule(made: Schedule) -> dict[str, Any]:
    """The schedule's document, a failed one's ``error`` in the API's words."""
    return {**documents.schedule(made), "error": schedule_error(made)}


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


def audit(record: AuditRecord) -> dict[str, Any]:
    """As ``documents.shown_audit`` shows it (a webhook's URL without its user information)."""
    record = documents.shown_audit(record)
    return {
        "id": record.id,
        "at": record.at,
        "actor": record.actor,
        "action": record.action,
        "target": record.target,
        "before": record.before,
        "after": record.after,
        "restoredFrom": record.restored_from,
    }


def created_webhook(created: CreatedWebhook) -> dict[str, Any]:
    """``secret`` appears only in the answer that created the webhook."""
    return {**documents.webhook(created.record), "secret": created.secret}


def camel(name: str) -> str:
    """A warehouse column's name as the API writes fields: ``avg_latency_ms`` ->
    ``avgLatencyMs``."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def flag_metrics(row: dict[str, Any]) -> dict[str, Any]:
    """``GET .../metrics``: the warehouse's ``flag_environment_metrics`` row, camelCase."""
    return {camel(name): value for name, value in row.items()}


def daily_metrics(row: dict[str, Any]) -> dict[str, Any]:
    """One day of ``flag_environment_daily``, camelCase, its date as ``date``."""
    return {("date" if name == "evaluation_date" else camel(name)): v for name, v in row.items()}


def items(values: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Every list answers ``{"items": [...]}``."""
    return {"items": list(values)}
