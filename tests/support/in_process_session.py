"""A ``requests.Session`` whose requests are answered by an in-process flagsight app
(``falcon.testing.TestClient``), for the SDK against the very services a test holds: rule
types a test registers are known to both, with no server process.

``GET /v1/stream`` is not simulated (its answer never ends): it is an event stream that stays
quiet and ends after ``QUIET_S``, as a restarting service ends it, so the SDK fetches the
ruleset again (a 304) and reconnects, and a client stopped at any moment ends its follower
promptly. Everything else is the app's own answer.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import falcon.testing
import requests
import urllib3
from requests.adapters import BaseAdapter, HTTPAdapter

STREAM_PATH = "/v1/stream"
QUIET_S = 0.2


class QuietStream(io.RawIOBase):
    """An event stream's body with no event: it ends when closed or after ``QUIET_S``."""

    def __init__(self) -> None:
        super().__init__()
        self._closed = threading.Event()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._closed.wait(QUIET_S)
        return 0

    def close(self) -> None:
        self._closed.set()
        super().close()


class InProcessAdapter(BaseAdapter):
    """Sends each request to ``client``'s app, one at a time (its event loop is shared)."""

    def __init__(self, client: falcon.testing.TestClient):
        super().__init__()
        self._client = client
        self._lock = threading.Lock()
        self._builder = HTTPAdapter()

    def send(self, request: requests.PreparedRequest, **_options: Any) -> requests.Response:
        url = urlsplit(request.url)
        if url.path == STREAM_PATH:
            raw = _raw(200, {"Content-Type": "text/event-stream"}, QuietStream())
            return self._builder.build_response(request, raw)
        body = request.body.encode() if isinstance(request.body, str) else request.body
        with self._lock:
            answer = self._client.simulate_request(
                request.method or "GET",
                url.path,
                query_string=url.query or None,
                headers=dict(request.headers),
                body=body,
            )
        raw = _raw(answer.status_code, answer.headers, io.BytesIO(answer.content))
        return self._builder.build_response(request, raw)

    def close(self) -> None:
        self._builder.close()


def _raw(status: int, headers: Mapping[str, str], body: io.IOBase) -> urllib3.HTTPResponse:
    return urllib3.HTTPResponse(
        body=body, headers=dict(headers), status=status, preload_content=False
    )


def in_process_session(client: falcon.testing.TestClient) -> requests.Session:
    """A session whose every ``http://`` request ``client``'s app answers."""
    session = requests.Session()
    session.mount("http://", InProcessAdapter(client))
    return session
