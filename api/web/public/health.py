"""Operations endpoints: liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import os

import falcon
import falcon.asgi

from api.observability.metrics import render
from api.serving.services import Services
from api.web.jsonio import write_json


class HealthResource:
    """Liveness: the process answers. No dependencies checked, so it never flaps."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        write_json(resp, {"status": "ok"})


MIN_FREE_BYTES = 1024 * 1024
"""Below this much free space where the event log writes, a request's frame may not fit (most
are well under a kilobyte; a full bulk feedback, about a megabyte): feedback may answer 503,
so the server reports itself not ready. It is ready again as soon as there is room: no write needs
to succeed first, so a server that gets no traffic while unready still comes back."""


class ReadyResource:
    """Readiness: the control plane answers and the event log can take writes: it reports
    not ready exactly when feedback would answer 503 (or a frame may no longer fit)."""

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
        reason = self._services.event_log.unready_reason()
        if reason is not None:
            return f"error: {reason}; feedback is refused with 503"
        wal_dir = self._services.settings.wal_dir
        if not (wal_dir.is_dir() and os.access(wal_dir, os.W_OK)):
            return f"error: {wal_dir} is not writable"
        disk = os.statvfs(wal_dir)
        free = disk.f_bavail * disk.f_frsize
        if free < MIN_FREE_BYTES:
            return (
                f"error: {free} bytes free under {wal_dir}, under the {MIN_FREE_BYTES} kept in"
                " reserve: the event log may soon refuse writes (feedback would then answer 503)"
            )
        return "ok"


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
