"""The HTTP errors of the contract and the one serializer that renders them.

Every error that is not an evaluate outcome answers
``{"status": N, "error": "<reason phrase>", "message": "<what is wrong>"}``. Falcon's own
errors (404 for an unknown path, 405, ...) go through the same serializer, so a client sees
one shape whatever raised it.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import falcon
import msgspec

FRONT_FAILURE = "flagsight.front.failure"
"""ASGI scope key under which what serving raised before Falcon (in ``api.web.front``, or in the
worker's call of its ``answer_now``) is handed to Falcon's evaluate route, which raises it for
Falcon's error handlers to answer, log and count."""


class HandedOn(Exception):  # noqa: N818 - not an error of its own: it carries one
    """Serving raised ``failure`` in ``answer_now``: the worker hands the request to the ASGI
    app with it in ``scope[FRONT_FAILURE]``. Anything else ``answer_now`` raises is a fault
    of the answer itself, which the worker answers as gunicorn answers a failing app."""

    def __init__(self, failure: Exception):
        super().__init__(failure)
        self.failure = failure


UNAUTHORIZED_MESSAGE = "Missing or invalid Authorization header"
INSIGHTS_DISABLED_MESSAGE = "Insights feature is not enabled for this environment"

_DEFAULT_MESSAGES = {
    400: "The request is invalid",
    401: UNAUTHORIZED_MESSAGE,
    403: "Forbidden",
    404: "No resource at this path",
    405: "This method is not allowed on this path",
    409: "A resource with this key already exists",
    413: "The request body is too large",
    415: "The request body must be application/json",
    429: "Too many requests",
    503: "The service cannot take this request now; retry later",
}


class ApiError(falcon.HTTPError):
    """An error with the contract's body; ``message`` names what is wrong."""

    def __init__(self, status: int, message: str | None = None, *, headers: Any = None):
        super().__init__(
            status, description=message or _DEFAULT_MESSAGES.get(status), headers=headers
        )

    def to_dict(self, obj_type: type = dict) -> dict[str, Any]:
        return error_body(self.status_code, self.description)


class BadRequest(ApiError):
    def __init__(self, message: str):
        super().__init__(400, message)


class Unauthorized(ApiError):
    def __init__(self) -> None:
        super().__init__(401, UNAUTHORIZED_MESSAGE)


class Forbidden(ApiError):
    def __init__(self, message: str):
        super().__init__(403, message)


class NotFound(ApiError):
    def __init__(self, message: str):
        super().__init__(404, message)


class Conflict(ApiError):
    def __init__(self, message: str):
        super().__init__(409, message)


class PayloadTooLarge(ApiError):
    def __init__(self, limit: int):
        super().__init__(413, f"The request body is larger than {limit} bytes")


class UnsupportedMediaType(ApiError):
    def __init__(self) -> None:
        super().__init__(415, "The request body must be application/json (Content-Type header)")


class TooManyStreams(ApiError):
    def __init__(self, limit: int, retry_after_s: int):
        super().__init__(
            429,
            f"This API key holds {limit} event streams on this host, the most it may;"
            " close one or retry later",
            headers={"Retry-After": str(retry_after_s)},
        )


class ServiceUnavailable(ApiError):
    def __init__(self, message: str, retry_after_s: int = 1):
        super().__init__(503, message, headers={"Retry-After": str(retry_after_s)})


_STATUS_LINE_PHRASES = {413: "Payload Too Large"}
"""Where gunicorn, which writes the status line (an ASGI app sends only the code), words a
status otherwise than Falcon does: RFC 7231's phrase, which RFC 9110 renamed "Content Too
Large". The body says what the status line says, on every surface."""


def reason_phrase(status: int) -> str:
    """The reason phrase of the status line the server sends for ``status``."""
    phrase = _STATUS_LINE_PHRASES.get(status)
    return phrase or falcon.code_to_http_status(status).split(" ", 1)[1]


def error_body(status: int, message: str | None) -> dict[str, Any]:
    """The contract's error body for ``status``: the same phrase as the status line."""
    return {
        "status": status,
        "error": reason_phrase(status),
        "message": message or _DEFAULT_MESSAGES.get(status, HTTPStatus(status).description),
    }


def serialize_error(req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError) -> None:
    """Falcon error serializer: always JSON, always the contract's shape."""
    resp.data = msgspec.json.encode(error_body(exc.status_code, exc.description))
    resp.content_type = falcon.MEDIA_JSON
    resp.append_header("Vary", "Accept")
