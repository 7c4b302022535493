"""The published warehouse, shared with every host through the event lake's bucket: this
host's side (``warehouse.shared_snapshot`` holds the object's upload and download).

In the embedded default the API reads the warehouse file the pipeline publishes on the same
machine. With the lake in object storage, the pipeline host also uploads each published
snapshot to ``<events URI>/_warehouse/warehouse.duckdb`` (one PUT: readers see the old object
or the new one, never a part), and on every API host one process (a host lock) checks the
object every ``FLAGSIGHT_WAREHOUSE_POLL_INTERVAL`` seconds (10 by default) and, when it is
newer than the local file, downloads it beside the local file and renames it in. Readers open
the file read-only per request, so a host shows a pipeline run's figures within the poll
interval plus one download: well inside the contract's 60 seconds. The file's size depends on
flag environments and days, not on events, so the download stays small.
"""

from __future__ import annotations

import logging

from api.infra.objectstore import is_remote
from api.infra.periodic import PeriodicJob
from api.jobs.host_lock import HostLock
from api.serving.services import Services
from warehouse.shared_snapshot import download_if_newer

log = logging.getLogger("flagsight.warehouse")


class WarehouseFollower:
    """The per-worker thread that keeps this host's warehouse file current; see the module
    docstring. Idle in the embedded default (the lake is a local folder)."""

    def __init__(self, services: Services):
        self._services = services
        self._lock = HostLock(services.settings.data_dir / "run" / "warehouse-follower.lock")
        self._job = PeriodicJob(
            "flagsight-warehouse",
            services.settings.warehouse_poll_interval_s,
            self.tick,
            log=log,  # the bucket is down or slow: keep the file we have, try again
            failure="warehouse snapshot check failed; keeping the current file",
            first_at_once=True,
            join_timeout_s=10,
        )

    def start(self) -> None:
        if is_remote(self._services.settings.events_location):
            self._job.start()

    def stop(self) -> None:
        self._job.stop()
        self._lock.release()

    def tick(self) -> None:
        settings = self._services.settings
        if self._lock.held() and download_if_newer(
            settings.events_location, settings.warehouse_path, settings.s3
        ):
            self._services.metrics.warehouse_downloads.inc()
            log.info("warehouse snapshot downloaded", extra={"path": str(settings.warehouse_path)})
