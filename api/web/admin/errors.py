"""Store errors as the contract's HTTP errors: not found 404, conflict 409, invalid 400, and a
control plane that cannot be reached (PostgreSQL down, a SQLite file locked past its busy
timeout) 503 with ``Retry-After``: the dashboard's pages and the admin API alike. The status
comes from the error's class, the message from its code (``error_messages``)."""

from __future__ import annotations

import logging
from typing import Any

import falcon.asgi

from api.controlplane.errors import (
    ConflictError,
    ControlPlaneError,
    InvalidError,
    NotFoundError,
    UnavailableError,
)
from api.web.admin.error_messages import message
from api.web.errors import ApiError, BadRequest, Conflict, NotFound, ServiceUnavailable

log = logging.getLogger("flagsight.admin")


def http_error(error: ControlPlaneError) -> ApiError:
    text = message(error)
    if isinstance(error, UnavailableError):
        return ServiceUnavailable(text)
    if isinstance(error, NotFoundError):
        return NotFound(text)
    if isinstance(error, ConflictError):
        return Conflict(text)
    if isinstance(error, InvalidError):
        return BadRequest(text)
    return ApiError(500, text)


async def handle_control_plane_error(
    req: falcon.asgi.Request,
    resp: falcon.asgi.Response,
    error: ControlPlaneError,
    params: dict[str, Any],
) -> None:
    """Falcon error handler: re-raised as an ``ApiError``, rendered by the app's serializer."""
    if isinstance(error, UnavailableError):
        log.warning("control plane unavailable", extra={"reason": str(error), "path": req.path})
    raise http_error(error) from None
