"""A small client of the admin API (``/admin/v1``), for the ``flagsight`` CLI's everyday commands.

Why over HTTP rather than by opening the control plane: the commands must work against any
running service (another host, several hosts sharing PostgreSQL) and go through exactly what
every admin client goes through: the token check, validation, the audit log, propagation to
every worker, and the contract's errors. Why the standard library (``urllib``): it adds no
dependency and keeps the command quick to start.

The token travels only in the ``Authorization`` header: it is never part of a message, and
redirects are not followed, so it is never sent to a host the user did not name.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from email.message import Message
from http import HTTPStatus
from typing import Any
from urllib.parse import quote, urlsplit

ADMIN_PREFIX = "/admin/v1"
USER_AGENT = "flagsight-cli"


class InvalidBaseUrl(ValueError):
    """A base URL the client refuses before sending anything (no scheme, no host, ...)."""


class ServiceUnreachable(Exception):
    """No usable answer: refused connection, unknown host, timeout, or an answer that is not
    HTTP or not JSON (the URL names something else than flagsight)."""


class AdminApiError(Exception):
    """A non-2xx answer, with the contract's error body ``{status, error, message}``.

    ``body`` is the answer's JSON as sent, for ``--json`` output; an answer that is not the
    contract's body (a proxy's HTML page, say) gets one made from its status line."""

    def __init__(self, status: int, error: str, message: str, body: dict[str, Any]):
        super().__init__(f"{status} {error}: {message}")
        self.status = status
        self.error = error
        self.message = message
        self.body = body


def check_base_url(raw: str, *, source: str = "--url") -> str:
    """``raw`` without its trailing slash, or ``InvalidBaseUrl`` saying what is wrong.

    A URL without a scheme (``localhost:8000``) would otherwise fail on every call with an
    obscure message, so it is refused up front, as a misspelled option would be."""
    text = raw.strip()
    parts = urlsplit(text)
    if "://" not in text:
        raise InvalidBaseUrl(
            f"{source} {raw!r} has no scheme: write it with http:// or https://"
            f" (for example http://{text or '127.0.0.1:8000'})"
        )
    if parts.scheme not in ("http", "https"):
        raise InvalidBaseUrl(f"{source} must start with http:// or https://, not {parts.scheme}://")
    if "@" in parts.netloc:
        raise InvalidBaseUrl(f"{source} must not carry user information (user:password@)")
    if not parts.hostname:
        raise InvalidBaseUrl(f"{source} {raw!r} has no host")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise InvalidBaseUrl(f"{source} {raw!r} has an invalid port") from None
    if parts.query or parts.fragment:
        raise InvalidBaseUrl(f"{source} {raw!r} must not have a query or fragment")
    return text.rstrip("/")


def segment(value: str) -> str:
    """``value`` as one path segment: a key or id typed by a user never reaches another path."""
    return quote(value, safe="")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: urllib would resend the Authorization header to the new location."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


@dataclass(frozen=True)
class AdminClient:
    """Calls to one service at ``base_url`` (already checked by ``check_base_url``)."""

    base_url: str
    token: str = field(repr=False)
    timeout_s: float = 30.0

    def get(self, path: str) -> Any:
        return self.call("GET", ADMIN_PREFIX + path)[1]

    def put(self, path: str, body: dict[str, Any]) -> Any:
        return self.call("PUT", ADMIN_PREFIX + path, body)[1]

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.call("POST", ADMIN_PREFIX + path, body)[1]

    def delete(self, path: str) -> None:
        self.call("DELETE", ADMIN_PREFIX + path)

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        authorize: bool = True,
        accept: tuple[int, ...] = (),
    ) -> tuple[int, Any]:
        """``(status, JSON answer or None)``; ``AdminApiError`` for an error status not in
        ``accept`` (``/readyz`` answers 503 with a body worth showing), ``ServiceUnreachable``
        when nothing answers."""
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if authorize:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(
            self.base_url + path, data=data, headers=headers, method=method
        )
        try:
            with _OPENER.open(request, timeout=self.timeout_s) as answer:
                return answer.status, self._decode(answer.read())
        except urllib.error.HTTPError as failure:
            status, raw = failure.code, failure.read()
            failure.close()
            if status in accept:
                return status, self._decode(raw)
            raise self._api_error(status, raw, failure.headers) from None
        except (OSError, http.client.HTTPException) as failure:  # URLError is an OSError
            reason = getattr(failure, "reason", None) or failure or type(failure).__name__
            raise ServiceUnreachable(f"cannot reach {self.base_url}: {reason}") from None

    def _decode(self, raw: bytes) -> Any:
        try:
            return json.loads(raw) if raw.strip() else None
        except ValueError:
            raise ServiceUnreachable(
                f"{self.base_url} answered with something that is not JSON: is it flagsight?"
            ) from None

    def _api_error(self, status: int, raw: bytes, headers: Message) -> AdminApiError:
        """The contract's error body when the answer has one; else one saying what came."""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            error = str(body.get("error") or _phrase(status))
            return AdminApiError(status, error, body["message"], body)
        if 300 <= status < 400:
            message = (
                f"{self.base_url} redirects to {headers.get('Location')}; give that URL instead"
                " (redirects are not followed)"
            )
        else:
            kind = headers.get_content_type() if raw else "empty"
            message = f"not a flagsight error body ({kind}): is {self.base_url} flagsight?"
        body = {"status": status, "error": _phrase(status), "message": message}
        return AdminApiError(status, body["error"], message, body)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
