"""The published warehouse, shared with every host through the event lake's bucket.

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
import os
from pathlib import Path
from typing import TYPE_CHECKING

from api.infra.objectstore import filesystem_for, is_remote
from api.infra.periodic import PeriodicJob
from api.jobs.host_lock import HostLock
from api.serving.services import Services
from api.settings import S3Options

SNAPSHOT_NAME = "_warehouse/warehouse.duckdb"
"""Under the lake's root; the leading underscore keeps it out of Hive partition discovery."""
_CHUNK = 1 << 20
log = logging.getLogger("flagsight.warehouse")

if TYPE_CHECKING:
    import pyarrow.fs as pafs


def _snapshot_object(events_location: str, s3: S3Options) -> tuple[pafs.FileSystem, str]:
    filesystem, base = filesystem_for(events_location, s3)
    return filesystem, f"{base.rstrip('/')}/{SNAPSHOT_NAME}"


def upload_snapshot(local: Path, events_location: str, s3: S3Options) -> str:
    """Put the published file into the bucket; the object's path."""
    filesystem, path = _snapshot_object(events_location, s3)
    with local.open("rb") as source, filesystem.open_output_stream(path) as target:
        while chunk := source.read(_CHUNK):
            target.write(chunk)
    return path


def download_if_newer(events_location: str, local: Path, s3: S3Options) -> bool:
    """Replace ``local`` by the bucket's snapshot when that is newer; True when it did."""
    import pyarrow.fs as pafs

    filesystem, path = _snapshot_object(events_location, s3)
    info = filesystem.get_file_info(path)
    if info.type != pafs.FileType.File or info.mtime is None:
        return False
    remote_ns = info.mtime_ns
    if local.exists() and local.stat().st_mtime_ns >= remote_ns:
        return False
    staging = local.with_name(f".{local.name}.download.{os.getpid()}")
    try:
        with filesystem.open_input_stream(path) as source, staging.open("wb") as target:
            while chunk := source.read(_CHUNK):
                target.write(chunk)
            target.flush()
            os.fsync(target.fileno())
        os.utime(staging, ns=(remote_ns, remote_ns))
        os.replace(staging, local)
    finally:
        staging.unlink(missing_ok=True)
    return True


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
