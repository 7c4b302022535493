"""The ASGI entry point gunicorn loads in each worker: ``api.asgi:app``."""

from __future__ import annotations

from api.app import create_app
from api.lifecycle import LifespanMiddleware
from api.observability.logging import configure_logging
from api.settings import Settings
from api.wiring import build_services


def get_app():  # noqa: ANN201 - falcon.asgi.App
    configure_logging()
    services = build_services(Settings.from_env())
    app = create_app(services)
    app.add_middleware(LifespanMiddleware(services))
    return app


app = get_app()
