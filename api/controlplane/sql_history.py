"""Inside a write transaction: the audit record of a change and the webhook events it
raises, written in the same transaction as the change, so neither exists without the other.

The outbox gets one row per event and subscribed webhook, holding the exact body every attempt
will send: an event id is thus only ever delivered with one body.
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec

from api.controlplane.changes import AuditRecord, EventType, JsonDocument
from api.controlplane.sql_backend import Connection, Row


def new_id(prefix: str) -> str:
    """``prefix`` and 16 lowercase hex digits."""
    return prefix + secrets.token_hex(8)


def _json(document: JsonDocument | None) -> str | None:
    return None if document is None else msgspec.json.encode(document).decode()


def record_audit(
    conn: Connection,
    *,
    at: str,
    organization_id: str,
    actor: str,
    action: str,
    target: str,
    before: JsonDocument | None,
    after: JsonDocument | None,
    restored_from: str | None = None,
) -> AuditRecord:
    record = AuditRecord(
        new_id("aud_"), organization_id, at, actor, action, target, before, after, restored_from
    )
    conn.execute(
        "INSERT INTO audit_log (id, organization_id, at, actor, action, target, before, after,"
        " restored_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (record.id, organization_id, at, actor, action, target, _json(before), _json(after),
         restored_from),
    )  # fmt: skip
    return record


def audit_from_row(row: Row) -> AuditRecord:
    decode = msgspec.json.decode
    return AuditRecord(
        row["id"],
        row["organization_id"],
        row["at"],
        row["actor"],
        row["action"],
        row["target"],
        None if row["before"] is None else decode(row["before"]),
        None if row["after"] is None else decode(row["after"]),
        row["restored_from"],
    )


def emit(
    conn: Connection,
    *,
    now: float,
    at: str,
    organization_id: str,
    event_type: EventType,
    data: dict[str, Any],
) -> str:
    """Queue one event for every live webhook of the organization subscribed to its type;
    returns the event id (also when nobody subscribed)."""
    event_id = new_id("evt_")
    body = msgspec.json.encode({"id": event_id, "type": str(event_type), "at": at, "data": data})
    hooks = conn.execute(
        "SELECT id, events FROM webhooks WHERE organization_id = ? AND deleted_at IS NULL",
        (organization_id,),
    ).fetchall()
    for hook in hooks:
        if str(event_type) in msgspec.json.decode(hook["events"]):
            conn.execute(
                "INSERT INTO webhook_outbox (event_id, webhook_id, type, body, created_at,"
                " next_attempt_at) VALUES (?, ?, ?, ?, ?, ?)",
                (event_id, hook["id"], str(event_type), body, now, now),
            )
    return event_id
