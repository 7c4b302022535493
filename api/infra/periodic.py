"""One periodic job on a daemon thread: the loop every background job of a worker shares.

A job's tick runs every ``interval_s`` (the first one at once when ``first_at_once``) until
``stop``; a tick that raises is logged and the next one runs as planned, so a busy control
plane or an unreachable bucket never ends the job. ``stop`` waits for the tick in progress,
at most ``join_timeout_s``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


class PeriodicJob:
    """``tick`` every ``interval_s`` on a thread named ``name``; ``failure`` is what its log
    line says when a tick raises."""

    def __init__(
        self,
        name: str,
        interval_s: float,
        tick: Callable[[], object],
        *,
        log: logging.Logger,
        failure: str,
        first_at_once: bool = False,
        join_timeout_s: float = 5.0,
    ):
        self._interval_s = interval_s
        self._tick = tick
        self._log = log
        self._failure = failure
        self._first_at_once = first_at_once
        self._join_timeout_s = join_timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def stopping(self) -> bool:
        """Whether ``stop`` was called: a long tick checks it between its steps."""
        return self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._join_timeout_s)

    def _run(self) -> None:
        if self._first_at_once:
            self._run_tick()
        while not self._stop.wait(self._interval_s):
            self._run_tick()

    def _run_tick(self) -> None:
        try:
            self._tick()
        except Exception:
            self._log.exception(self._failure)
