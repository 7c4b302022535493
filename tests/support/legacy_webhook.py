"""A webhook stored before its URL's user information was refused (commit abc0114): written
straight into the control plane's database, past the admin API's URL rule, on either backend.

What the store wrote for it then, and an existing database still holds: the ``webhooks`` row
with the URL as given, and the ``webhook.created`` audit record whose ``after`` holds it too.
"""

from __future__ import annotations

from api.controlplane.changes import Actor
from api.controlplane.sql_history import new_id, record_audit
from api.controlplane.sql_store import SqlControlPlaneStore

USER = "deploy-bot"
PASSWORD = "hunter2-s3cr3t"
LEGACY_URL = f"https://{USER}:{PASSWORD}@hooks.example.com:8443/flagsight?team=core"
SHOWN_URL = "https://***@hooks.example.com:8443/flagsight?team=core"
"""How every surface shows it (``webhook_targets.shown_url``)."""
CREATED_AT = "2026-11-01T09:00:00.000Z"


def insert_legacy_webhook(
    store: SqlControlPlaneStore, organization_id: str, url: str = LEGACY_URL
) -> str:
    """The webhook's row and its creation's audit record, as the store wrote them before the
    rule (the SQL is the dialect both backends share); the webhook's id."""
    hook_id = new_id("whk_")
    document = {"id": hook_id, "url": url, "events": ["flag.changed"], "createdAt": CREATED_AT}
    with store._transaction(write=True) as conn:
        conn.execute(
            "INSERT INTO webhooks (id, organization_id, url, events, secret, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (hook_id, organization_id, url, '["flag.changed"]', "whsec_legacy", CREATED_AT),
        )
        record_audit(
            conn, at=CREATED_AT, organization_id=organization_id, actor=Actor.ADMIN_API,
            action="webhook.created", target=f"webhook:{hook_id}", before=None, after=document,
        )  # fmt: skip
    return hook_id
