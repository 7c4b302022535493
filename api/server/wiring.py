"""Building one process's ``Services`` from ``Settings``.

The backends themselves are chosen in ``api.backends``, the one place that reads the
settings for that; this module puts one worker's ``Services`` together from them.
"""

from __future__ import annotations

import time

from flagsight_core.conditions import use_expressions
from flagsight_core.hashing import use_batch_hashing
from flagsight_core.ids import EvaluationIdIssuer

from api.backends import open_meter, open_store, sink_factory
from api.controlplane.cache import ConfigCache
from api.eventlog.sealer_lock import sealer_lock_path
from api.eventlog.segmented import SegmentedEventLog
from api.native import expressions, fastpath
from api.observability.metrics import Metrics
from api.serving.services import Services
from api.settings import Settings


def prepare_data_dir(settings: Settings) -> None:
    """Create the data directory's layout; safe to call from every process. Dagster's home is
    the pipeline's: ``flagsight init`` and the pipeline's own start prepare it
    (``api.infra.dagster_home``), never an API worker."""
    for path in (
        settings.data_dir,
        settings.wal_dir,
        settings.meter_path.parent,
    ):
        path.mkdir(parents=True, exist_ok=True)


def build_services(settings: Settings, metrics: Metrics | None = None, clock=time.time) -> Services:
    """Everything one worker needs; background threads start later, in ``start_services``."""
    prepare_data_dir(settings)
    use_expressions(expressions)  # MATCHES through RE2 natively (None: the core's own)
    use_batch_hashing(fastpath)  # many identifiers hashed in one C call (None: mmh3 each)
    metrics = metrics or Metrics()
    store = open_store(settings)
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
            sink=sink_factory(settings),
            retry_cap_s=settings.seal_retry_cap_s,
        ),
        ids=EvaluationIdIssuer(store.signing_key()),
        metrics=metrics,
        clock=clock,
    )
