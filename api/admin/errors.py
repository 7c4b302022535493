"""Store errors as the contract's HTTP errors: not found 404, conflict 409, invalid 400."""

from __future__ import annotations

from typing import Any

import falcon.asgi

from api.controlplane.store import ConflictError, ControlPlaneError, InvalidError, NotFoundError
from api.errors import ApiError, BadRequest, Conflict, NotFound


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
