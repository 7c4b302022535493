"""Accepting connections only while the worker has descriptors for them.

gunicorn's asgi worker serves each listening socket with ``loop.create_server``. On uvloop
(gunicorn's choice when it is installed, and about 12 % less CPU per evaluate than asyncio's
loop here: ``bench/history.md``), libuv accepts every queued connection in one go, and when
the process runs out of descriptors it accepts and closes the next one at once (its "EMFILE
trick"): with idle connections holding every descriptor, fresh clients were reset instead of
waiting in the listen backlog. asyncio's own loop stops accepting for a second instead, but
costs that CPU on every request.

``Acceptor`` does what neither does: it accepts in this module, one connection at a time,
only while the worker holds fewer than ``limit`` connections (its descriptor limit less a
reserve for the event log, the control plane and the metrics files), and hands each to the
loop with ``connect_accepted_socket``. At the limit it stops watching the listening socket,
so new clients wait in the kernel's backlog (gunicorn's ``backlog``, 2,048) until a
connection closes; should ``accept`` still fail for want of descriptors or memory, it tries
again a second later, as asyncio does. Only connection set-up passes through here; requests
on a kept-alive connection never do.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("flagsight.acceptor")

DESCRIPTOR_RESERVE = 128
"""Descriptors a worker keeps for itself beyond its connections: event log segments and
their directory, SQLite or PostgreSQL connections, metrics files, the meter, the event loop's
own, pipes to the master. An idle worker holds about 40."""
ACCEPT_BATCH = 1
"""Connections accepted per wake-up. Every worker is woken when a connection arrives; taking
one each time lets the others take the next ones, so connections spread over the workers.
Taking 64 at a time gave one worker most of a burst (bench.compare, 16 connections: 0.93x
the tight reference against 1.04x with one, ``bench/history.md``)."""
RETRY_S = 1.0
"""After ``accept`` failed for want of descriptors or memory (asyncio waits as long)."""
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class Connections(Protocol):
    """What the acceptor reads of the worker: its open connections (gunicorn's count)."""

    nr_conns: int


def connection_limit(reserve: int = DESCRIPTOR_RESERVE) -> int:
    """Connections a worker may hold: its soft descriptor limit less ``reserve``."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(1, soft - reserve)


class Acceptor:
    """One listening socket's connections, accepted while ``worker`` has room for them.

    Stands in for the ``Server`` that ``loop.create_server`` returns, as far as gunicorn's
    worker uses one (``close``, ``wait_closed``, ``is_serving``)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        protocol_factory: Callable[[], asyncio.Protocol],
        worker: Connections,
        backlog: int,
        limit: int,
    ):
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._factory = protocol_factory
        self._worker = worker
        self._limit = limit
        self._pending = 0  # accepted, not yet connected (``nr_conns`` counts from then)
        self._watching = False
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False
        sock.setblocking(False)
        sock.listen(backlog)
        self._watch()

    def _watch(self) -> None:
        if not (self._watching or self._closed or self._retry is not None):
            self._loop.add_reader(self._fd, self._accept)
            self._watching = True

    def _unwatch(self) -> None:
        if self._watching:
            self._loop.remove_reader(self._fd)
            self._watching = False

    def _full(self) -> bool:
        return self._worker.nr_conns + self._pending >= self._limit

    def _accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            if self._full():
                self._unwatch()  # ``connection_closed`` watches again
                return
            try:
                conn, _address = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    raise
                log.warning(
                    "cannot accept connections, retrying in a second",
                    extra={
                        "error": str(exc),
                        "errno": exc.errno,
                        "connections": self._worker.nr_conns,
                    },
                )
                self._unwatch()
                self._retry = self._loop.call_later(RETRY_S, self._retry_now)
                return
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._pending += 1
            task = self._loop.create_task(self._loop.connect_accepted_socket(self._factory, conn))
            task.add_done_callback(self._connected)

    def _connected(self, task: asyncio.Task) -> None:
        self._pending -= 1
        if not task.cancelled() and task.exception() is not None:
            log.warning("a connection could not be set up", extra={"error": str(task.exception())})
            self.connection_closed()

    def _retry_now(self) -> None:
        self._retry = None
        self._watch()

    def connection_closed(self) -> None:
        """A connection of this worker closed: there may be room to accept again."""
        if not self._watching and not self._full():
            self._watch()

    def close(self) -> None:
        self._closed = True
        self._unwatch()
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

    async def wait_closed(self) -> None:
        return None

    def is_serving(self) -> bool:
        return not self._closed
