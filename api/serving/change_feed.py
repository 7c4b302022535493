"""One worker's open streams, woken when its configuration reloads (contract section 11).

Every worker polls the control plane's version (``ConfigCache``), on every host, whichever
backend: a change made anywhere reaches each worker within a poll interval (0.25 s) plus a
reload. The reload runs on the poller's thread; ``ChangeFeed`` hands it to the event loop,
where each open stream waits on one shared ``asyncio.Event`` and then reads what it needs from
the new snapshot (its environment's version, whether its key still authenticates). A stream
costs one suspended coroutine and no thread, so a worker holds thousands while it serves.
"""

from __future__ import annotations

import asyncio

from api.controlplane.cache import ConfigCache


class ChangeFeed:
    """Wakes the worker's streams after each reload, and ends them all at shutdown."""

    def __init__(self, config: ConfigCache):
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self.closing = False
        """True once the worker shuts down: every stream ends at its next wake-up."""
        self.open_streams = 0
        config.subscribe(self._reloaded)

    def _event(self) -> asyncio.Event:
        if self._changed is None:
            self._loop = asyncio.get_running_loop()
            self._changed = asyncio.Event()
        return self._changed

    async def wait(self, timeout_s: float) -> bool:
        """Wait for the next reload (or shutdown); False when ``timeout_s`` passed first."""
        event = self._event()
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def _wake(self) -> None:
        """On the loop: release every waiter, and give the next ones a fresh event."""
        event, self._changed = self._changed, asyncio.Event()
        if event is not None:
            event.set()

    def _reloaded(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake)

    def close(self) -> None:
        """End every stream (the worker is stopping): they would hold its graceful stop."""
        self.closing = True
        self._reloaded()
