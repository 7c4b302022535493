"""The one place that chooses the backends from the settings.

The embedded single-machine defaults (SQLite control plane, memory-mapped meter, Parquet
files in the data directory) or, with ``FLAGSIGHT_DATABASE_URL``, the PostgreSQL control plane
and meter, and with ``FLAGSIGHT_EVENTS_URI=s3://...`` the lake in object storage. The server
(``api.server.wiring``, ``api.server.sealer_process``), the CLI and the pipeline all open their
backends here, so another deployment swaps one in one module. Drivers that only one choice
needs (psycopg, pyarrow) are imported when that choice is made.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from api.controlplane.store import ControlPlaneStore
from api.metering.meter import Meter
from api.observability.metrics import Metrics
from api.settings import Settings

if TYPE_CHECKING:
    from api.eventlog.sinks import Sink  # pyarrow: imported when a sink is made


def store_for(database_url: str | None, sqlite_path: Path) -> ControlPlaneStore:
    """The control plane, its schema created or migrated: PostgreSQL, shared by every host,
    when ``database_url`` is set; else the SQLite file at ``sqlite_path``."""
    if database_url:
        from api.controlplane.postgres_store import PostgresControlPlaneStore  # psycopg

        return PostgresControlPlaneStore(database_url)
    from api.controlplane.sqlite_store import SqliteControlPlaneStore

    return SqliteControlPlaneStore(sqlite_path)


def open_store(settings: Settings) -> ControlPlaneStore:
    """``store_for`` the settings' database."""
    return store_for(settings.database_url, settings.control_plane_path)


def open_meter(settings: Settings, metrics: Metrics | None = None) -> Meter:
    """The meter: in PostgreSQL, shared by every host, when ``settings.database_url`` is set
    (``docs/metering.md``); else the data directory's memory-mapped file."""
    if settings.database_url:
        from api.metering.postgres_meter import meter_for_database  # psycopg: cluster only

        return meter_for_database(settings.database_url, metrics)
    from api.metering.mmap_meter import MmapMeter

    return MmapMeter(settings.meter_path)


def prepare_meter(settings: Settings) -> None:
    """Run by ``flagsight serve`` before the workers start: the memory-mapped file is
    allocated whole while there is room; the PostgreSQL meter's schema is created."""
    open_meter(settings).close()


def sink_factory(settings: Settings) -> Callable[[], Sink]:
    """Makes the sink for the settings' events location on first use (which imports pyarrow):
    a bucket (``FLAGSIGHT_EVENTS_URI``), or Parquet files in a folder."""

    def make() -> Sink:
        from api.eventlog.sinks import ObjectStoreSink, ParquetSink
        from api.infra.host_identity import host_id
        from api.infra.objectstore import filesystem_for, is_object_store

        location = settings.events_location
        if is_object_store(location):
            filesystem, base = filesystem_for(location, settings.s3)
            return ObjectStoreSink(filesystem, base, host_id(settings.host_id_path))
        return ParquetSink(location)

    return make
