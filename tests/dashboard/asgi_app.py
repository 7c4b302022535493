"""The production ASGI app (``api.asgi``) plus the dashboard routes, for real-server tests.

Used only while ``api/app.py`` does not call ``add_dashboard_routes`` itself: ``dashboard_server``
in ``conftest.py`` probes the real ``flagsight serve`` first and falls back to this module.
"""

from __future__ import annotations

import falcon.asgi

from api.app import create_app
from api.dashboard.routes import add_dashboard_routes
from api.lifecycle import LifespanMiddleware
from api.observability.logging import configure_logging
from api.settings import Settings
from api.wiring import build_services


def get_app() -> falcon.asgi.App:
    configure_logging()
    services = build_services(Settings.from_env())
    app = create_app(services)
    add_dashboard_routes(app, services)
    app.add_middleware(LifespanMiddleware(services))
    return app


app = get_app()
