"""The webhooks slice: its codes, its part of the store, its SQL and its restore: webhooks
and their outbox.

Events are queued by the transaction that made the change (``sql_history.emit``); the one
deliverer of the server (``api.jobs.webhooks``) takes due rows, posts them and records each
attempt. A row leaves the queue delivered (a 2xx) or failed (24 hours of attempts, or its
webhook deleted); until then it stays, so a restart loses none. A webhook's creation is
restored by deleting it; its deletion cannot be (its secret is not kept in the log).
"""

from __future__ import annotations

import secrets
from enum import StrEnum
from typing import Protocol

import msgspec

from api.controlplane import documents
from api.controlplane.changes import (
    Actor,
    AuditRecord,
    CreatedWebhook,
    Delivery,
    EventType,
    Webhook,
)
from api.controlplane.errors import ConflictError, ConflictReason, NotFoundError, Resource
from api.controlplane.resources.audit import Restore, not_restorable, restores
from api.controlplane.sql_backend import Connection, Row
from api.controlplane.sql_history import new_id
from api.controlplane.sql_slice import SqlSlice

SECRET_PREFIX = "whsec_"


class WebhookCode(StrEnum):
    WEBHOOK_NOT_FOUND = "webhook_not_found"
    """``NotFoundError``: details["identifier"] is the id the caller gave."""
    WEBHOOK_SECRET_NOT_KEPT = "webhook_secret_not_kept"
    """A restore of a webhook's deletion refused (``ConflictReason.NOT_RESTORABLE``)."""
    WEBHOOK_STILL_ABSENT = "webhook_still_absent"
    """A restore that would change nothing (``ConflictReason.NOTHING_TO_RESTORE``)."""


def _webhook(row: Row) -> Webhook:
    return Webhook(
        row["id"], row["organization_id"], row["url"],
        tuple(msgspec.json.decode(row["events"])), row["created_at"],
    )  # fmt: skip


class WebhookStore(Protocol):
    def create_webhook(
        self, organization_id: str, url: str, events: list[str], *, actor: str = Actor.SYSTEM
    ) -> CreatedWebhook: ...

    def list_webhooks(self, organization_id: str) -> list[Webhook]: ...

    def delete_webhook(self, webhook_id: str, *, actor: str = Actor.SYSTEM) -> None: ...

    def due_deliveries(
        self, now: float, limit: int = 100, *, claim_for_s: float | None = None
    ) -> list[Delivery]: ...

    def release_deliveries(self, seqs: list[int], now: float) -> None: ...

    def pending_deliveries(self) -> int: ...

    def record_delivery(
        self, seq: int, now: float, *, error: str | None, retry_at: float | None
    ) -> None: ...

    def record_usage_threshold(
        self, organization_id: str, month: str, percent: int, evaluations: int, limit: int
    ) -> bool:
        """Queue ``usage.threshold`` unless already announced for that month; True if new."""
        ...


class WebhookSql(SqlSlice):
    """Webhooks and their outbox in SQL (see ``WebhookStore``)."""

    codes = WebhookCode

    def create_webhook(
        self, organization_id: str, url: str, events: list[str], *, actor: str = Actor.SYSTEM
    ) -> CreatedWebhook:
        hook = Webhook(new_id("whk_"), organization_id, url, tuple(events), self._now())
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        with self._transaction(write=True) as conn:
            self._require_organization(conn, organization_id)
            conn.execute(
                "INSERT INTO webhooks (id, organization_id, url, events, secret, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (hook.id, organization_id, url, msgspec.json.encode(list(events)).decode(),
                 secret, hook.created_at),
            )  # fmt: skip
            self._audit(
                conn, organization_id, actor, "webhook.created", f"webhook:{hook.id}", None,
                documents.webhook(hook),
            )  # fmt: skip
        return CreatedWebhook(hook, secret)

    def list_webhooks(self, organization_id: str) -> list[Webhook]:
        rows = self._fetchall(
            "SELECT * FROM webhooks WHERE organization_id = ? AND deleted_at IS NULL"
            " ORDER BY rowid",
            (organization_id,),
        )
        return [_webhook(row) for row in rows]

    def delete_webhook(self, webhook_id: str, *, actor: str = Actor.SYSTEM) -> None:
        """Stop delivering to it; what is still queued for it is dropped (marked failed)."""
        with self._transaction(write=True) as conn:
            hook = self._webhook_in(conn, webhook_id)
            if hook is None:
                raise NotFoundError(WebhookCode.WEBHOOK_NOT_FOUND, Resource.WEBHOOK, webhook_id)
            self._delete_webhook(conn, hook, actor=actor, action="webhook.deleted")

    @staticmethod
    def _webhook_in(conn: Connection, webhook_id: str) -> Webhook | None:
        """The webhook; None when there is no such webhook or it was deleted."""
        row = conn.execute(
            "SELECT * FROM webhooks WHERE id = ? AND deleted_at IS NULL", (webhook_id,)
        ).fetchone()
        return _webhook(row) if row else None

    def _delete_webhook(
        self,
        conn: Connection,
        hook: Webhook,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """``delete_webhook`` inside the caller's write transaction: deleting and restoring its
        creation both come here."""
        conn.execute("UPDATE webhooks SET deleted_at = ? WHERE id = ?", (self._now(), hook.id))
        conn.execute(
            "UPDATE webhook_outbox SET failed_at = ?, last_error = 'webhook deleted'"
            " WHERE webhook_id = ? AND delivered_at IS NULL AND failed_at IS NULL",
            (self._clock(), hook.id),
        )
        return self._audit(
            conn, hook.organization_id, actor, action, f"webhook:{hook.id}",
            documents.webhook(hook), None, restored_from,
        )  # fmt: skip

    @restores("webhook")
    def _restore_webhook(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """A creation is undone by deleting the webhook; a deletion cannot be undone (its
        secret is not kept in the log)."""
        if record.before is not None:
            raise not_restorable(record, WebhookCode.WEBHOOK_SECRET_NOT_KEPT)
        hook = self._webhook_in(conn, ident)
        if hook is None:
            raise ConflictError(
                WebhookCode.WEBHOOK_STILL_ABSENT, ConflictReason.NOTHING_TO_RESTORE,
                webhook=ident,
            )  # fmt: skip
        return lambda actor: self._delete_webhook(
            conn, hook, actor=actor, action="restore", restored_from=record.id
        )

    def due_deliveries(
        self, now: float, limit: int = 100, *, claim_for_s: float | None = None
    ) -> list[Delivery]:
        """Queued deliveries whose next attempt is due, oldest first.

        With ``claim_for_s`` they are also claimed: their next attempt moves that far ahead in
        the same write transaction, so the deliverer of another server (every host has one)
        does not post them too; if the claimer dies, they are due again when the claim ends.
        """
        query = (
            "SELECT o.seq, o.event_id, o.webhook_id, w.url, w.secret, o.body, o.attempts,"
            " o.created_at FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook_id"
            " WHERE o.delivered_at IS NULL AND o.failed_at IS NULL AND o.next_attempt_at <= ?"
            " ORDER BY o.seq LIMIT ?"
        )
        if claim_for_s is None:
            rows = self._fetchall(query, (now, limit))
        else:
            if (
                self._fetchone(
                    "SELECT count(*) FROM webhook_outbox WHERE delivered_at IS NULL"
                    " AND failed_at IS NULL AND next_attempt_at <= ?",
                    (now,),
                )[0]
                == 0
            ):
                return []  # the common case: no write lock taken
            with self._transaction(write=True) as conn:
                rows = conn.execute(query, (now, limit)).fetchall()
                for row in rows:
                    conn.execute(
                        "UPDATE webhook_outbox SET next_attempt_at = ? WHERE seq = ?",
                        (now + claim_for_s, row["seq"]),
                    )
        return [
            Delivery(r["seq"], r["event_id"], r["webhook_id"], r["url"], r["secret"],
                     bytes(r["body"]), r["attempts"], r["created_at"])
            for r in rows
        ]  # fmt: skip

    def release_deliveries(self, seqs: list[int], now: float) -> None:
        """End the claim on deliveries a deliverer took but did not attempt (it is stopping):
        they are due again at once instead of when the claim ends."""
        if not seqs:
            return
        marks = ", ".join("?" for _ in seqs)
        with self._transaction(write=True) as conn:
            conn.execute(
                f"UPDATE webhook_outbox SET next_attempt_at = ? WHERE seq IN ({marks})"
                " AND delivered_at IS NULL AND failed_at IS NULL",
                (now, *seqs),
            )

    def pending_deliveries(self) -> int:
        """Deliveries neither delivered nor given up (the outbox's depth)."""
        return self._fetchone(
            "SELECT count(*) FROM webhook_outbox WHERE delivered_at IS NULL AND failed_at IS NULL"
        )[0]

    def record_delivery(
        self, seq: int, now: float, *, error: str | None, retry_at: float | None
    ) -> None:
        """One attempt's outcome: delivered (``error`` None), retried at ``retry_at``, or
        given up (``retry_at`` None)."""
        with self._transaction(write=True) as conn:
            if error is None:
                conn.execute(
                    "UPDATE webhook_outbox SET attempts = attempts + 1, delivered_at = ?,"
                    " last_error = NULL WHERE seq = ?",
                    (now, seq),
                )
            else:
                conn.execute(
                    "UPDATE webhook_outbox SET attempts = attempts + 1, last_error = ?,"
                    " next_attempt_at = coalesce(?, next_attempt_at),"
                    " failed_at = ? WHERE seq = ?",
                    (error, retry_at, now if retry_at is None else None, seq),
                )

    def record_usage_threshold(
        self, organization_id: str, month: str, percent: int, evaluations: int, limit: int
    ) -> bool:
        """Announce that ``organization_id`` passed ``percent`` % of its limit in ``month``;
        False (and nothing queued) when that was already announced."""
        with self._transaction(write=True) as conn:
            inserted = conn.execute(
                "INSERT INTO usage_thresholds VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (organization_id, month, percent, self._now()),
            ).rowcount
            if inserted:
                self._emit(
                    conn, organization_id, EventType.USAGE_THRESHOLD,
                    {"organizationId": organization_id, "month": month, "percent": percent,
                     "evaluations": evaluations, "limit": limit},
                )  # fmt: skip
        return bool(inserted)
