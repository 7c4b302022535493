"""An ASGI app with ``answer_now``, for the worker's own tests (``api.server.http_worker``): it says
which door each answer came through, so a test can tell the worker's path from gunicorn's.

``POST /now`` is answered by ``answer_now`` (its body echoed after ``now:``), ``POST /fail``
makes it hand a serving failure on (``HandedOn``), ``POST /broken`` makes it raise anything
else, ``POST /unframed`` makes it return a ``Content-Length`` that is not its body's, and
anything else is left to the ASGI call, which answers
``asgi:`` and the body it received, or ``failed:`` and the failure the worker handed over.
"""

from __future__ import annotations

from api.web.errors import FRONT_FAILURE, HandedOn

MARK = (b"x-test-door", b"at-once")
"""The header field ``tests.support.marked_flagsight_app`` adds to flagsight's at-once answers."""


class AnswerNowApp:
    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI's
        if scope["type"] != "http":
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        failure = scope.get(FRONT_FAILURE)
        answer = b"asgi:" + body if failure is None else b"failed:" + str(failure).encode()
        await send({"type": "http.response.start", "status": 500 if failure else 200,
                    "headers": fields(answer)})  # fmt: skip
        await send({"type": "http.response.body", "body": answer})

    def answer_now(self, method: str, path: str, headers: list, raw: bytes):  # noqa: ANN201
        if method != "POST" or path not in ("/now", "/fail", "/broken", "/unframed"):
            return None
        if path == "/fail":
            raise HandedOn(RuntimeError("broken for the test"))
        if path == "/broken":
            raise RuntimeError("the answer itself is broken")
        if path == "/unframed":
            return fields(b"too long for the body"), b"short"
        return fields(b"now:" + raw), b"now:" + raw


def fields(answer: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(answer))]


app = AnswerNowApp()
