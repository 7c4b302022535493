"""Operations endpoints: liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import os

import falcon
import falcon.asgi

from api.jsonio import write_json
from api.observability.metrics import render
from api.services import Services


class HealthResource:
    """Liveness: the process answers. No dependencies checked, so it never flaps."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        write_json(resp, {"status": "ok"})


class ReadyResource:
    """Readiness: the control plane answers and the event log directory can be written."""

    def __init__(self, services: Services):
        self._services = services

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        checks = {"controlPlane": self._control_plane(), "eventLog": self._event_log()}
        ready = all(v == "ok" for v in checks.values())
        write_json(
            resp,
            {"status": "ready" if ready else "not ready", "checks": checks},
            200 if ready else 503,
        )

    def _control_plane(self) -> str:
        try:
            self._services.store.config_version()
        except Exception as exc:  # readiness reports any failure rather than raising
            return f"error: {exc}"
        return "ok"

    def _event_log(self) -> str:
        wal_dir = self._services.settings.wal_dir
        if wal_dir.is_dir() and os.access(wal_dir, os.W_OK):
            return "ok"
        return f"error: {wal_dir} is not writable"


class MetricsResource:
    def __init__(self, services: Services):
        self._services = services

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        # This worker's figures up to now; the other workers' are at most a second behind.
        self._services.tallies.flush()
        flush_counts = getattr(self._services.event_log, "flush_counts", None)
        if flush_counts is not None:
            flush_counts()
        body, content_type = render(self._services.metrics)
        resp.data = body
        resp.content_type = content_type
