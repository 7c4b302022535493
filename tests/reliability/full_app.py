"""``complete_app(services)``: ``create_app`` plus every surface it does not wire in yet.

OFREP and the dashboard are being finished beside ``api/app.py``; until ``create_app``
registers them, the reliability tests add them here, so that fuzzing and the security
checks cover every route a finished deployment serves.
"""

from __future__ import annotations

import falcon.asgi

from api.app import create_app
from api.dashboard.routes import add_dashboard_routes
from api.resources.ofrep import add_ofrep_routes
from api.services import Services


def has_route(app: falcon.asgi.App, path: str) -> bool:
    """Whether ``path`` (a literal path) already has a resource in ``app``."""
    return app._router.find(path) is not None


def complete_app(services: Services) -> falcon.asgi.App:
    """``create_app`` with OFREP and the dashboard added when it does not register them yet."""
    app = create_app(services)
    if not has_route(app, "/ofrep/v1/evaluate/flags"):
        add_ofrep_routes(app, services)
    if not has_route(app, "/dashboard/sign-in"):
        add_dashboard_routes(app, services)
    return app
