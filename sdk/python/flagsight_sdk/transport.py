"""HTTP with a whole-request deadline over one keep-alive session.

``requests``' own timeouts bound each phase (connect, each socket read), so a server that
answers slowly, or drips its body, could hold a caller far past them. Here the deadline covers
the request as a whole: urllib3's ``total`` timeout bounds connect plus the wait for headers,
and the body is read chunk by chunk with the socket's timeout set to what is left.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import requests
import urllib3
from requests.adapters import HTTPAdapter

MAX_BODY_BYTES = 32 * 1024 * 1024
_CHUNK = 64 * 1024


def checked_base_url(base_url: str) -> str:
    """``base_url`` without its trailing slashes, or ValueError at construction: a URL without
    ``http://`` or ``https://`` and a host would make every later call fail, each one quietly
    answering False, so it is refused like a misspelled option."""
    parts = urllib3.util.parse_url(base_url) if isinstance(base_url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.host:
        raise ValueError(
            f"base_url must be an http:// or https:// URL with a host, e.g. "
            f"https://flags.example.com (got {base_url!r})"
        )
    return base_url.rstrip("/")


class DeadlineExceeded(requests.Timeout):
    """The whole request took longer than its deadline."""


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


def new_session(pool_size: int = 10) -> requests.Session:
    """A session whose connections are kept alive and reused across threads."""
    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=2, pool_maxsize=pool_size, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def json_body(body: Any) -> bytes:
    """``body`` as JSON, UTF-8 as it is: an escaped character is six bytes, and a batch of 500
    events whose users are 700 accented letters each passed the service's 2 MiB limit escaped.
    A string Python cannot write as UTF-8 (a lone surrogate) is written escaped, for the
    service to refuse. ``json``, which takes what the application passes as it always did (a
    numpy scalar, a ``str`` subclass) and refuses what JSON has no form for (a ``Decimal``,
    a ``datetime``), as the local mode refuses them."""
    try:
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body, separators=(",", ":")).encode("utf-8")


_MSGSPEC_JSON = msgspec.json.Encoder().encode


def sdk_made_body(body: Any) -> bytes:
    """``json_body`` for a body the SDK made itself of ``str``, ``int``, ``float``, ``bool``,
    ``None``, lists and dicts alone (a local client's evaluation reports), in msgspec: a batch
    of 5,000 reports took 9.4 ms to write with ``json.dumps``, in C that lets no other thread
    of the application run, against 1.2 ms (``bench/history.md``, "Local evaluate's tail")."""
    try:
        return _MSGSPEC_JSON(body)
    except (TypeError, UnicodeEncodeError):  # not of the SDK's making after all
        return json_body(body)


def post_json(
    session: requests.Session,
    url: str,
    body: Any,
    headers: dict[str, str],
    timeout_s: float,
    encode: Callable[[Any], bytes] = json_body,
) -> HttpAnswer:
    """POST ``body`` as JSON (``encode``); raises ``requests.RequestException`` (incl. on the
    deadline)."""
    headers = {**headers, "Content-Type": "application/json"}
    return request(session, "POST", url, headers, timeout_s, encode(body))


def request(
    session: requests.Session,
    method: str,
    url: str,
    headers: dict[str, str],
    timeout_s: float,
    data: bytes | None = None,
) -> HttpAnswer:
    """One request whose whole answer arrives within ``timeout_s``, or
    ``requests.RequestException``."""
    deadline = time.monotonic() + timeout_s
    response = session.request(
        method,
        url,
        data=data,
        headers=headers,
        timeout=urllib3.Timeout(total=timeout_s),
        stream=True,
    )
    try:
        content = _read_within(response, deadline)
    except BaseException:
        response.close()  # the connection is in an unknown state: never reuse it
        raise
    response.raw.release_conn()  # read to the end: back to the pool, kept alive
    return HttpAnswer(response.status_code, content, dict(response.headers))


def _read_within(response: requests.Response, deadline: float) -> bytes:
    raw = response.raw
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded("the answer did not arrive within the timeout")
        _limit_socket_wait(raw, remaining)
        try:
            chunk = raw.read1(_CHUNK, decode_content=True)  # whatever has arrived, not a full chunk
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError) as exc:
            raise DeadlineExceeded(str(exc)) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise requests.ConnectionError(str(exc)) from exc
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise requests.ConnectionError(f"answer larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)


def _limit_socket_wait(raw: urllib3.HTTPResponse, remaining: float) -> None:
    """Let no single socket read outlast the deadline (best effort: private structures)."""
    connection = getattr(raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        sock.settimeout(max(remaining, 0.001))
