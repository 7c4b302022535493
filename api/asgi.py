"""The ASGI entry point gunicorn loads in each worker: ``api.asgi:app``."""

from __future__ import annotations

from api.observability.logging import configure_logging
from api.server.lifecycle import LifespanMiddleware
from api.server.wiring import build_services
from api.settings import Settings
from api.web.app import create_asgi_app
from api.web.front import EvaluateFront


def get_app() -> EvaluateFront:
    configure_logging()
    services = build_services(Settings.from_env())
    front = create_asgi_app(services)
    front.app.add_middleware(LifespanMiddleware(services))
    return front


app = get_app()
