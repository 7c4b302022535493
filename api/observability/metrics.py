"""Prometheus metrics for operators.

Under gunicorn every worker is a process, so ``flagsight serve`` sets
``PROMETHEUS_MULTIPROC_DIR`` (``$FLAGSIGHT_DATA_DIR/run/prometheus``) before anything imports
prometheus_client, and ``/metrics`` aggregates all workers. In a single process (tests) the
same ``Metrics`` object works on its own registry.

prometheus_client keeps each process's figures in memory-mapped files it makes sparse; on a
full disk the first store into them kills the process with SIGBUS. So each process allocates
its files whole before prometheus_client maps them (``prepare_process_files``); on a full disk
it takes one of the spare sets the master keeps (``reserve_spare_files``), so a worker replaced
while the disk is full still counts what it loses. When there is none, the process keeps its
figures in memory and is missing from ``/metrics`` (a warning says so) instead of dying.
"""

from __future__ import annotations

import contextlib
import logging
import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as _mp
from prometheus_client import values as _values

log = logging.getLogger("flagsight.metrics")

PROCESS_FILE_BYTES = {
    "counter": 128 * 1024,
    "histogram": 64 * 1024,
    "gauge_livemin": 16 * 1024,
    "gauge_livesum": 16 * 1024,
    "gauge_max": 16 * 1024,
}
"""The multi-process files ``Metrics`` makes in each process (one per metric type and gauge
mode it uses; ``tests/observability`` checks that these are all it creates) and the bytes
allocated for each. A worker that served every route, status and outcome filled 7 KB of its
counter file, 5 KB of its histogram file and 1 KB of each gauge file
(``tests/observability/test_metrics.py`` measures it), so each has ten times the room at least;
prometheus_client only grows a file, sparsely, past this. 240 KB a process: a small data
directory is not spent on empty pages."""
PROCESS_FILE_PREFIXES = tuple(PROCESS_FILE_BYTES)


SPARE_SETS = 2
"""Sets of files the master keeps allocated for workers that start on a full disk."""


def _allocate(path: str, size: int) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        if os.fstat(fd).st_size < size:
            os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)


def _allocate_set(directory: str, name: str) -> bool:
    """Allocate the files of one process (``counter_{name}.db``, ...) whole; False, and none
    left behind, if there is no room (a file of size 0 would be made sparse)."""
    made: list[str] = []
    try:
        for prefix, size in PROCESS_FILE_BYTES.items():
            path = os.path.join(directory, f"{prefix}_{name}.db")
            made.append(path)
            _allocate(path, size)
    except OSError:
        for path in made:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return False
    return True


def reserve_spare_files(directory: str, sets: int = SPARE_SETS) -> int:
    """Keep ``sets`` spare sets allocated (``counter_spare0.db``, ...), while there is room:
    a worker that starts on a full disk takes one (``prepare_process_files``). Called by the
    master before each worker starts. Empty files add nothing to ``/metrics``. Returns how
    many sets are ready."""
    return sum(_allocate_set(directory, f"spare{index}") for index in range(sets))


def _adopt_spare_set(directory: str, pid: int) -> bool:
    """Rename a spare set to this process's names. Renaming its first file claims the set,
    so two workers starting at once never share one."""
    prefixes = list(PROCESS_FILE_BYTES)
    for index in range(SPARE_SETS):
        spare = f"spare{index}"
        try:
            os.rename(
                os.path.join(directory, f"{prefixes[0]}_{spare}.db"),
                os.path.join(directory, f"{prefixes[0]}_{pid}.db"),
            )
        except OSError:
            continue
        for prefix in prefixes[1:]:
            os.rename(
                os.path.join(directory, f"{prefix}_{spare}.db"),
                os.path.join(directory, f"{prefix}_{pid}.db"),
            )
        return True
    return False


def prepare_process_files(directory: str, pid: int) -> bool:
    """This process's multi-process files, allocated whole before prometheus_client maps
    them: new ones, or on a full disk a spare set the master reserved. False when neither
    is possible: the process then keeps its figures in memory, out of ``/metrics``."""
    if _allocate_set(directory, str(pid)):
        return True
    try:
        adopted = _adopt_spare_set(directory, pid)
    except OSError:
        adopted = False
    if adopted:
        log.warning(
            "no room for new metrics files; this process took a spare set reserved at start",
            extra={"directory": directory},
        )
        return True
    log.warning(
        "no room for this process's metrics files; its figures stay out of /metrics",
        extra={"directory": directory},
    )
    return False


class Metrics:
    """Every metric flagsight exports, registered on one registry."""

    def __init__(self, registry: CollectorRegistry | None = None):
        directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if directory and not prepare_process_files(directory, os.getpid()):
            # prometheus_client picks each value's class from this module attribute when a
            # metric is made: in-memory values for this process, no file to fault on.
            _values.ValueClass = _values.MutexValue
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "flagsight_http_requests", "HTTP requests answered", ["route", "status"], registry=r
        )
        self.request_seconds = Counter(
            "flagsight_http_request_seconds",
            "Time spent answering HTTP requests (divide by flagsight_http_requests for the mean)",
            ["route"],
            registry=r,
        )
        self.bulk_evaluate_seconds = Histogram(
            "flagsight_bulk_evaluate_seconds",
            "Time a worker spends answering one bulk evaluate, from routing to the encoded"
            " answer: body, validation, metering, evaluation, ids, event log, encoding",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=r,
        )
        self.bulk_evaluate_users = Counter(
            "flagsight_bulk_evaluate_users", "Distinct users answered by bulk evaluate", registry=r
        )
        self.evaluations = Counter(
            "flagsight_evaluations",
            "Evaluations answered, by outcome (RULE:value, NO_MATCH or the error type)",
            ["outcome"],
            registry=r,
        )
        self.feedback_events = Counter(
            "flagsight_feedback_events", "Feedback events accepted", registry=r
        )
        self.events_logged = Counter(
            "flagsight_events_logged", "Events appended to the event log", ["type"], registry=r
        )
        self.events_lost = Counter(
            "flagsight_events_lost",
            "Evaluation events answered but not logged because the event log refused writes",
            ["type"],
            registry=r,
        )
        self.event_log_errors = Counter(
            "flagsight_event_log_errors", "Failed writes to the event log", registry=r
        )
        self.files_sealed = Counter(
            "flagsight_event_files_sealed",
            "Parquet files sealed from the log",
            ["type"],
            registry=r,
        )
        self.seal_failures = Counter(
            "flagsight_event_seal_failures",
            "Failed attempts to seal a write-ahead segment: store_unavailable (the event lake "
            "refused or could not be reached; retried with backoff) or error",
            ["reason"],
            registry=r,
        )
        self.lake_unreachable = Gauge(
            "flagsight_event_lake_unreachable",
            "1 while the sealer backs off because the event lake is unreachable",
            registry=r,
            multiprocess_mode="max",
        )
        self.backlog_segments = Gauge(
            "flagsight_event_log_backlog_segments",
            "Write-ahead segments not yet sealed (the workers' active ones included)",
            registry=r,
            multiprocess_mode="max",
        )
        self.backlog_bytes = Gauge(
            "flagsight_event_log_backlog_bytes",
            "Bytes of write-ahead segments not yet sealed",
            registry=r,
            multiprocess_mode="max",
        )
        self.backlog_age = Gauge(
            "flagsight_event_log_backlog_age_seconds",
            "Time since the last write to the oldest unsealed write-ahead segment holding an event",
            registry=r,
            multiprocess_mode="max",
        )
        self.plan_limit_refusals = Counter(
            "flagsight_plan_limit_refusals", "Evaluations refused at the hard threshold", registry=r
        )
        self.config_reloads = Counter(
            "flagsight_config_reloads", "Control-plane reloads by a worker", registry=r
        )
        self.schedules_applied = Counter(
            "flagsight_schedules_applied",
            "Scheduled flag changes applied (or failed) by this server",
            ["state"],
            registry=r,
        )
        self.webhook_deliveries = Counter(
            "flagsight_webhook_deliveries",
            "Webhook delivery attempts by outcome: delivered (2xx), retry, failed (given up)",
            ["outcome"],
            registry=r,
        )
        self.webhook_delivery_seconds = Histogram(
            "flagsight_webhook_delivery_seconds",
            "Time from an event to its delivery (2xx), retries included",
            buckets=(0.1, 0.5, 1, 5, 30, 60, 300, 3600, 86400),
            registry=r,
        )
        self.webhook_outbox_pending = Gauge(
            "flagsight_webhook_outbox_pending",
            "Deliveries neither delivered nor given up, as the deliverer last counted them",
            registry=r,
            multiprocess_mode="max",
        )
        self.warehouse_downloads = Counter(
            "flagsight_warehouse_downloads",
            "Warehouse snapshots this host downloaded from the lake's bucket",
            registry=r,
        )
        self.meter_round_trips = Counter(
            "flagsight_meter_round_trips",
            "Round trips of the PostgreSQL meter by operation: grant (a lease ran out, or an"
            " evaluation near the hard threshold), report (leases' heartbeat), usage (a read)",
            ["operation"],
            registry=r,
        )
        self.meter_outage = Gauge(
            "flagsight_meter_outage",
            "1 while a worker cannot reach the PostgreSQL meter and serves on leases and credit",
            registry=r,
            multiprocess_mode="max",
        )
        self.meter_credit = Counter(
            "flagsight_meter_credit_evaluations",
            "Evaluations served on credit while the PostgreSQL meter was unreachable (added to"
            " the month's count when it is back)",
            registry=r,
        )
        self.streams_open = Gauge(
            "flagsight_streams_open",
            "Open ruleset and OFREP event streams (GET /v1/stream, /ofrep/v1/stream)",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.stream_events = Counter(
            "flagsight_stream_events",
            "Change events sent on open streams (one per stream and change)",
            registry=r,
        )
        self.local_quota = Counter(
            "flagsight_local_quota_evaluations",
            "Quota local SDKs were granted, and gave back unspent, by operation",
            ["operation"],
            registry=r,
        )
        self.local_reported = Counter(
            "flagsight_local_evaluations_reported",
            "Local evaluations SDKs reported and the event log took",
            registry=r,
        )
        self._config_version: Gauge | None = None

    def serve_config_version(self, version: int) -> None:
        """Report the control-plane version this process serves (``flagsight_config_version``).

        The gauge is made on first use, so only the processes that serve (the workers) show
        in it: a gauge made in every process would add a 0 from each that serves nothing (the
        master, the sealer), and the minimum over processes would always read 0. The minimum
        over live workers is the version every worker has reached.
        """
        gauge = self._config_version
        if gauge is None:
            gauge = self._config_version = Gauge(
                "flagsight_config_version",
                "Control-plane version every live worker serves (the oldest of them)",
                registry=self.registry,
                multiprocess_mode="livemin",
            )
        gauge.set(version)


def render(metrics: Metrics) -> tuple[bytes, str]:
    """The exposition text: all workers' figures when running multi-process."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        _mp.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(metrics.registry), CONTENT_TYPE_LATEST
