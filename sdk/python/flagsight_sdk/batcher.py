"""Background delivery in batches, with retries, bounded: feedback (``/v1/feedback/bulk``,
``FeedbackBatcher``), tracked events (``/v1/track``, ``TrackBatcher``) and a local client's
evaluation reports (``/v1/local/report``, ``ReportBatcher``).

The application's thread only appends to a bounded queue. One daemon thread sends batches of
at most 500 when a batch is full or the interval passes, on ``flush``, and at interpreter exit.
503 (the event log is busy), other 5xx, 429 and network errors are retried with exponential
backoff (honouring ``Retry-After``); a batch too large for the service (413) is sent again in
halves; any other refusal is final. Nothing is dropped silently:
every drop (queue full, refused, retries exhausted, unsent at exit) is counted in ``stats``,
logged, and passed to ``on_drop``.
"""

from __future__ import annotations

import atexit
import inspect
import logging
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import requests

from flagsight_sdk.tracking import CLOCK_TOLERANCE_S, clock_skew, shifted
from flagsight_sdk.transport import HttpAnswer, json_body, post_json, sdk_made_body

log = logging.getLogger("flagsight_sdk")

MAX_BATCH = 500
DROP_QUEUE_FULL = "queue_full"
DROP_REFUSED = "refused"
DROP_RETRIES_EXHAUSTED = "retries_exhausted"
DROP_UNSENT_AT_EXIT = "unsent_at_exit"
DROP_CLOSED = "closed"

DropHandler = Callable[[str, int], None]


def _check_max_batch(max_batch: object, limit: int = MAX_BATCH) -> None:
    if not isinstance(max_batch, int) or not 1 <= max_batch <= limit:
        raise ValueError(f"max_batch must be 1..{limit}")


@dataclass
class BatcherStats:
    """Counts since the batcher started; ``pending`` is queued or in flight."""

    submitted: int = 0
    sent: int = 0
    batches: int = 0
    retries: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def pending(self) -> int:
        return self.submitted - self.sent - sum(self.dropped.values())


class Batcher:
    """One queue and one sending thread for one endpoint; see the module docstring."""

    body_key = "feedbacks"
    """The request body's field that holds the batch."""
    batch_limit = MAX_BATCH
    """The most items one request may hold (the service's limit for the endpoint)."""
    what = "feedback"
    """What the items are, in log lines."""
    thread_name = "flagsight-feedback"
    encode = staticmethod(json_body)
    """How a request's body is written: what the application passed, as ``json`` writes it."""

    def __init__(
        self,
        session: requests.Session,
        url: str,
        headers: dict[str, str],
        *,
        max_batch: int = MAX_BATCH,
        interval_s: float = 1.0,
        max_queue: int = 100_000,
        request_timeout_s: float = 5.0,
        max_attempts: int = 8,
        backoff_s: float = 0.2,
        max_backoff_s: float = 10.0,
        exit_timeout_s: float = 5.0,
        on_drop: DropHandler | None = None,
        extra_body: Mapping[str, object] | None = None,
    ):
        _check_max_batch(max_batch, self.batch_limit)
        self._extra_body = dict(extra_body or {})
        self._session = session
        self._url = url
        self._headers = headers
        self._max_batch = max_batch
        self._interval_s = interval_s
        self._max_queue = max_queue
        self._request_timeout_s = request_timeout_s
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._exit_timeout_s = exit_timeout_s
        self._on_drop = on_drop
        self._cv = threading.Condition()
        self._start()
        atexit.register(self._at_exit)

    @classmethod
    def check_options(cls, options: Mapping[str, object]) -> None:
        """Raise the ``TypeError`` or ``ValueError`` the constructor would for ``options``
        (its keyword arguments), without starting anything."""
        inspect.signature(cls).bind(None, "", {}, **options)
        _check_max_batch(options.get("max_batch", MAX_BATCH), cls.batch_limit)

    def _start(self) -> None:
        self._pid = os.getpid()
        self._queue: deque[object] = deque()
        self._inbox: deque[object] = deque()
        """What ``offer`` appended, without the lock; the sending thread moves it to the queue."""
        self.stats = BatcherStats()
        self._flush_requested = False
        self._closing = False
        self._close_deadline = float("inf")
        self._last_full_warning = 0.0
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    # -- the application's side ----------------------------------------------------------------

    def submit(self, item: dict[str, object]) -> bool:
        """Queue one FeedbackEvent; False (counted, logged) when the queue is full or closed."""
        with self._cv:
            if self._pid != os.getpid():  # forked: the parent's queue and thread are not ours
                self._start()
            self.stats.submitted += 1
            if self._closing or len(self._queue) >= self._max_queue:
                self._drop_locked(DROP_CLOSED if self._closing else DROP_QUEUE_FULL, 1)
                return False
            self._queue.append(item)
            if len(self._queue) >= self._max_batch:
                self._cv.notify_all()
            return True

    def offer(self, item: object) -> bool:
        """``submit`` without taking the lock, for callers on a hot path (a local client's
        every evaluation): a deque append. The sending thread takes it within ``interval_s``
        (it is not woken per item); a full queue, a closed batcher or a fork goes through
        ``submit``, which counts the drop."""
        if (
            self._pid != os.getpid()
            or self._closing
            or len(self._inbox) + len(self._queue) >= self._max_queue
        ):
            return self.submit(item)  # type: ignore[arg-type]
        self._inbox.append(item)
        return True

    def _take_inbox_locked(self) -> None:
        inbox = self._inbox
        while inbox:
            self._queue.append(inbox.popleft())
            self.stats.submitted += 1

    def _pending_locked(self) -> int:
        return self.stats.pending + len(self._inbox)

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until everything submitted so far is sent or dropped; True when none pending."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            self._flush_requested = True
            self._cv.notify_all()
            while self._pending_locked() > 0 and self._thread.is_alive():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cv.wait(remaining)
            return self._pending_locked() == 0

    def close(self, timeout_s: float | None = None) -> None:
        """Send what is queued (for at most ``timeout_s``), then stop; the rest is a drop."""
        timeout_s = self._exit_timeout_s if timeout_s is None else timeout_s
        with self._cv:
            if self._closing:
                return
            self._closing = True
            self._close_deadline = time.monotonic() + timeout_s
            self._cv.notify_all()
        self._thread.join(timeout_s + self._request_timeout_s)

    def _at_exit(self) -> None:
        if self._pid == os.getpid():
            self.close()

    # -- the sending thread --------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self._deliver(batch)

    def _next_batch(self) -> list[dict[str, object]] | None:
        """Wait for a full batch, the interval, a flush or close; None when it is time to stop."""
        with self._cv:
            deadline = time.monotonic() + self._interval_s
            self._take_inbox_locked()
            while (
                not self._closing
                and not self._flush_requested
                and len(self._queue) < self._max_batch
            ):
                remaining = deadline - time.monotonic()
                self._take_inbox_locked()
                if remaining <= 0 and self._queue:
                    break
                if remaining <= 0:
                    deadline = time.monotonic() + self._interval_s
                    remaining = self._interval_s
                self._cv.wait(remaining)
            self._take_inbox_locked()
            if not self._queue:
                self._flush_requested = False
                self._cv.notify_all()
                if self._closing:
                    return None
                return []
            if self._closing and time.monotonic() >= self._close_deadline:
                self._drop_locked(DROP_UNSENT_AT_EXIT, len(self._queue))
                self._queue.clear()
                return None
            count = min(self._max_batch, len(self._queue))
            return [self._queue.popleft() for _ in range(count)]

    def _sent_as(self, batch: list[dict[str, object]]) -> list[dict[str, object]]:
        """The batch's items as a request sends them now (``TrackBatcher`` moves their times)."""
        return batch

    def _heard(self, answer: HttpAnswer) -> bool:
        """Note what an answer says beyond its status; True when a batch refused by it would
        now be sent otherwise (and is worth sending once more)."""
        return False

    def _deliver(self, batch: list[dict[str, object]]) -> None:
        if not batch:
            return
        for attempt in range(self._max_attempts):
            try:
                answer = self._post(batch)
                if self._heard(answer) and _refusal(answer.status):
                    answer = self._post(batch)  # refused as it was sent, not as it would be now
                    self._heard(answer)
            except Exception as exc:  # noqa: BLE001 - any failure of one attempt is retried:
                # the thread must outlive it, or nothing queued would ever be sent or counted
                problem, retry_after = f"{type(exc).__name__}: {exc}", None
            else:
                if 200 <= answer.status < 300:
                    self._settled(sent=len(batch))
                    return
                problem = f"HTTP {answer.status}: {answer.body[:300].decode('utf-8', 'replace')}"
                if answer.status == 413 and len(batch) > 1:  # too large, not refused: halves
                    half = len(batch) // 2
                    self._deliver(batch[:half])
                    self._deliver(batch[half:])
                    return
                if answer.status != 429 and answer.status < 500:  # final, a lone 413's too
                    log.error(
                        "flagsight: %s batch of %d refused (%s)", self.what, len(batch), problem
                    )
                    self._settled(dropped=(DROP_REFUSED, len(batch)))
                    return
                retry_after = _seconds(answer.headers.get("Retry-After"))
            if not self._wait_before_retry(attempt, retry_after):
                break
            with self._cv:
                self.stats.retries += 1
            log.info(
                "flagsight: %s batch of %d not accepted (%s); retrying",
                self.what, len(batch), problem,
            )  # fmt: skip
        reason = DROP_UNSENT_AT_EXIT if self._closing else DROP_RETRIES_EXHAUSTED
        log.error("flagsight: %s batch of %d not delivered (%s)", self.what, len(batch), problem)
        self._settled(dropped=(reason, len(batch)))

    def _post(self, batch: list[dict[str, object]]) -> HttpAnswer:
        """One request of the batch, as it is sent now."""
        return post_json(
            self._session,
            self._url,
            {**self._extra_body, self.body_key: self._sent_as(batch)},
            self._headers,
            self._request_timeout_s,
            self.encode,
        )

    def _wait_before_retry(self, attempt: int, retry_after: float | None) -> bool:
        """Back off (exponential, jittered); False when no attempt or time is left."""
        if attempt + 1 >= self._max_attempts:
            return False
        delay = min(self._max_backoff_s, self._backoff_s * 2**attempt) * random.uniform(0.5, 1.0)
        if retry_after is not None:  # the server's word, even past max_backoff_s
            delay = max(delay, retry_after)
        end = time.monotonic() + delay
        with self._cv:
            while (now := time.monotonic()) < end:
                if self._closing and end > self._close_deadline:
                    return False
                self._cv.wait(end - now)
        return True

    def _settled(self, *, sent: int = 0, dropped: tuple[str, int] | None = None) -> None:
        with self._cv:
            self.stats.sent += sent
            self.stats.batches += 1 if sent else 0
            if dropped is not None:
                self._drop_locked(*dropped)
            self._cv.notify_all()

    def _drop_locked(self, reason: str, count: int) -> None:
        self.stats.dropped[reason] = self.stats.dropped.get(reason, 0) + count
        now = time.monotonic()
        if reason != DROP_QUEUE_FULL or now - self._last_full_warning >= 10.0:
            if reason == DROP_QUEUE_FULL:
                self._last_full_warning = now
            log.warning(
                "flagsight: %d %s item(s) dropped (%s); %d dropped so far",
                count, self.what, reason, sum(self.stats.dropped.values()),
            )  # fmt: skip
        if self._on_drop is not None:
            try:
                self._on_drop(reason, count)
            except Exception:  # noqa: BLE001 - a broken callback must not stop delivery
                log.exception("flagsight: on_drop callback failed")


class FeedbackBatcher(Batcher):
    """Outcome feedback, 500 per ``/v1/feedback/bulk`` request."""


class TrackBatcher(Batcher):
    """Tracked events, 500 per ``/v1/track`` request, delivered as feedback is (same options,
    retries and drop accounting), each ``at`` moved to the service's clock while the two
    differ by ``CLOCK_TOLERANCE_S`` or more (``flagsight_sdk.tracking``)."""

    body_key = "events"
    what = "tracked event"
    thread_name = "flagsight-track"
    _skew_s = 0.0
    """The difference applied to the events' times (0 while the clocks agree)."""

    def _sent_as(self, batch: list[dict[str, object]]) -> list[dict[str, object]]:
        skew = self._skew_s
        return [shifted(item, skew) for item in batch] if skew else batch

    def _heard(self, answer: HttpAnswer) -> bool:
        measured = clock_skew(answer.headers)
        if measured is None:
            return False
        skew = measured if abs(measured) >= CLOCK_TOLERANCE_S else 0.0
        changed = abs(skew - self._skew_s) >= CLOCK_TOLERANCE_S / 2
        if changed and skew:
            log.warning(
                "flagsight: this process's clock is %.0f s %s the service's; tracked events"
                " are sent at the service's time", abs(skew),
                "behind" if skew > 0 else "ahead of",
            )  # fmt: skip
        if changed:
            self._skew_s = skew
        return changed


class ReportBatcher(Batcher):
    """A local client's evaluations, 10,000 per ``/v1/local/report`` request (contract 11).

    Retried for longer than feedback (``max_attempts`` 40 at up to 10 s apart: about five
    minutes), so evaluations made while the service is away reach it when it is back."""

    body_key = "evaluations"
    batch_limit = 10_000
    what = "local evaluation"
    thread_name = "flagsight-reports"
    encode = staticmethod(sdk_made_body)  # reports are the SDK's own values


def _refusal(status: int) -> bool:
    """A refusal of what the batch holds: 4xx but 429 (later) and 413 (sent in halves), the
    answers a batch moved to the service's clock may not get again."""
    return 400 <= status < 500 and status not in (413, 429)


def _seconds(value: str | None) -> float | None:
    if value is None or not value.strip().isdigit():
        return None
    return float(value.strip())
