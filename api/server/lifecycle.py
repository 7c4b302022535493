"""Starting and stopping a worker's background work with the ASGI lifespan.

Threads must start in the worker after gunicorn forks it, and a SIGTERM must flush, fsync and
seal the event log before the process exits: the lifespan startup/shutdown events give both.
"""

from __future__ import annotations

import atexit
import gc
import logging
from typing import Any, Protocol

from api import native
from api.infra.periodic import PeriodicJob
from api.jobs.schedules import ScheduleApplier, apply_due
from api.jobs.warehouse_snapshot import WarehouseFollower
from api.jobs.webhooks import WebhookDeliverer
from api.serving.services import Services

log = logging.getLogger("flagsight.lifecycle")


class Housekeeping:
    """Every fsync interval: tallies into Prometheus, meter leases back, meter pages to disk."""

    def __init__(self, services: Services):
        self._services = services
        self._job = PeriodicJob(
            "flagsight-housekeeping",
            services.settings.fsync_interval_s,
            self.tick,
            log=log,
            failure="housekeeping failed; retrying",
        )

    def start(self) -> None:
        self._job.start()

    def tick(self) -> None:
        self._services.tallies.flush()
        flush = getattr(self._services.meter, "flush", None)
        if flush is not None:
            flush()

    def stop(self) -> None:
        self._job.stop()


class Background(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


def start_services(services: Services) -> list[Background]:
    """Start a worker's threads. Schedules that fell due while the service was down are
    applied first, so the worker's first answers already serve them. The config is reloaded
    whether or not this worker applied them: another worker may have, after this one loaded."""
    try:
        apply_due(services)
    except Exception:  # the applier thread retries within a tick
        log.exception("applying due schedules at start-up failed")
    try:
        services.config.refresh()
    except Exception:  # the poller retries within a tick
        log.exception("reloading the control plane at start-up failed")
    services.config.start()
    services.event_log.start()
    threads: list[Background] = [
        Housekeeping(services),
        ScheduleApplier(services),
        WebhookDeliverer(services),
        WarehouseFollower(services),
    ]
    for thread in threads:
        thread.start()
    return threads


def stop_services(services: Services, threads: list[Background]) -> None:
    for thread in threads:
        thread.stop()
    services.tallies.flush()
    services.event_log.close()
    services.config.stop()
    services.meter.close()


class LifespanMiddleware:
    """Falcon ASGI middleware: start background work at startup, drain it at shutdown."""

    def __init__(self, services: Services):
        self._services = services
        self._threads: list[Background] = []

    async def process_startup(self, scope: dict[str, Any], event: dict[str, Any]) -> None:
        self._threads = start_services(self._services)
        # Everything built so far (modules, config, caches) lives as long as the worker: keep
        # it out of the cyclic collector's generations, so collections only walk new objects.
        gc.collect()
        gc.freeze()
        # Unfrozen again however the worker exits: a quick shutdown (SIGINT, SIGQUIT) skips
        # ``process_shutdown``, and what stays frozen is never collected at exit, which DuckDB's
        # bindings report as about forty lines of "nanobind: leaked instances".
        atexit.register(gc.unfreeze)
        log.info(
            "worker started",
            extra={
                "data_dir": str(self._services.settings.data_dir),
                "native_fastpath": native.fastpath is not None,
            },
        )

    async def process_shutdown(self, scope: dict[str, Any], event: dict[str, Any]) -> None:
        stop_services(self._services, self._threads)
        gc.unfreeze()  # let extension modules release their objects at exit, as they expect
        log.info("worker stopped; event log sealed")
