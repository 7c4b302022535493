"""Falcon's side of the request tallies (``api.observability.tallies``): each answer counted
by route template and status, with the time it took.
"""

from __future__ import annotations

import time
from typing import Any

import falcon
import falcon.asgi

from api.observability.tallies import PENDING_MAX, Tallies


class TimedRequest(falcon.asgi.Request):
    """A request that notes when it was made, for ``RequestTallyMiddleware``: cheaper than a
    ``process_request`` step, which costs a coroutine per request."""

    __slots__ = ("started",)

    def __init__(
        self,
        scope: dict[str, Any],
        receive: Any,
        first_event: dict[str, Any] | None = None,
        options: falcon.RequestOptions | None = None,
    ) -> None:
        self.started = time.perf_counter()
        falcon.asgi.Request.__init__(self, scope, receive, first_event, options)


class RequestTallyMiddleware:
    """Counts every answer Falcon makes by route template and status, and the time it took
    (``api.web.front`` counts the answers it makes itself in the same way). The app's requests
    must be ``TimedRequest``s (``falcon.asgi.App(request_type=TimedRequest)``)."""

    def __init__(self, tallies: Tallies):
        self._tallies = tallies

    async def process_response(
        self,
        req: TimedRequest,
        resp: falcon.asgi.Response,
        resource: Any,
        req_succeeded: bool,
    ) -> None:
        tallies = self._tallies  # ``Tallies.count_request``, written out
        pending = tallies._pending
        pending.append(
            (req.uri_template or "unmatched", resp.status_code, time.perf_counter() - req.started)
        )
        if len(pending) >= PENDING_MAX:
            with tallies._lock:
                tallies._fold()
