"""Requests whose body is not framed, or did not arrive, as the service can trust are refused.

**An unfinished body.** When a body stops coming (a chunked body whose last chunk never comes,
or a client that closes before the end), gunicorn gives the app ``http.disconnect`` instead of
the rest, and Falcon's body stream reads that as the end of the body: a JSON body that happened
to be whole in the first chunk was served, metered and logged, and an admin write applied.
``receive`` is wrapped so that ``http.disconnect`` before the body's last part raises
``IncompleteBody``, a ``400`` Falcon answers like any other, before anything is done.

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

from api.web.errors import BadRequest, error_body

ASGIApp = Any
Receive = Any

INCOMPLETE_MESSAGE = "The request body did not arrive whole: nothing was done; send it again"
TRANSFER_CODING_MESSAGE = (
    "Transfer-Encoding '%s' is not supported: send the body as it is, with a Content-Length or"
    " chunked"
)


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
            receive = whole_body(receive)
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


def whole_body(receive: Receive) -> Receive:
    """``receive``, raising ``IncompleteBody`` for an ``http.disconnect`` that comes after part
    of the body but before its last part. Before any part, Falcon itself stops at the
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
            raise IncompleteBody()
        return message

    return checked


async def _refuse(send: Any, message: str) -> None:
    """A 400 with the contract's error body, answered before the app."""
    body = msgspec.json.encode(error_body(400, message))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})
