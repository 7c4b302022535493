"""The ASGI app gunicorn loads for the reliability tests: ``api.asgi`` plus ``complete_app``.

``serve.py`` runs ``flagsight serve`` with this module in place of ``api.asgi:app``; the
master, the worker class and the gunicorn configuration are the production ones.
"""

from __future__ import annotations

import falcon.asgi

from api.lifecycle import LifespanMiddleware
from api.observability.logging import configure_logging
from api.settings import Settings
from api.wiring import build_services
from tests.reliability.full_app import complete_app


def get_app() -> falcon.asgi.App:
    configure_logging()
    services = build_services(Settings.from_env())
    app = complete_app(services)
    app.add_middleware(LifespanMiddleware(services))
    return app


app = get_app()
