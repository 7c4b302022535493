"""flagsight's gunicorn worker: gunicorn's native ``asgi`` worker plus what it leaves out.

* **A request-head timeout.** gunicorn 27's asgi worker closes a kept-alive connection that
  waits ``keepalive`` seconds for its next request head, but it arms no timer before the
  first one: a client that connects and sends nothing, or sends its headers a byte at a time,
  holds a descriptor for ever. Here a connection whose first request head is not complete
  ``header_timeout_s`` after it opened is closed (``docs/operations.md``, "Slow clients").
* **The contract's error body** on the errors gunicorn answers itself, before the app sees
  the request (414 request line too long, 431 too many or too large header fields, 400 a
  request it cannot parse): the same JSON the app gives. Two of gunicorn's statuses are
  changed, because nothing a client sends may make a 5xx (contract section 3): 400, not 501,
  for a transfer coding gunicorn does not implement, and 408, not 500, when a body announced
  by ``Content-Length`` never starts to arrive.

The seam: gunicorn's worker makes each connection's protocol through the module-level name
``gunicorn.workers.gasgi.ASGIProtocol``; the worker binds that name to ``FlagsightProtocol``
in its own process when it starts. ``tests/reliability/test_slow_clients.py`` fails if a
gunicorn upgrade moves the seam.
"""

from __future__ import annotations

import asyncio

import gunicorn.workers.gasgi as gasgi
import msgspec
from gunicorn.asgi.protocol import ASGIProtocol

from api.errors import error_body
from api.settings import Settings


class FlagsightProtocol(ASGIProtocol):
    """One connection: gunicorn's HTTP/1 protocol with a request-head timer."""

    header_timeout_s: float = 10.0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._callback_parser is not None:  # HTTP/1 (not HTTP/2 nor uWSGI)
            self._head_timer = self.worker.loop.call_later(
                self.header_timeout_s, self._head_timed_out
            )

    def _on_headers_complete(self) -> bool:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        return super()._on_headers_complete()

    def _head_timed_out(self) -> None:
        """No complete request head in time: close, as gunicorn's own keep-alive timer does."""
        self._head_timer = None
        if not self._closed:
            self._keepalive_timeout()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def _send_error_response(self, status: int, message: str, extra_headers: tuple = ()) -> None:
        """gunicorn's own refusals, in the contract's JSON instead of plain text.

        Two of them are the client's doing, not the server's, and the contract allows no 5xx
        for anything a client sends. gunicorn answers a transfer coding it does not implement
        with 501 (RFC 9112 section 6.1 recommends it): here it is a 400 naming the coding.
        And Falcon waits for the first piece of a body before it calls the app; when none
        arrives within gunicorn's body wait the app returns without answering, which gunicorn
        reports as a 500. The client sent too little: 408 Request Timeout.
        """
        receiver = self._body_receiver
        if status == 501:
            status = 400
        elif status == 500 and receiver is not None and receiver._body_wait_expired:
            status, message = 408, "The request body did not arrive in time"
        body = msgspec.json.encode(error_body(status, message))
        head = "".join(
            [
                f"HTTP/1.1 {status} {error_body(status, None)['error']}\r\n",
                "Content-Type: application/json\r\n",
                f"Content-Length: {len(body)}\r\n",
                *(f"{name}: {value}\r\n" for name, value in extra_headers),
                "Connection: close\r\n\r\n",
            ]
        )
        self._safe_write(head.encode("latin-1") + body)


class FlagsightWorker(gasgi.ASGIWorker):
    """``worker_class`` of ``flagsight serve`` (``api.gunicorn_conf``)."""

    def init_process(self) -> None:
        FlagsightProtocol.header_timeout_s = Settings.from_env().header_timeout_s
        gasgi.ASGIProtocol = FlagsightProtocol  # the seam described in the module docstring
        super().init_process()
