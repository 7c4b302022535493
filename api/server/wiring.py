"""Building one process's ``Services`` from ``Settings``.

This is the only place that picks concrete backends: the embedded single-machine defaults
(SQLite control plane, memory-mapped meter, segmented event log), and the PostgreSQL control
plane when ``FLAGSIGHT_DATABASE_URL`` is set. Another deployment swaps them here, not in the
resources.
"""

from __future__ import annotations

import time

from flagsight_core.ids import EvaluationIdIssuer

from api.controlplane.backends import open_store
from api.controlplane.cache import ConfigCache
from api.controlplane.store import ControlPlaneStore
from api.eventlog.sealer import settings_sink
from api.eventlog.sealer_lock import sealer_lock_path
from api.eventlog.segmented import SegmentedEventLog
from api.infra.dagster_home import prepare_dagster_home
from api.metering.meter import Meter
from api.metering.mmap_meter import MmapMeter
from api.observability.metrics import Metrics
from api.serving.services import Services
from api.settings import Settings


def prepare_data_dir(settings: Settings) -> None:
    """Create the data directory's layout; safe to call from every process."""
    for path in (
        settings.data_dir,
        settings.wal_dir,
        settings.meter_path.parent,
    ):
        path.mkdir(parents=True, exist_ok=True)
    prepare_dagster_home(settings.dagster_home, settings.database_url)


def open_control_plane(settings: Settings) -> ControlPlaneStore:
    """The control plane, its schema created or migrated: PostgreSQL, shared by every host,
    when ``settings.database_url`` is set; else the data directory's SQLite file."""
    return open_store(settings.database_url, settings.control_plane_path)


def open_meter(settings: Settings, metrics: Metrics) -> Meter:
    """The meter: in PostgreSQL, shared by every host, when ``settings.database_url`` is set
    (``docs/metering.md``); else the data directory's memory-mapped file."""
    if settings.database_url:
        from api.metering.postgres_meter import meter_for_database  # psycopg: cluster only

        return meter_for_database(settings.database_url, metrics)
    return MmapMeter(settings.meter_path)


def prepare_meter(settings: Settings) -> None:
    """Run by ``flagsight serve`` before the workers start: the memory-mapped file is
    allocated whole while there is room; the PostgreSQL meter's schema is created."""
    if settings.database_url:
        from api.metering.postgres_meter import meter_for_database

        meter_for_database(settings.database_url).close()
    else:
        MmapMeter(settings.meter_path).close()


def build_services(settings: Settings, metrics: Metrics | None = None, clock=time.time) -> Services:
    """Everything one worker needs; background threads start later, in ``start_services``."""
    prepare_data_dir(settings)
    metrics = metrics or Metrics()
    store = open_control_plane(settings)
    return Services(
        settings=settings,
        store=store,
        config=ConfigCache(store, settings.config_poll_interval_s, metrics),
        meter=open_meter(settings, metrics),
        event_log=SegmentedEventLog(
            settings.wal_dir,
            settings.events_location,
            fsync_interval_s=settings.fsync_interval_s,
            seal_interval_s=settings.seal_interval_s,
            metrics=metrics,
            clock=clock,
            sealer_lock=sealer_lock_path(settings),
            sink=settings_sink(settings),
            retry_cap_s=settings.seal_retry_cap_s,
        ),
        ids=EvaluationIdIssuer(store.signing_key()),
        metrics=metrics,
        clock=clock,
    )
