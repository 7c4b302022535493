"""The admin API's slices (contract sections 5, 9 and 10), and ``add_admin_routes(app,
services)``, which registers each slice's routes under ``/admin/v1``.

A new admin resource is a module of its own (its bodies, answers, resources and ``SLICE``:
``api/web/admin/slices.py``) and one line below; the OpenAPI document follows from it.
"""

from __future__ import annotations

import falcon.asgi

from api.controlplane.errors import ControlPlaneError
from api.serving.services import Services
from api.web.admin import (
    api_keys,
    audit,
    code_references,
    environments,
    explain,
    flags,
    health,
    metrics,
    organizations,
    rollouts,
    schedules,
    segments,
    webhooks,
)
from api.web.admin.auth import AdminAuth
from api.web.admin.errors import handle_control_plane_error
from api.web.admin.slices import Slice

PREFIX = "/admin/v1"

SLICES: tuple[Slice, ...] = (
    organizations.SLICE,
    environments.SLICE,
    api_keys.SLICE,
    segments.SLICE,
    flags.SLICE,
    health.SLICE,
    rollouts.SLICE,
    schedules.SLICE,
    audit.SLICE,
    webhooks.SLICE,
    code_references.SLICE,
    explain.SLICE,
    metrics.SLICE,
)

ROUTES = {route.path: route.resource for piece in SLICES for route in piece.routes}
"""Path template (under ``PREFIX``) -> the resource class serving it."""


def add_admin_routes(
    app: falcon.asgi.App, services: Services, slices: tuple[Slice, ...] = SLICES
) -> None:
    """Register the slices' resources, sharing one ``AdminAuth``, and map store errors."""
    auth = AdminAuth(services.settings, services.store)
    for piece in slices:
        for route in piece.routes:
            app.add_route(PREFIX + route.path, route.resource(services, auth))
    app.add_error_handler(ControlPlaneError, handle_control_plane_error)
