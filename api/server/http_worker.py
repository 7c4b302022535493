"""flagsight's gunicorn worker: gunicorn's native ``asgi`` worker plus what it leaves out.

* **A request-head timeout.** gunicorn 27's asgi worker closes a kept-alive connection that
  waits ``keepalive`` seconds for its next request head, but it arms no timer before the
  first one: a client that connects and sends nothing, or sends its headers a byte at a time,
  holds a descriptor for ever. Here a connection whose first request head is not complete
  ``header_timeout_s`` after it opened is closed (``docs/operations.md``, "Slow clients").
* **A send timeout.** While a client reads nothing, its answers pile up in the transport's
  write buffer; past its high-water mark gunicorn stops reading from the client and its task
  waits for the buffer to drain, with no timer: a client that pipelines requests and never
  reads its answers held its connection and megabytes of buffers for ever. Here a connection
  whose write buffer stays over the mark ``send_timeout_s`` is reset (its buffered answers
  dropped, in the process and in the kernel; ``docs/operations.md``, "Slow clients"). A
  client that reads slowly but reads resets the timer each time the buffer drains.
* **Response header fields validated and encoded once.** gunicorn checks every field of every
  answer with two regular expressions and encodes it again, about 0.6 µs a field; flagsight's
  evaluate answers carry four, all but the length and the ``RateLimit`` count the same from
  one answer to the next. ``ResponseFields`` remembers each (name, value) pair it has checked,
  with its encoded line, so a repeated field costs one dictionary lookup. What is sent and
  what is refused stay gunicorn's (a new pair goes through gunicorn's own check first).
* **An answer at once.** gunicorn starts every request's app call in a task of its own, with
  a future, an ASGI scope and ``send`` and ``receive`` callables, and the connection's task
  waits for it: about 20 µs of server CPU per request on this machine, more than flagsight's
  whole evaluation work (``docs/benchmarks.md``). An app with an ``answer_now(method, path,
  header fields, body)`` method (``api.web.front.EvaluateFront``) is asked first, in the
  connection's task, when the request's whole body has arrived in one piece and its client is
  still there. It returns None (gunicorn's path, untouched), or the 200 answer as a list of
  ``(bytes, bytes)`` fields and a ``bytes`` body that they frame (one ``Content-Length``),
  which goes out as gunicorn's ``send`` would write it; or it raises ``HandedOn`` with what
  serving raised, and the request takes gunicorn's path with that in
  ``scope[FRONT_FAILURE]``, for the app to answer as a failure of its own. Anything else it
  raises, and an answer that is not as above, is answered as gunicorn answers an app that
  fails: logged, a 500, the connection closed. While a pipelined request waits behind the
  answer, the task gives the event loop a turn, as gunicorn's path does for every request,
  so one pipelining client cannot hold the worker. Hooks (``pre_request``, ``post_request``,
  including gunicorn's default ``pre_request`` at log level debug) and the access log keep
  gunicorn's path.
* **``Connection: close`` on an answer that starts before its request's body has all
  arrived** (``_will_close``): gunicorn closes such a connection after the answer, silently.
* **The contract's error body** on the errors gunicorn answers itself, before the app sees
  the request (414 request line too long, 431 too many or too large header fields, 400 a
  request it cannot parse): the same JSON the app gives. Two of gunicorn's statuses are
  changed, because nothing a client sends may make a 5xx (contract section 3): 400, not 501,
  for a transfer coding gunicorn does not implement, and 408, not 500, when a body announced
  by ``Content-Length`` never starts to arrive.
* **No WebSocket.** An ``Upgrade: websocket`` request is served as plain HTTP
  (``_is_websocket_upgrade``), not handed to Falcon as a WebSocket it refuses.

The seams: gunicorn's worker makes each connection's protocol through the module-level name
``gunicorn.workers.gasgi.ASGIProtocol``, and each answer's fields are checked by the
module-level ``gunicorn.asgi.protocol._scan_response_headers``; the worker binds both names
to its own in its own process when it starts. ``tests/reliability/test_slow_clients.py``
fails if a gunicorn upgrade moves the first, ``tests/api/test_http_worker.py`` the second.
The answer at once overrides ``ASGIProtocol._serve_http_request`` (one HTTP/1 request, the
keep-alive decision returned) and ``_build_http_scope``, reads the request's ``BodyReceiver``
and the parser's ``remaining()``, and writes through the protocol's own ``_will_close``,
``_send_body``, ``_flow_control``, ``_maybe_resume_reading`` and ``_send_error_response``;
``tests/integration/test_worker_answers_at_once.py`` (real gunicorn) and
``tests/api/test_http_worker.py`` fail if an upgrade changes what these do for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import struct

import gunicorn.asgi.protocol as gprotocol
import gunicorn.workers.gasgi as gasgi
import msgspec
from gunicorn.asgi.protocol import ASGIProtocol

from api.server.acceptor import Acceptor, connection_limit
from api.settings import BodyLimits, Settings
from api.web.errors import FRONT_FAILURE, HandedOn, PayloadTooLarge, error_body
from api.web.request_framing import BODY_CAP, INCOMPLETE_MESSAGE, BodyCap

SEAMS_WRITTEN_FOR = "27.0.1"
"""The gunicorn release whose code the overrides below mirror (``gunicorn/asgi/protocol.py``:
``ASGIProtocol._serve_http_request``, ``_build_http_scope``, ``_send_response_start``,
``_is_websocket_upgrade``,
``_send_error_response``, ``_will_close``, ``pause_writing``/``resume_writing``,
``eof_received``, and the ``_awaiting_request`` flag and ``_keepalive_timeout`` close that
``close_if_idle`` reads; ``gunicorn/workers/gasgi.py``: ``ASGIWorker._setup_event_loop``,
``_serve`` and ``_shutdown``). ``tests/api/test_http_worker.py`` fails on any other release, so an upgrade
re-reads them first."""

FIELDS_KEPT = 4_096
"""Distinct response fields remembered; past this many (the ``RateLimit`` count and the
length vary), the memo starts again."""

CONTENT_LENGTH, TRANSFER_ENCODING, DATE, SERVER, CONNECTION = 1, 2, 4, 8, 16
"""What a field is, for framing and for the fields gunicorn adds when an answer lacks them."""
_KINDS = {b"date": DATE, b"server": SERVER, b"connection": CONNECTION}


class NotRemembered(Exception):
    """A field the memo does not take (a ``str`` name or value): gunicorn's own path serves."""


class ResponseFields:
    """Response header fields gunicorn has checked: (name, value) -> (encoded line, kind).

    Only lists of fields are taken (gunicorn's own path serves any other iterable), and a
    field is learnt only as a pair of ``bytes``. A lookup matches by equality, so a
    ``memoryview`` value equal to a remembered ``bytes`` one is written as those bytes, where
    gunicorn's own path would fail on it; ASGI allows only byte strings there.
    """

    def __init__(self, scan=gprotocol._scan_response_headers):  # noqa: ANN001 - gunicorn's
        self._scan = scan
        self._known: dict[tuple[bytes, bytes], tuple[bytes, int]] = {}

    def field(self, pair: tuple[bytes, bytes]) -> tuple[bytes, int]:
        """The field's line and kind; raises as gunicorn does for a field it refuses, and
        ``NotRemembered`` (or ``TypeError``, for a list) for one to leave to gunicorn."""
        known = self._known.get(pair)
        if known is None:
            known = self._learn(pair)
        return known

    def _learn(self, pair: tuple[bytes, bytes]) -> tuple[bytes, int]:
        name, value = pair
        if type(name) is not bytes or type(value) is not bytes:
            raise NotRemembered
        has_length, _, has_coding = self._scan([pair])  # gunicorn's check: raises if refused
        lowered = name.lower()
        kind = _KINDS.get(lowered, 0)
        if has_length:
            kind = CONTENT_LENGTH
        elif has_coding:
            kind = TRANSFER_ENCODING
        known = (name + b": " + value + b"\r\n", kind)
        if len(self._known) >= FIELDS_KEPT:
            self._known.clear()
        self._known[pair] = known
        return known

    def scan(self, headers: list) -> tuple[bool, object, bool]:  # noqa: ANN001
        """``gunicorn.asgi.protocol._scan_response_headers``, from the memo."""
        if type(headers) is not list:  # a one-shot iterable: gunicorn's own pass, once
            return self._scan(headers)
        field = self.field
        has_length = has_coding = False
        length = None
        try:
            for pair in headers:
                kind = field(pair)[1]
                if kind == CONTENT_LENGTH:
                    has_length, length = True, pair[1]
                elif kind == TRANSFER_ENCODING:
                    has_coding = True
        except (NotRemembered, TypeError):
            return self._scan(headers)
        return has_length, length, has_coding

    def head(self, status_line: bytes, headers: list, close: bool) -> bytes | None:  # noqa: ANN001
        """The status line and fields as ``ASGIProtocol._send_response_start`` joins them
        (with the ``Server``, ``Date`` and ``Connection: close`` it adds when missing), or
        None for gunicorn to build them."""
        joined = self._join(status_line, headers, close)
        return None if joined is None else joined[0]

    def framed_head(
        self, status_line: bytes, headers: list, body_length: int, close: bool
    ) -> bytes | None:
        """``head``, for an answer whose whole body is ``body_length`` bytes: None unless the
        fields frame exactly that body (one ``Content-Length`` of that value, no
        ``Transfer-Encoding``), so nothing gunicorn would have to fix is written."""
        joined = self._join(status_line, headers, close)
        if joined is None or joined[1] & TRANSFER_ENCODING or joined[2] is None:
            return None
        if not joined[2].isdigit() or int(joined[2]) != body_length:
            return None
        return joined[0]

    def _join(
        self, status_line: bytes, headers: list, close: bool
    ) -> tuple[bytes, int, bytes | None] | None:
        """The head, the kinds of field in it, and the ``Content-Length`` value if there is
        exactly one; None for a field the memo does not take. Raises for a refused one."""
        if type(headers) is not list:
            return None
        parts = [status_line]
        kinds = 0
        lengths: list[bytes] = []
        field = self.field
        try:
            for pair in headers:
                line, kind = field(pair)
                parts.append(line)
                kinds |= kind
                if kind == CONTENT_LENGTH:
                    lengths.append(pair[1])
        except (NotRemembered, TypeError):
            return None
        if not kinds & SERVER:
            parts.append(gprotocol._CACHED_SERVER_HEADER)
        if not kinds & DATE:
            parts.append(gprotocol._get_cached_date_header())
        if close and not kinds & CONNECTION:
            parts.append(b"Connection: close\r\n")
        parts.append(b"\r\n")
        return b"".join(parts), kinds, lengths[0] if len(lengths) == 1 else None


RESPONSE_FIELDS = ResponseFields()

_LINGER_NONE = struct.pack("ii", 1, 0)
"""``SO_LINGER`` on, 0 s: closing the socket resets the connection and drops its send queue."""


class FlagsightProtocol(ASGIProtocol):
    """One connection: gunicorn's HTTP/1 protocol with a request-head timer, memoised answer
    heads and the answer at once (the module docstring)."""

    header_timeout_s: float = 10.0
    send_timeout_s: float = 30.0
    _head_timer: asyncio.TimerHandle | None = None
    _send_timer: asyncio.TimerHandle | None = None
    _front_failure: Exception | None = None
    """Serving failed in ``answer_now``: the exception, for the request's scope."""
    body_limit: int = BodyLimits().admin
    """The largest body any route takes (set from the settings at start): a chunked body
    announced past it is refused before any route is called."""
    _body_cap: BodyCap | None = None
    _body_seen = 0
    """Body bytes of the current request fed to its receiver."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        connections = getattr(self.worker, "connections", None)
        if connections is not None:
            connections.add(self)
        if self._callback_parser is not None:  # HTTP/1 (not HTTP/2 nor uWSGI)
            self._head_timer = self.worker.loop.call_later(
                self.header_timeout_s, self._head_timed_out
            )

    def _is_websocket_upgrade(self, request) -> bool:  # noqa: ANN001 - gunicorn's request
        """Never: the service speaks no WebSocket, so an upgrade request is answered as the
        plain HTTP request it also is (RFC 9110 section 7.8 lets a server ignore ``Upgrade``),
        with the contract's status and body. gunicorn handed Falcon a WebSocket scope, which
        it refused with an empty ``403`` and an error log line for every such request."""
        return False

    def _on_headers_complete(self) -> bool:
        self._body_seen = 0
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
        self._cancel_send_timer()
        super().connection_lost(exc)
        connections = getattr(self.worker, "connections", None)
        if connections is not None:
            connections.discard(self)
        for acceptor in getattr(self.worker, "acceptors", ()):
            acceptor.connection_closed()

    def close_if_idle(self) -> None:
        """Close the connection if it waits for a request (kept alive, or new): the worker is
        shutting down. One with a request in flight finishes it, with ``Connection: close``."""
        if self._awaiting_request and not self._closed and self._current_request is None:
            self._keepalive_timeout()

    def pause_writing(self) -> None:
        """The write buffer is over its high-water mark: the client has that long to read."""
        super().pause_writing()
        if self._send_timer is None and not self._closed:
            self._send_timer = self.worker.loop.call_later(
                self.send_timeout_s, self._send_timed_out
            )

    def resume_writing(self) -> None:
        """The client read enough for the buffer to drain below its low-water mark."""
        self._cancel_send_timer()
        super().resume_writing()

    def _cancel_send_timer(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _send_timed_out(self) -> None:
        """The client read nothing for ``send_timeout_s``: reset the connection, dropping what
        is buffered for it. A graceful close would wait for the buffers to drain, which is
        what never happens: the kernel would keep the socket and its send queue (megabytes)
        in FIN-WAIT-1. With ``SO_LINGER`` 0 the close sends a reset and frees both at once.
        ``connection_lost`` follows and ends the connection's task as for any lost client."""
        self._send_timer = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        self.log.info("Reset a connection whose client read nothing for %ss", self.send_timeout_s)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_NONE)
        transport.abort()

    def eof_received(self) -> bool | None:
        """A client that half-closes (``shutdown(SHUT_WR)``) after its request gets its answer.

        gunicorn's protocol keeps asyncio's default, which closes the transport on EOF: the
        request in flight was served, metered and logged, and its answer dropped. With a
        request in flight (``_current_request``, set from its head to its end) the transport
        stays open for writing; keep-alive is off (``_keepalive``, read by ``_will_close`` and
        the request loop), so the answer says ``Connection: close`` and nothing after it is
        read; a body still unfinished ends here (``BodyReceiver.signal_disconnect``: the app
        sees ``http.disconnect``, which ``api.web.request_framing`` refuses). Idle, it closes as
        before.
        """
        if self._current_request is None:
            return None
        self._keepalive = 0
        receiver = self._body_receiver
        if receiver is not None and not receiver._complete:
            receiver.signal_disconnect()
        return True

    def _will_close(self, request: object, response_requires_close: bool) -> bool:
        """gunicorn's keep-alive decision, and closed when the request's body has not all
        arrived as the answer starts (an error answered before the body was read: a bad key,
        a wrong content type). gunicorn's request loop closes such a connection after the
        answer (the rest of the body cannot be told from the next request), but its answer
        did not say so: a client pipelining behind it lost its requests without being told.
        Now the answer carries ``Connection: close`` (RFC 9112 section 9.6)."""
        if super()._will_close(request, response_requires_close):
            return True
        receiver = self._body_receiver
        return receiver is not None and not receiver._complete

    def _send_response_start(
        self,
        status: int,
        headers: list,
        request: object,
        close: bool = False,
    ) -> None:
        head = RESPONSE_FIELDS.head(
            gprotocol._get_cached_status_line(request.version, status), headers, close
        )
        if head is None:
            super()._send_response_start(status, headers, request, close)
        else:
            self._response_buffer = head

    async def _serve_http_request(
        self, request: object, sockname: object, peername: object
    ) -> bool:
        """A request the app answers at once (``answer_now``) is answered here, in the
        connection's own task; any other goes through gunicorn's path (the app called in a
        task of its own). Returns whether the connection stays open, as gunicorn's does."""
        receiver = self._body_receiver
        answer_now = getattr(self.app, "answer_now", None)
        if (
            answer_now is None
            or receiver is None
            or not receiver._complete  # the whole body is here, in one piece
            or len(receiver._chunks) != 1
            or receiver._closed  # a client gone: the app is told, in gunicorn's path
            or self._closed
            or self._pre_request is not None  # hooks and the access log see gunicorn's path
            or self._post_request is not None
            or self.log.access_log_enabled
        ):
            return await super()._serve_http_request(request, sockname, peername)
        try:
            answered = answer_now(
                request.method, request.path, request.headers_bytes, receiver._chunks[0]
            )
        except HandedOn as handed_on:  # the app answers the failure, in gunicorn's path
            self._front_failure = handed_on.failure
            try:
                return await super()._serve_http_request(request, sockname, peername)
            finally:
                self._front_failure = None
        except Exception:
            return self._failed()
        if answered is None:
            return await super()._serve_http_request(request, sockname, peername)
        receiver._chunks.clear()  # the body is taken, as the app's ``receive`` takes it
        receiver._buffered = 0
        receiver._body_finished = True
        self._maybe_resume_reading()
        close = self._will_close(request, False)
        status_line = gprotocol._get_cached_status_line(request.version, 200)
        try:
            headers, body = answered
            head = None
            if type(body) is bytes:
                head = RESPONSE_FIELDS.framed_head(status_line, headers, len(body), close)
            if head is None:
                raise ValueError("answer_now's answer is not bytes framed by its fields")
        except Exception:
            return self._failed()
        self._response_buffer = head
        self._send_body(body, False, True, len(body))
        flow_control = self._flow_control
        if flow_control is not None and flow_control.write_paused:
            await flow_control.drain()  # a client that does not read: wait, as gunicorn does
        parser = self._callback_parser
        if parser is not None and parser.remaining():  # a pipelined request waits: let
            await asyncio.sleep(0)  # the event loop serve other connections first
        return not close

    def _failed(self) -> bool:
        """``answer_now`` raised, or gave an answer that cannot be sent as it is: answered as
        gunicorn answers an app that fails before its answer starts (logged, a 500, the
        connection closed). Returns the keep-alive decision: closed."""
        self.log.exception("Error in ASGI application")
        self._send_error_response(500, "Internal Server Error")
        return False

    def _build_http_scope(self, request: object, sockname: object, peername: object) -> dict:
        """gunicorn's scope, with the failure ``answer_now`` handed on (cleared by
        ``_serve_http_request`` once its request is done), and a chunked request's
        ``BodyCap``."""
        scope = super()._build_http_scope(request, sockname, peername)
        if self._front_failure is not None:
            scope[FRONT_FAILURE] = self._front_failure
        self._body_cap = None
        if getattr(request, "chunked", False):
            cap = self._body_cap = BodyCap(self.body_limit, self._check_announced)
            scope.setdefault("extensions", {})[BODY_CAP] = cap
            self._check_announced()
        return scope

    def _on_body(self, chunk: bytes) -> None:
        self._body_seen += len(chunk)
        super()._on_body(chunk)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._body_cap is not None:
            self._check_announced()

    def _check_announced(self) -> None:
        """A chunked body whose chunks so far announce more than its cap ends its body wait
        (``api.web.request_framing``: the route answers ``413`` at once)."""
        cap, parser = self._body_cap, self._callback_parser
        if cap is None or cap.exceeded or parser is None:
            return
        coming = parser._chunk_remaining if parser._chunk_state == "data" else 0
        if self._body_seen + coming <= cap.limit:
            return
        cap.exceeded = True
        receiver = self._body_receiver
        if receiver is not None and not receiver._complete:
            receiver._body_wait_expired = True
            receiver._wake_waiter()

    def _send_error_response(self, status: int, message: str, extra_headers: tuple = ()) -> None:
        """gunicorn's own refusals, in the contract's JSON instead of plain text.

        Two of them are the client's doing, not the server's, and the contract allows no 5xx
        for anything a client sends. gunicorn answers a transfer coding it does not implement
        with 501 (RFC 9112 section 6.1 recommends it): here it is a 400 naming the coding.
        And Falcon waits for the first piece of a body before it calls the app; when none
        arrives within gunicorn's body wait the app returns without answering, which gunicorn
        reports as a 500. The client sent too little: 408 Request Timeout. Likewise when the
        client closes its side before its body is whole (``eof_received``): 400, the body did
        not arrive whole.
        """
        receiver = self._body_receiver
        cap = self._body_cap
        if status == 501:
            status = 400
        elif status == 500 and cap is not None and cap.exceeded:  # before Falcon called a route
            status, message = 413, PayloadTooLarge(cap.limit).description
        elif status == 500 and receiver is not None and receiver._body_wait_expired:
            status, message = 408, "The request body did not arrive in time"
        elif status == 500 and receiver is not None and receiver._closed and not receiver._complete:
            status, message = 400, INCOMPLETE_MESSAGE
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
    """``worker_class`` of ``flagsight serve`` (``api.server.gunicorn_conf``)."""

    connections: set[FlagsightProtocol]
    """This worker's open connections (``_shutdown`` closes the idle ones)."""

    def init_process(self) -> None:
        self.connections = set()
        settings = Settings.from_env()
        FlagsightProtocol.header_timeout_s = settings.header_timeout_s
        FlagsightProtocol.body_limit = max(dataclasses.astuple(settings.body_limits))
        FlagsightProtocol.send_timeout_s = settings.send_timeout_s
        install_seams()
        super().init_process()

    def _setup_event_loop(self) -> None:
        """gunicorn's loop (uvloop when installed), whose ``create_server`` for a plain
        listening socket is an ``Acceptor`` (``api.server.acceptor``): it keeps gunicorn's
        listen backlog and accepts only while the worker has descriptors for a connection.

        Mirrors ``gasgi.ASGIWorker._serve``, which calls ``loop.create_server(sock=...)``
        without a backlog (the loop would listen again with 100) and keeps what it returns to
        ``close`` and ``wait_closed`` it at shutdown. A TLS socket keeps the loop's own server.
        """
        super()._setup_event_loop()
        loop, create_server = self.loop, self.loop.create_server
        self.acceptors: list[Acceptor] = []

        async def serve(protocol_factory, *, sock=None, ssl=None, **kwargs):  # noqa: ANN001, ANN202
            if sock is None or ssl is not None:
                kwargs.setdefault("backlog", self.cfg.backlog)
                return await create_server(protocol_factory, sock=sock, ssl=ssl, **kwargs)
            acceptor = Acceptor(
                loop, sock, protocol_factory, self, self.cfg.backlog, connection_limit()
            )
            self.acceptors.append(acceptor)
            return acceptor

        loop.create_server = serve

    async def _shutdown(self) -> None:
        """gunicorn's graceful shutdown, without waiting for idle connections.

        gunicorn waits up to ``graceful_timeout`` (10 s) for every open connection to close,
        and a client's kept-alive connection between requests never does on its own: each
        restart of a worker behind a connection pool took the whole timeout. Here new
        connections stop first, then the connections waiting for a request are closed; the
        wait is for requests in flight only, each answered with ``Connection: close``, and open
        event streams are ended (the app's ``close_streams``).
        """
        for server in self.servers:
            server.close()
        for protocol in list(self.connections):
            protocol.close_if_idle()
        close_streams = getattr(self.asgi, "close_streams", None)
        if close_streams is not None:  # an event stream never ends on its own either
            close_streams()
        await super()._shutdown()


def install_seams() -> None:
    """Bind gunicorn's names to flagsight's (the seams in the module docstring), in this process."""
    gasgi.ASGIProtocol = FlagsightProtocol
    gprotocol._scan_response_headers = RESPONSE_FIELDS.scan
