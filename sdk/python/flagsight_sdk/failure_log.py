"""How failed evaluations reach the application's log: a warning when they start, then at most
one per interval with the count of those not logged, and an info line when the service answers
again.

During an outage every evaluation fails: a warning for each would flood the log of a busy
application (thousands a second) and bury everything else in it. The ``Evaluation`` itself
still says what failed, every time (``failure``, ``error_message``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from flagsight_sdk.model import (
    FAILURE_CONNECTION,
    FAILURE_SERVER,
    FAILURE_TIMEOUT,
    FAILURE_UNEXPECTED,
)

log = logging.getLogger("flagsight_sdk")

WARNING_INTERVAL_S = 60.0
OUTAGE_FAILURES = frozenset(
    {FAILURE_TIMEOUT, FAILURE_CONNECTION, FAILURE_SERVER, FAILURE_UNEXPECTED}
)
"""The service is away or not itself: the next answer ends these. Other failures (a refused
key or request, the SDK's own error) are rate-limited too, but an answer does not end them."""


class _Repeats:
    """One kind of failure: when it was last logged, and how many were not logged since."""

    __slots__ = ("unlogged", "warned_at")

    def __init__(self, warned_at: float):
        self.warned_at, self.unlogged = warned_at, 0


class FailureLog:
    """The failure warnings of one client (thread-safe); ``answered`` is on the hot path.

    Args:
        interval_s: the least time between two warnings of one kind of failure.
        clock: seconds, monotonic (``time.monotonic``).
    """

    def __init__(
        self,
        interval_s: float = WARNING_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._repeats: dict[str, _Repeats] = {}
        self._outage_since: float | None = None
        self._outage_failed = 0
        self.in_outage = False
        """Whether evaluations failed for want of the service since its last answer."""

    def failed(self, failure: str, flag: str, message: str | None, evaluations: int = 1) -> None:
        """``evaluations`` (of ``flag``) answered False for ``failure``: log it, or count it."""
        subject = f"flag {flag!r}" if evaluations == 1 else f"flag {flag!r} ({evaluations} users)"
        with self._lock:
            now = self._clock()
            if failure in OUTAGE_FAILURES:
                if self._outage_since is None:
                    self._outage_since = now
                self._outage_failed += evaluations
                self.in_outage = True
            repeats = self._repeats.get(failure)
            if repeats is None:
                self._repeats[failure] = _Repeats(now)
                log.warning(
                    "flagsight: %s for %s: %s; using False (more of these: one line every %g s)",
                    failure, subject, message, self._interval_s,
                )  # fmt: skip
            elif now - repeats.warned_at >= self._interval_s:
                log.warning(
                    "flagsight: %s for %s: %s; using False "
                    "(and %d more evaluations not logged in the last %.0f s)",
                    failure, subject, message, repeats.unlogged, now - repeats.warned_at,
                )  # fmt: skip
                repeats.warned_at, repeats.unlogged = now, 0
            else:
                repeats.unlogged += evaluations

    def answered(self) -> None:
        """The service answered: an outage, if there was one, is over (one info line)."""
        if not self.in_outage:
            return
        with self._lock:
            if self._outage_since is None:
                return
            log.info(
                "flagsight: the service answers again; %d evaluations failed in the %.0f s "
                "before, each answered False",
                self._outage_failed, self._clock() - self._outage_since,
            )  # fmt: skip
            for failure in OUTAGE_FAILURES:
                self._repeats.pop(failure, None)
            self._outage_since, self._outage_failed, self.in_outage = None, 0, False
