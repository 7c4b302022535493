"""Store errors as the contract's HTTP errors: not found 404, conflict 409, invalid 400, and a
control plane locked past its busy timeout (or briefly unreadable) 503 with ``Retry-After``."""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

import falcon.asgi

from api.controlplane.store import ConflictError, ControlPlaneError, InvalidError, NotFoundError
from api.errors import ApiError, BadRequest, Conflict, NotFound, ServiceUnavailable

log = logging.getLogger("flagsight.admin")


def http_error(error: ControlPlaneError) -> ApiError:
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
    raise http_error(error) from None


async def handle_control_plane_unavailable(
    req: falcon.asgi.Request,
    resp: falcon.asgi.Response,
    error: sqlite3.OperationalError,
    params: dict[str, Any],
) -> None:
    """The SQLite file stayed locked past the busy timeout, or could not be read: retry."""
    log.warning("control plane unavailable", extra={"reason": str(error), "path": req.path})
    raise ServiceUnavailable(
        "The control plane is busy or unavailable; nothing was changed. Retry shortly."
    ) from None
