"""Per-request figures, tallied in process memory and added to Prometheus once a second.

With gunicorn, every Prometheus update is a write to a memory-mapped file shared across
processes, which costs more than evaluating a flag. Requests and evaluation outcomes are
therefore counted in plain dictionaries here, and the housekeeping thread moves the totals
into the Prometheus counters (``flush``), so /metrics lags by at most a second. The HTTP
edge feeds them (``api.web.request_tallies``); nothing here knows HTTP.
"""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
from flagsight_core.model import OUTCOMES
from flagsight_core.registry import on_results_changed

from api.observability.metrics import Metrics


def outcome_label(code: int) -> str:
    value, rule, error = OUTCOMES[code]
    if error:
        return error
    return f"{rule}:{str(value).lower()}" if rule else "NO_MATCH"


_OUTCOME_LABELS: list[str] = []


@on_results_changed
def _build_outcome_labels() -> None:
    """Follow ``OUTCOMES`` as rule types are registered."""
    _OUTCOME_LABELS[:] = map(outcome_label, range(len(OUTCOMES)))


PENDING_MAX = 65_536
"""Requests counted but not yet folded into the totals; past this many, the counting thread
folds them itself (without a flushing thread, memory stays bounded)."""


class Tallies:
    """Counts since the last ``flush``; safe between the event loop and the flushing thread.

    The hot path takes no lock: a request is one ``list.append`` and its outcomes one
    ``bytearray`` extension, each a single operation under the GIL. Folding takes what is
    there with a slice copy and removes exactly that with a slice deletion (both single
    operations too), so what another thread appends meanwhile is kept for the next fold.
    """

    def __init__(self, metrics: Metrics):
        self._metrics = metrics
        self._lock = threading.Lock()
        """Held while folding (by ``flush`` and by a counting thread past ``PENDING_MAX``)."""
        self._pending: list[tuple[str, int, float]] = []
        self._pending_outcomes = bytearray()
        self._requests: Counter[tuple[str, int]] = Counter()
        self._seconds: Counter[str] = Counter()
        self._outcomes: Counter[int] = Counter()

    def count_request(self, route: str, status: int, seconds: float) -> None:
        pending = self._pending
        pending.append((route, status, seconds))
        if len(pending) >= PENDING_MAX:
            with self._lock:
                self._fold()

    def count_outcomes(self, outcomes: bytes) -> None:
        """One byte per evaluation, an index into ``OUTCOMES`` (as in the event log)."""
        if len(outcomes) == 1:
            pending = self._pending_outcomes
            pending += outcomes
            if len(pending) >= PENDING_MAX:
                with self._lock:
                    self._fold()
            return
        counts = np.bincount(np.frombuffer(outcomes, dtype=np.uint8), minlength=len(OUTCOMES))
        with self._lock:
            self._fold()  # what came first is counted first, as it would have been
            for code in np.flatnonzero(counts).tolist():
                self._outcomes[code] += int(counts[code])

    def _fold(self) -> None:
        """Move what is pending into the totals, in the order it came (the caller holds
        ``_lock``; the order is the order in which /metrics first shows each series)."""
        pending = self._pending
        taken = pending[:]
        del pending[: len(taken)]
        for route, status, seconds in taken:
            self._requests[(route, status)] += 1
            self._seconds[route] += seconds
        outcomes = self._pending_outcomes
        codes = bytes(outcomes)
        del outcomes[: len(codes)]
        for code in dict.fromkeys(codes):
            self._outcomes[code] += codes.count(code)

    def flush(self) -> None:
        with self._lock:
            self._fold()
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
