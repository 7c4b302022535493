"""Store errors as the contract's HTTP errors: not found 404, conflict 409, invalid 400, and a
control plane that cannot be reached (PostgreSQL down, a SQLite file locked past its busy
timeout) 503 with ``Retry-After``: the dashboard's pages and the admin API alike."""

from __future__ import annotations

import logging
from typing import Any

import falcon.asgi

from api.controlplane.store import (
    ConflictError,
    ControlPlaneError,
    InvalidError,
    NotFoundError,
    UnavailableError,
)
from api.web.errors import ApiError, BadRequest, Conflict, NotFound, ServiceUnavailable

log = logging.getLogger("flagsight.admin")


UNAVAILABLE_MESSAGE = (
    "The control plane is busy or unavailable; nothing was changed. Retry shortly."
)


def http_error(error: ControlPlaneError) -> ApiError:
    if isinstance(error, UnavailableError):
        return ServiceUnavailable(UNAVAILABLE_MESSAGE)
    if isinstance(error, NotFoundError):
        return NotFound(error.message)
    if isinstance(error, ConflictError):
        return Conflict(error.message)
    if isinstance(error, InvalidError):
        return BadRequest(error.message)
    return ApiError(500, error.message)


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
