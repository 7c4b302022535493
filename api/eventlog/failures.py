"""How the event log reports failures: a counter, and warnings that cannot flood the logs."""

from __future__ import annotations

import logging
import threading
import time

from api.observability.metrics import Metrics

log = logging.getLogger("flagsight.eventlog")

WARNING_INTERVAL_S = 10.0
"""At most one warning per kind per this many seconds: a full disk must not flood the logs."""


class Throttled:
    """Logs the first failure of a kind, then at most one per interval with a count.

    ``suppressed`` on a line is how many calls since the last line were not logged; with
    ``total_field`` the line also carries the sum of their ``count``s and its own (how many
    evaluations were lost meanwhile, say), so nothing is hidden by the throttle.
    """

    def __init__(self, interval_s: float, logger: logging.Logger = log):
        self._interval_s = interval_s
        self._log = logger
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._totals: dict[str, int] = {}
        self._lock = threading.Lock()

    def warning(
        self,
        kind: str,
        message: str,
        exc: BaseException,
        *,
        level: int = logging.WARNING,
        total_field: str | None = None,
        count: int = 1,
        **fields: object,
    ) -> None:
        now = time.monotonic()
        with self._lock:
            total = self._totals.get(kind, 0) + count
            if now - self._last.get(kind, -self._interval_s) < self._interval_s:
                self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
                self._totals[kind] = total
                return
            self._last[kind] = now
            suppressed = self._suppressed.pop(kind, 0)
            self._totals.pop(kind, None)
        extra = {
            "event": kind,
            "error": str(exc),
            "error_type": type(exc).__name__,
            "errno": getattr(exc, "errno", None),
            "suppressed": suppressed,
            **fields,
        }
        if total_field is not None:
            extra[total_field] = total
        self._log.log(level, message, extra=extra)


class FailureReporter:
    """Counts every failure in ``flagsight_event_log_errors_total`` and logs it, throttled."""

    def __init__(self, metrics: Metrics | None, interval_s: float = WARNING_INTERVAL_S):
        self._metrics = metrics
        self._throttle = Throttled(interval_s)

    def __call__(self, kind: str, message: str, exc: BaseException, **fields: object) -> None:
        if self._metrics is not None:
            self._metrics.event_log_errors.inc()
        self._throttle.warning(kind, message, exc, **fields)
