"""The ASGI front of the app: a valid single evaluate is answered before Falcon sees it.

``POST /v1/evaluate`` is the hot path, and on it Falcon's own request handling (the request
and response objects, routing, the middleware chain, the answer's header encoding) costs more
than flagsight's whole evaluation work (``docs/benchmarks.md``, issue 16). So does gunicorn's
ASGI call itself: the worker (``api.server.http_worker``) first offers a request whose whole body
has arrived to ``answer_now``, in the connection's task, and only the requests it leaves
reach the ASGI call below. Both doors share one check of the header fields and one serving.
The front reads what a valid request needs straight from the ASGI scope and the first body
event (or the worker's request), and hands everything else to Falcon untouched: any other
path or method, a missing, repeated or unknown ``Authorization``, a body that is not JSON,
without a ``Content-Length``, over the limit, cut short, sent in several pieces or not a valid
EvaluateRequest, a key whose environment is gone, a repeated header field. Those requests
reach Falcon untouched (with the body event given back when the front had read it), so their
answers (every 4xx and its wording) stay Falcon's. So does an error while serving: the front
hands the exception to the Falcon route, which raises it where its responder would, and
Falcon's error handlers answer, log and count it.

A valid evaluate with ``attributes`` (contract 12) is the front's too: the body's one
decoding (``decode_evaluate``) checks them against the contract's limits, so any wrong one
makes the body not a valid EvaluateRequest and Falcon answers the 400 naming it; a valid one
is served by the same ``EvaluateResource.answer`` (the native code decides with them). A
body without them decodes and is served as before.

What the front answers, it answers as the Falcon route would: the same serving
(``EvaluateResource.answer``), the same body, the same header fields in the same order, the
same request tally. ``tests/api/test_front.py`` holds the front's two doors and Falcon to
that, answer for answer, and the whole suite's ``client`` goes through the front's ASGI door;
``tests/integration/test_worker_answers_at_once.py`` holds the worker's door under gunicorn.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

import falcon.asgi

from api.serving.services import Services
from api.web.auth import api_key_of
from api.web.errors import FRONT_FAILURE, HandedOn
from api.web.jsonio import MALFORMED, is_json
from api.web.public.evaluate import EvaluateResource, decode_evaluate
from api.web.public.quota import QuotaFields
from api.web.request_framing import guard_request_framing
from api.web.request_framing import replay as _replay

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
T = TypeVar("T")

PATH = "/v1/evaluate"
ROUTE = PATH
"""The route template the request tally counts these answers under, as Falcon's would."""

MEMO_MAX = 1_024
"""Distinct ``Content-Type`` and ``Authorization`` values remembered (a client sends the same
ones on every request); past this many, the memo starts again."""
MEMO_VALUE_MAX = 256
"""Longer values are read every time (an API key field is about 55 bytes): the memo stays
small whatever clients send."""


_CONTENT_TYPE = (b"content-type", b"application/json")


class EvaluateFront:
    """ASGI app: ``POST /v1/evaluate`` answered here when valid, all else by ``app``."""

    def __init__(self, app: falcon.asgi.App, resource: EvaluateResource, services: Services):
        self.app = app
        """The Falcon app behind the front (for its routes, middleware and tests)."""
        self._app: ASGIApp = guard_request_framing(app)
        self._resource = resource
        self._config = services.config
        self._change_feed = services.change_feed
        self._tallies = services.tallies
        self._limit = services.settings.body_limits.single
        self._json: dict[bytes, bool] = {}
        """``Content-Type`` value -> whether it is JSON (``is_json``)."""
        self._api_keys: dict[bytes, str | None] = {}
        """``Authorization`` value -> the API key it carries, None if it is not ``ApiKey``'s."""
        self._lengths: dict[int, tuple[bytes, bytes]] = {}
        """Answer length -> its ``content-length`` field (a handful of distinct lengths)."""

    def close_streams(self) -> None:
        """End the open event streams: the worker is stopping (``api.server.http_worker``)."""
        self._change_feed.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != PATH
            or scope["method"] != "POST"
            or FRONT_FAILURE in scope  # serving failed in ``answer_now``: Falcon answers it
        ):
            await self._app(scope, receive, send)
            return
        fields = scope["headers"]
        if type(fields) is not list:  # any iterable of pairs, in ASGI (falcon.testing's are
            # iterators): read once here, and kept for Falcon as a list of tuples
            fields = scope["headers"] = [tuple(pair) for pair in fields]
        taken = self._takes(fields)
        if taken is None:
            await self._app(scope, receive, send)  # 415, 413, 401: Falcon's, in its order
            return
        api_key, length = taken
        event = await receive()
        started = time.perf_counter()  # when Falcon's request would start: with the body
        raw = event.get("body", b"")
        if event["type"] != "http.request" or event.get("more_body") or len(raw) != length:
            await self._app(scope, _replay(event, receive), send)
            return
        try:
            served = self._serve(api_key, raw)
        except Exception as exc:  # Falcon's error handling answers, as if its route had raised
            scope[FRONT_FAILURE] = exc
            await self._app(scope, _replay(event, receive), send)
            return
        if served is None:
            await self._app(scope, _replay(event, receive), send)
            return
        headers, data = self._answer(*served, started)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    def answer_now(
        self, method: str, path: str, fields: list, raw: bytes
    ) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        """The 200 answer's header fields and body for a request whose whole body is ``raw``,
        or None for a request to hand to the ASGI app (``__call__``) as it came.

        For the worker (``api.server.http_worker``), which calls it before it would start the app.
        What serving raises comes wrapped in ``HandedOn``: the worker hands the request on
        with it in ``scope[FRONT_FAILURE]``, for Falcon to answer as ``__call__`` does.
        """
        started = time.perf_counter()
        if method != "POST" or path != PATH:
            return None
        taken = self._takes(fields)
        if taken is None or taken[1] != len(raw):
            return None
        try:
            served = self._serve(taken[0], raw)
        except Exception as exc:
            raise HandedOn(exc) from exc
        return None if served is None else self._answer(*served, started)

    def _takes(self, fields: list) -> tuple[str, int] | None:
        """The API key and body length of a request whose header fields the front serves."""
        headers = dict(fields)
        content_length = headers.get(b"content-length")
        content_type = headers.get(b"content-type")
        authorization = headers.get(b"authorization")
        if (
            len(headers) != len(fields)  # a repeated field: Falcon's rules for combining it
            or content_length is None
            or not content_length.isdigit()
            or content_type is None
            or authorization is None
        ):
            return None
        length = int(content_length)
        json = self._json.get(content_type)
        if json is None:
            json = self._remember(self._json, content_type, is_json(content_type.decode("latin-1")))
        api_key = self._api_keys.get(authorization, False)
        if api_key is False:
            api_key = self._remember(
                self._api_keys, authorization, api_key_of(authorization.decode("latin-1"))
            )
        if not json or length > self._limit or api_key is None:
            return None
        return api_key, length

    def _serve(self, api_key: str, raw: bytes) -> tuple[bytes, QuotaFields] | None:
        """Serve a valid request with this key and body: the answer's body and ``RateLimit``
        fields; None for one Falcon answers (a body that is not a valid EvaluateRequest, an
        unknown key). Whatever serving raises, the caller hands to Falcon."""
        try:
            body = decode_evaluate(raw)
        except MALFORMED:
            return None
        caller = self._config.caller(api_key)  # after the body, as in Falcon's responder
        environment = None if caller is None else caller.environment
        if environment is None:  # 401
            return None
        return self._resource.answer(caller, environment, body)

    def _answer(
        self, data: bytes, quota: QuotaFields, started: float
    ) -> tuple[list[tuple[bytes, bytes]], bytes]:
        """The served answer's header fields and body, counted in the request tally."""
        size = self._lengths.get(len(data))
        if size is None:
            size = self._lengths[len(data)] = (b"content-length", str(len(data)).encode("ascii"))
        self._tallies.count_request(ROUTE, 200, time.perf_counter() - started)  # as Falcon's
        # middleware does: before the answer is sent
        return [_CONTENT_TYPE, quota.policy_header, quota.limit_header, size], data

    @staticmethod
    def _remember(memo: dict, key: bytes, value: T) -> T:
        if len(key) <= MEMO_VALUE_MAX:
            if len(memo) >= MEMO_MAX:
                memo.clear()
            memo[key] = value
        return value
