"""The ASGI entry point gunicorn loads in each worker: ``api.asgi:app``."""

from __future__ import annotations

from api.app import create_asgi_app
from api.front import EvaluateFront
from api.lifecycle import LifespanMiddleware
from api.observability.logging import configure_logging
from api.settings import Settings
from api.wiring import build_services


def get_app() -> EvaluateFront:
    configure_logging()
    services = build_services(Settings.from_env())
    front = create_asgi_app(services)
    front.app.add_middleware(LifespanMiddleware(services))
    return front


app = get_app()
