"""Delivering webhooks from the control plane's outbox, signed (contract section 10).

Every worker runs a ``WebhookDeliverer`` thread, but only the one holding the server's
``run/webhooks.lock`` (a non-blocking ``flock``, released by the kernel when its process dies)
delivers: one deliverer per server, and another worker takes over within a tick of its death.

A delivery is a POST of the outbox row's exact body with ``Flagsight-Signature:
t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the webhook's secret>``. A 2xx marks
it delivered; anything else (an error status, a refused connection, a timeout) schedules the
next attempt after ``base * 2^attempts`` seconds (capped), until 24 hours after the event, when
it is given up. So does a URL whose host resolves, at that attempt, to an address webhooks may
not reach (``webhook_targets``). The row is marked only after the attempt, so a deliverer killed between the
receiver's 2xx and the mark delivers that event again, with the same id and body: at least
once, never two different events under one id. Receivers deduplicate by ``id``.

The holder also announces ``usage.threshold`` (80, 100 and 110 % of the plan's limit) from the
meter every ``USAGE_CHECK_S``; the store makes each announcement once per organization and month.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import time

import requests

from api.controlplane.changes import USAGE_THRESHOLDS, Delivery
from api.controlplane.model import hard_limit
from api.controlplane.webhook_targets import ForbiddenTarget, MalformedTarget, check_delivery
from api.infra.periodic import PeriodicJob
from api.jobs.host_lock import HostLock
from api.metering.meter import month_label, month_of
from api.serving.services import Services

SIGNATURE_HEADER = "Flagsight-Signature"
TICK_S = 0.5
CLAIM_BATCH = 10
CLAIM_MARGIN_S = 30.0
USAGE_CHECK_S = 10.0
log = logging.getLogger("flagsight.webhooks")


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``Flagsight-Signature`` header value for ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def retry_delay(attempts: int, base_s: float, cap_s: float) -> float:
    """Seconds to wait after the ``attempts``-th failed attempt (1 for the first)."""
    return min(cap_s, base_s * 2 ** max(0, attempts - 1))


class WebhookDeliverer:
    """The per-worker thread; see the module docstring."""

    def __init__(self, services: Services):
        self._services = services
        self._lock = HostLock(services.settings.webhook_lock_path)
        self._active = False
        self._announced: set[tuple[str, str, int]] = set()
        self._next_usage_check = 0.0
        self._session = requests.Session()
        self._job = PeriodicJob(
            "flagsight-webhooks",
            TICK_S,
            self.tick,
            log=log,  # a busy control plane or a bad row: try again next tick
            failure="webhook delivery pass failed",
            join_timeout_s=services.settings.webhook_timeout_s + 5,
        )

    def start(self) -> None:
        self._job.start()

    def stop(self) -> None:
        self._job.stop()
        self._lock.release()

    def tick(self) -> None:
        if self._holds_lock():
            self.deliver_due()
            self.announce_usage()

    def _holds_lock(self) -> bool:
        if self._lock.held():
            if not self._active:
                self._active = True
                log.info("webhook deliverer active", extra={"pid": os.getpid()})
            return True
        return False

    def deliver_due(self) -> int:
        """Attempt every due delivery once; the number attempted."""
        store = self._services.store
        settings = self._services.settings
        # Claimed for longer than this pass can take, so no other server posts them meanwhile;
        # a deliverer killed mid-pass leaves them due again when the claim ends.
        due = store.due_deliveries(
            self._services.clock(),
            CLAIM_BATCH,
            claim_for_s=CLAIM_MARGIN_S + CLAIM_BATCH * settings.webhook_timeout_s,
        )
        attempted = 0
        try:
            for delivery in due:
                if self._job.stopping:
                    break
                self._attempt(delivery)
                attempted += 1
        finally:
            # A stop (or a failed write) mid-pass hands the rest back: left claimed, they would
            # wait out the whole claim, minutes after the next server has started.
            unattempted = [delivery.seq for delivery in due[attempted:]]
            if unattempted:
                store.release_deliveries(unattempted, self._services.clock())
        self._services.metrics.webhook_outbox_pending.set(store.pending_deliveries())
        return len(due)

    def _attempt(self, delivery: Delivery) -> None:
        settings, metrics = self._services.settings, self._services.metrics
        now = self._services.clock()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "flagsight-webhooks",
            SIGNATURE_HEADER: sign(delivery.secret, int(now), delivery.body),
        }
        hopeless = False  # a refusal no retry can lift: given up at once
        try:
            check_delivery(delivery.url, settings.webhook_allow_private)
            answer = self._session.post(
                delivery.url, data=delivery.body, headers=headers,
                timeout=settings.webhook_timeout_s, allow_redirects=False,
            )  # fmt: skip
            error = None if 200 <= answer.status_code < 300 else f"HTTP {answer.status_code}"
        except ForbiddenTarget as refused:
            error = f"refused: the URL {refused}"
            hopeless = isinstance(refused, MalformedTarget)  # a webhook stored before the rule
        except requests.RequestException as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
        except Exception as exc:  # one webhook's fault must never stop another's delivery
            log.exception("webhook attempt failed", extra={"webhook_id": delivery.webhook_id})
            error = f"failed: {type(exc).__name__}"
        done = self._services.clock()
        if error is None:
            outcome, retry_at = "delivered", None
            metrics.webhook_delivery_seconds.observe(max(0.0, done - delivery.created_at))
        else:
            delay = retry_delay(
                delivery.attempts + 1, settings.webhook_retry_base_s, settings.webhook_retry_cap_s
            )
            give_up = hopeless or done + delay > delivery.created_at + settings.webhook_retry_for_s
            outcome, retry_at = ("failed", None) if give_up else ("retry", done + delay)
        self._services.store.record_delivery(delivery.seq, done, error=error, retry_at=retry_at)
        metrics.webhook_deliveries.labels(outcome).inc()
        log.info(
            "webhook %s",
            outcome,
            extra={"event_id": delivery.event_id, "webhook_id": delivery.webhook_id,
                   "attempt": delivery.attempts + 1, "error": error, "retry_at": retry_at},
        )  # fmt: skip

    def announce_usage(self, force: bool = False) -> None:
        """Queue ``usage.threshold`` for each threshold an organization passed this month."""
        now = time.monotonic()
        if not force and now < self._next_usage_check:
            return
        self._next_usage_check = now + USAGE_CHECK_S
        services = self._services
        month = month_of(services.clock())
        for org in services.store.list_organizations():
            used = services.meter.usage(org.id, month)
            for percent in USAGE_THRESHOLDS:
                key = (org.id, month_label(month), percent)
                if key in self._announced or used < threshold_count(
                    org.monthly_evaluation_limit, percent
                ):
                    continue
                services.store.record_usage_threshold(
                    org.id, key[1], percent, used, org.monthly_evaluation_limit
                )
                self._announced.add(key)


def threshold_count(limit: int, percent: int) -> int:
    """The evaluations at which ``percent`` of ``limit`` is reached: ``ceil(percent x limit /
    100)``, but never past the hard threshold, which usage cannot pass: 110 % of a limit that
    is no multiple of 10 is reached when usage reaches ``floor(1.1 x limit)``."""
    return min(-(-percent * limit // 100), hard_limit(limit))
