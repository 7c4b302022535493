"""Per-request figures, tallied in process memory and added to Prometheus once a second.

With gunicorn, every Prometheus update is a write to a memory-mapped file shared across
processes, which costs more than evaluating a flag. Requests and evaluation outcomes are
therefore counted in plain dictionaries here, and the housekeeping thread moves the totals
into the Prometheus counters (``flush``), so /metrics lags by at most a second.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import falcon.asgi
import numpy as np

from api.eventlog.schema import OUTCOMES
from api.observability.metrics import Metrics


def outcome_label(code: int) -> str:
    value, rule, error = OUTCOMES[code]
    if error:
        return error
    return f"{rule}:{str(value).lower()}" if rule else "NO_MATCH"


_OUTCOME_LABELS = [outcome_label(code) for code in range(len(OUTCOMES))]


class Tallies:
    """Counts since the last ``flush``; safe between the event loop and the flushing thread."""

    def __init__(self, metrics: Metrics):
        self._metrics = metrics
        self._lock = threading.Lock()
        self._requests: Counter[tuple[str, int]] = Counter()
        self._seconds: Counter[str] = Counter()
        self._outcomes: Counter[int] = Counter()

    def count_request(self, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self._requests[(route, status)] += 1
            self._seconds[route] += seconds

    def count_outcomes(self, outcomes: bytes) -> None:
        """One byte per evaluation, an index into ``OUTCOMES`` (as in the event log)."""
        if len(outcomes) == 1:
            with self._lock:
                self._outcomes[outcomes[0]] += 1
            return
        counts = np.bincount(np.frombuffer(outcomes, dtype=np.uint8), minlength=len(OUTCOMES))
        with self._lock:
            for code in np.flatnonzero(counts).tolist():
                self._outcomes[code] += int(counts[code])

    def flush(self) -> None:
        with self._lock:
            requests, self._requests = self._requests, Counter()
            seconds, self._seconds = self._seconds, Counter()
            outcomes, self._outcomes = self._outcomes, Counter()
        m = self._metrics
        for (route, status), count in requests.items():
            m.requests.labels(route, str(status)).inc(count)
        for route, total in seconds.items():
            m.request_seconds.labels(route).inc(total)
        for code, count in outcomes.items():
            m.evaluations.labels(_OUTCOME_LABELS[code]).inc(count)


class RequestTallyMiddleware:
    """Counts every answer by route template and status, and the time it took."""

    def __init__(self, tallies: Tallies):
        self._tallies = tallies

    async def process_request(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        req.context.started = time.perf_counter()

    async def process_response(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        resource: Any,
        req_succeeded: bool,
    ) -> None:
        started = getattr(req.context, "started", None)
        seconds = 0.0 if started is None else time.perf_counter() - started
        self._tallies.count_request(req.uri_template or "unmatched", resp.status_code, seconds)
