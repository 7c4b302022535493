"""Requests whose body is framed by a transfer coding flagsight does not decode are refused.

gunicorn accepts ``Transfer-Encoding: gzip, chunked`` (and ``identity, chunked``): it removes
the chunking and hands on the body still gzipped, as if it were the body. The service decodes
no transfer coding but ``chunked``, so it answers such a request ``400`` with the contract's
error body, without reading the body. The chunking still frames the request, so gunicorn skips
the unread body and keeps the connection as it would (it closes it after a ``gzip``,
``compress`` or ``deflate`` coding itself).
"""

from __future__ import annotations

from typing import Any

import msgspec

from api.errors import error_body

ASGIApp = Any


def refuse_transfer_codings(app: ASGIApp) -> ASGIApp:
    """``app`` behind the check: any ``Transfer-Encoding`` but ``chunked`` is refused."""

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == b"transfer-encoding" and value.strip().lower() != b"chunked":
                    await _refuse(send, value)
                    return
        await app(scope, receive, send)

    return guarded


async def _refuse(send: Any, coding: bytes) -> None:
    shown = coding.decode("latin-1")[:100]
    body = msgspec.json.encode(
        error_body(
            400,
            f"Transfer-Encoding '{shown}' is not supported: send the body as it is, with a"
            " Content-Length or chunked",
        )
    )
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})
