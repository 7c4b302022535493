"""Resources: where the lake, the working database, the published warehouse and the control
plane live. Locations come from ``Settings`` (see ``definitions.py``), never from globals."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
from flagsight_core import first_split
from pydantic import PrivateAttr

from api.backends import store_for
from api.controlplane.model import MetricFollow
from api.controlplane.store import ControlPlaneStore
from api.settings import S3Options
from pipelines.lake import Lake, LakeFile, open_lake
from warehouse.lifecycle import LifecycleThresholds
from warehouse.migrations import migrate


class EventLakeResource(dg.ConfigurableResource):
    """The Hive-partitioned Parquet event lake written by the API hosts: a folder, or every
    host's objects in S3-compatible storage (``s3://bucket/prefix``) with these options."""

    events_location: str
    s3_region: str | None = None
    s3_endpoint_url: str | None = None
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = None
    s3_session_token: str | None = None
    s3_connect_timeout_s: float = 2.0
    s3_request_timeout_s: float = 10.0

    def s3_options(self) -> S3Options:
        return S3Options(
            access_key_id=self.s3_access_key_id,
            secret_access_key=self.s3_secret_access_key,
            session_token=self.s3_session_token,
            region=self.s3_region,
            endpoint_url=self.s3_endpoint_url,
            connect_timeout_s=self.s3_connect_timeout_s,
            request_timeout_s=self.s3_request_timeout_s,
        )

    def lake(self) -> Lake:
        return open_lake(self.events_location, self.s3_options())

    def sealed_files(self, event_type: str) -> list[LakeFile]:
        """Every sealed file of ``event_type`` in the lake (``Lake.sealed_files``).

        Files being written are never matched: they start with ``.`` or end with ``.tmp``.
        """
        return self.lake().sealed_files(event_type)


CHECKPOINT_THRESHOLD = "256MB"
"""The write-ahead log a run may grow before DuckDB checkpoints in the middle of it (its
default is 16 MB, which an increment of 100,000 events passes in its fold, and the file is
checkpointed again when the run closes it): a run's changes are written to the file once,
when the run ends. Large appends (a first load) go to the file directly, not to the log."""

VACUUM_TASKS = 0
"""DuckDB's checkpoint vacuum is off in the working database: it merged the event tables'
partly filled trailing row groups every other incremental run (0.3-0.8 s of it), and
``warehouse.compaction`` compacts by rules that leave a row group of ordinary size alone."""


class WarehouseResource(dg.ConfigurableResource):
    """The pipeline's working DuckDB file and the published snapshot readers open.

    Only the pipeline opens ``working_path`` (read-write); analysts, notebooks and the dashboard
    open ``published_path`` read-only, which the pipeline replaces by an atomic rename.

    Within a run every step shares one connection, opened by the first step that needs it and
    closed when the run's resources are torn down: the file is opened, its schema ensured and its
    write-ahead log checkpointed once per run, not once per step. Outside a run (no resource
    lifecycle), each ``connect()`` opens and closes its own connection.
    """

    working_path: str
    published_path: str
    lock_timeout_s: float = 300.0

    _run_scoped: bool = PrivateAttr(default=False)
    _shared: duckdb.DuckDBPyConnection | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._run_scoped = True

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self._run_scoped = False
        shared, self._shared = self._shared, None
        if shared is not None:
            shared.close()

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection to the working database with its schema in place.

        Waits while another pipeline run holds the file, up to ``lock_timeout_s``.
        """
        if not self._run_scoped:
            con = self._open()
            try:
                yield con
            finally:
                con.close()
            return
        if self._shared is None:
            self._shared = self._open()
        yield self._shared

    def _open(self) -> duckdb.DuckDBPyConnection:
        Path(self.working_path).parent.mkdir(parents=True, exist_ok=True)
        con = self._open_waiting()
        try:
            con.execute("SET TimeZone = 'UTC'")
            con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
            con.execute(f"SET max_vacuum_tasks = {VACUUM_TASKS}")
            migrate(con)
        except BaseException:
            con.close()
            raise
        return con

    def _open_waiting(self) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_timeout_s
        while True:
            try:
                return duckdb.connect(self.working_path)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


class ControlPlaneResource(dg.ConfigurableResource):
    """The control plane, read and written through its store: environment keys, and the
    rollouts the guardian judges (the store audits and announces each decision). PostgreSQL
    when ``database_url`` is set (the cluster mode), else the SQLite file at ``database_path``."""

    database_path: str
    database_url: str | None = None

    @contextmanager
    def store(self) -> Iterator[ControlPlaneStore | None]:
        """The control-plane store, or None when the service never created its SQLite file."""
        if not self.database_url and not Path(self.database_path).exists():
            yield None
            return
        store = store_for(self.database_url, Path(self.database_path))
        try:
            yield store
        finally:
            store.close()

    def flags_without_a_split(self) -> set[tuple[str, str]]:
        """``(environment id, flag key)`` of every flag that has no percentage rule now: its
        release health has no arms; empty without a control plane."""
        with self.store() as store:
            if store is None:
                return set()
            return {
                (environment.id, flag.key)
                for organization in store.list_organizations()
                for environment in store.list_environments(organization.id)
                for flag in store.list_flags(environment.id)
                if first_split(flag.rules) < 0
            }

    def rollout_starts(self) -> list[tuple[str, str, str, float]]:
        """``(environment id, flag key, started at, percentage)`` of every running rollout:
        release health counts its users from that start (``pipelines.attribution``)."""
        with self.store() as store:
            if store is None:
                return []
            return [
                (r.environment_id, r.flag_key, r.created_at, r.percentage)
                for r in store.running_rollouts()
            ]

    def metric_follows(self) -> list[MetricFollow]:
        """Every followed metric of every flag environment, a running rollout's metric
        guardrails included; empty without a control plane."""
        with self.store() as store:
            return [] if store is None else store.metric_follows()

    def environment_keys(self) -> list[tuple[str, str]]:
        """``(environment id, key)`` pairs of every organization; empty without a control plane."""
        with self.store() as store:
            if store is None:
                return []
            return [
                (environment.id, environment.key)
                for organization in store.list_organizations()
                for environment in store.list_environments(organization.id)
            ]


class LifecycleResource(dg.ConfigurableResource):
    """The flag lifecycle's thresholds (``FLAGSIGHT_LIFECYCLE_*``, docs/lifecycle.md)."""

    launched_days: float = 14.0
    stale_days: float = 30.0
    archived_evaluated_hours: float = 24.0

    def thresholds(self) -> LifecycleThresholds:
        return LifecycleThresholds(
            launched_days=self.launched_days,
            stale_days=self.stale_days,
            archived_evaluated_hours=self.archived_evaluated_hours,
        )
