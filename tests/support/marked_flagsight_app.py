"""flagsight's app (``api.asgi:app``) with every answer its ``answer_now`` gives marked by one
more header field, ``x-test-door: at-once``: for a test that must know which door an answer
came through under real gunicorn (``tests/integration/test_worker_answers_at_once.py``)."""

from __future__ import annotations

from api.asgi import app as flagsight
from tests.support.answer_now_app import MARK


class Marked:
    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI's
        await flagsight(scope, receive, send)

    def answer_now(self, *request: object):  # noqa: ANN201 - as the front's
        answered = flagsight.answer_now(*request)
        if answered is None:
            return None
        fields, body = answered
        return [*fields, MARK], body


app = Marked()
