"""Requests whose body is not framed, or did not arrive, as the service can trust are refused.

**An unfinished body.** When a body stops coming (a chunked body whose last chunk never comes,
or a client that closes before the end), gunicorn gives the app ``http.disconnect`` instead of
the rest, and Falcon's body stream reads that as the end of the body: a JSON body that happened
to be whole in the first chunk was served, metered and logged, and an admin write applied.
``receive`` is wrapped so that ``http.disconnect`` before the body's last part raises
``IncompleteBody``, a ``400`` Falcon answers like any other, before anything is done.

**A chunked body announced too large.** A chunk's size line says how much is coming before it
comes. The worker (``api.server.http_worker``) puts a ``BodyCap`` in each chunked request's
scope; the route's reader lowers it to its limit (``jsonio.read_body``), and once the chunks
announced pass it the worker ends the body wait, which ``whole_body`` answers ``413`` at once,
where the route would otherwise have waited for the body to stop coming (30 s, then ``400``).
Before any part of the body Falcon has not called the route yet, so the cap is the largest
limit, and the worker answers ``413`` itself when Falcon stops at the disconnect.

**A transfer coding.** gunicorn accepts ``Transfer-Encoding: gzip, chunked`` (and ``identity,
chunked``): it removes the chunking and hands on the body still gzipped, as if it were the body. The service decodes
no transfer coding but ``chunked``, so it answers such a request ``400`` with the contract's
error body, without reading the body. The chunking still frames the request, so gunicorn skips
the unread body and keeps the connection as it would (it closes it after a ``gzip``,
``compress`` or ``deflate`` coding itself).
"""

from __future__ import annotations

from typing import Any

import msgspec

from api.web.errors import BadRequest, PayloadTooLarge, error_body

ASGIApp = Any
Receive = Any

INCOMPLETE_MESSAGE = "The request body did not arrive whole: nothing was done; send it again"
TRANSFER_CODING_MESSAGE = (
    "Transfer-Encoding '%s' is not supported: send the body as it is, with a Content-Length or"
    " chunked"
)


BODY_CAP = "flagsight.body_cap"
"""The scope extension (``scope["extensions"]``) holding a chunked request's ``BodyCap``."""


class BodyCap:
    """The most a chunked request's body may hold, and whether its chunks announced more.

    The worker makes one per chunked request with the largest limit any route takes and a
    ``check`` to call when the limit drops; a route's reader lowers it with ``limit_to``."""

    __slots__ = ("_check", "exceeded", "limit")

    def __init__(self, limit: int, check: Any = None):
        self.limit = limit
        self.exceeded = False
        self._check = check

    def limit_to(self, limit: int) -> None:
        if limit < self.limit:
            self.limit = limit
            if self._check is not None:
                self._check()


def body_cap(scope: dict) -> BodyCap | None:
    extensions = scope.get("extensions")
    return extensions.get(BODY_CAP) if extensions else None


class IncompleteBody(BadRequest):
    """The client went away, or stopped sending, before the body's last part."""

    def __init__(self) -> None:
        super().__init__(INCOMPLETE_MESSAGE)


def guard_request_framing(app: ASGIApp) -> ASGIApp:
    """``app`` behind both checks: any ``Transfer-Encoding`` but ``chunked`` is refused, and a
    body that ends in ``http.disconnect`` raises ``IncompleteBody`` where it is read."""

    async def guarded(scope: dict, receive: Receive, send: Any) -> None:
        if scope["type"] == "http":
            fields = scope["headers"]
            if type(fields) is not list:  # any iterable of pairs in ASGI (falcon.testing's are
                # iterators): read once here, and kept for Falcon as a list
                fields = scope["headers"] = [tuple(pair) for pair in fields]
            for name, value in fields:
                if name == b"transfer-encoding" and value.strip().lower() != b"chunked":
                    await _refuse(send, TRANSFER_CODING_MESSAGE % value.decode("latin-1")[:100])
                    return
            receive = whole_body(receive, body_cap(scope))
        await app(scope, receive, send)

    return guarded


def replay(event: dict, receive: Receive) -> Receive:
    """``receive`` with ``event``, already taken from it, given back first."""
    taken = [event]

    async def replayed() -> dict:
        if taken:
            return taken.pop()
        return await receive()

    return replayed


def whole_body(receive: Receive, cap: BodyCap | None = None) -> Receive:
    """``receive``, raising ``IncompleteBody`` for an ``http.disconnect`` that comes after part
    of the body but before its last part, and ``PayloadTooLarge`` for one that ends a body
    whose chunks announced more than ``cap`` allows. Before any part, Falcon itself stops at the
    disconnect without answering, and the worker answers for it (``api.server.http_worker``: 408 when
    the body wait ran out, 400 when the client closed first); after the last part, a
    disconnect is just the client leaving."""
    started = finished = False

    async def checked() -> dict:
        nonlocal started, finished
        message = await receive()
        kind = message["type"]
        if kind == "http.request":
            started = True
            finished = finished or not message.get("more_body", False)
        elif kind == "http.disconnect" and started and not finished:
            if cap is not None and cap.exceeded:
                raise PayloadTooLarge(cap.limit)
            raise IncompleteBody()
        return message

    return checked


async def _refuse(send: Any, message: str) -> None:
    """A 400 with the contract's error body, answered before the app."""
    body = msgspec.json.encode(error_body(400, message))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})
