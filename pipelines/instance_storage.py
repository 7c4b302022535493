"""Dagster's SQLite storages (runs, event logs, schedules) keeping their SQLAlchemy engines
and a few open connections: the embedded default's instance storage (``api.infra.dagster_home``
names these classes in ``dagster.yaml``).

Dagster 1.13's SQLite storages make a new engine for every connection (``NullPool``), and an
engine starts with an empty cache of compiled statements: each of the ~120 events of an
insights run compiled its INSERT and its lookups again, built a dialect, opened the file and,
closing it last, checkpointed its write-ahead log. The insights job with empty bodies
(``bench.dagster_floor``, a fresh process per run) took 1.25-1.46 s with the engines kept and
0.79-0.97 s with their connections pooled too, against 1.47-2.11 s (``bench/history.md``).

Why pooling stays safe here: SQLite locks each file across processes (the daemon, the
webserver and ``flagsight pipeline run`` write the same files, as before); a connection goes
back to its pool with its transaction rolled back, so an idle one holds no write lock and no
read snapshot (only the shared lock every open connection of a write-ahead-log database
holds, which keeps the log from being removed under another process); and no idle connection
crosses a ``fork``: the parent closes its pools' idle connections before one
(``os.register_at_fork``; SQLite forbids a child to use or close a connection it inherited),
and the child starts with empty pools. The schedule storage, which Dagster's instance never
disposes, keeps its engine but no open connection. A run's engine is dropped when retention
deletes its file (``forget``). What Dagster's classes do otherwise is kept: the event log's lock around a connection and its
first-use creation of a run's database. A run's database is opened by few runs at once, so the
event log keeps the engines of its latest ``RUN_ENGINES`` databases. PostgreSQL
(dagster-postgres) keeps one engine per storage already and needs none of this.

The event log overrides ``_connect``, a private method; ``dagster`` is pinned to one release
(``pyproject.toml``) and ``tests/pipelines/test_instance_storage.py`` runs these storages.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool, QueuePool

RUN_ENGINES = 8
"""The event log's run databases whose engines are kept (the daemon and the webserver read
a few runs at a time; the index database's engine is always kept)."""
POOLED = 2
"""Connections an engine keeps open between uses; more at once are opened and closed as
Dagster's own storages do."""

_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()


def _engine(conn_string: str, pooled: bool = True, **connect_args: Any) -> Engine:
    if not pooled:
        return create_engine(conn_string, poolclass=NullPool, connect_args=connect_args)
    engine = create_engine(
        conn_string, poolclass=QueuePool, pool_size=POOLED, max_overflow=-1,
        connect_args=connect_args,
    )  # fmt: skip
    _ENGINES.add(engine)
    return engine


def _close_idle_before_fork() -> None:
    """No idle connection crosses a fork: SQLite forbids a child to use or even close a
    connection opened before it, and its lock bookkeeping would be the parent's."""
    for engine in list(_ENGINES):
        engine.dispose()


def _empty_pools_in_child() -> None:
    """A forked child starts with empty pools; a connection another thread of the parent had
    out at the fork stays the parent's (SQLAlchemy: ``Engine.dispose(close=False)``)."""
    for engine in list(_ENGINES):
        engine.dispose(close=False)


os.register_at_fork(before=_close_idle_before_fork, after_in_child=_empty_pools_in_child)


@contextmanager
def _transaction(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction, as each Dagster storage's ``connect`` gives."""
    with engine.connect() as conn, conn.begin():
        yield conn


class _OneKeptEngine:
    """For a Dagster storage of one SQLite file (runs, schedules) whose ``connect`` made an
    engine each time: its engine (and its pool) made once and kept. Listed first among the
    bases, so that its methods are the ones used."""

    pooled = True
    """Whether the engine keeps connections open between uses (``POOLED``)."""

    def __init__(self, conn_string: str, inst_data: Any = None):
        super().__init__(conn_string, inst_data)  # type: ignore[call-arg]
        self._engine = _engine(conn_string, self.pooled)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> Any:
        """Dagster's ``from_config_value`` names its own class: this one makes ``cls``."""
        return cls.from_local(inst_data=inst_data, **config_value)  # type: ignore[attr-defined]

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with _transaction(self._engine) as conn:
            yield conn

    def dispose(self) -> None:
        super().dispose()  # type: ignore[misc]
        self._engine.dispose()


class KeptEngineRunStorage(_OneKeptEngine, SqliteRunStorage):
    """``SqliteRunStorage`` with its engine kept."""


class KeptEngineScheduleStorage(_OneKeptEngine, SqliteScheduleStorage):
    """``SqliteScheduleStorage`` with its engine kept, and no connection open between uses:
    Dagster's instance never disposes its schedule storage, so a pool's connections would
    stay open until the storage is collected."""

    pooled = False


class KeptEngineEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` with the engines of its index and latest run databases kept."""

    def __init__(self, base_dir: str, inst_data: Any = None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._engines_lock = threading.Lock()
        super().__init__(base_dir, inst_data)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> SqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    def _engine_for(self, shard: str) -> Engine:
        with self._engines_lock:
            engine = self._engines.get(shard)
            if engine is None:
                engine = _engine(
                    self.conn_string_for_shard(shard), timeout=SQLITE_BUSY_TIMEOUT_SECONDS
                )
                self._engines[shard] = engine
                runs = [name for name in self._engines if name != INDEX_SHARD_NAME]
                for name in runs[: max(0, len(runs) - RUN_ENGINES)]:
                    self._engines.pop(name).dispose()
            else:
                self._engines.move_to_end(shard)
            return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            engine = self._engine_for(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with _transaction(engine) as conn:
                yield conn

    def forget(self, run_id: str) -> None:
        """Drop the engine of run ``run_id``'s database, its connections closed, before its
        file is removed (``pipelines.retention``): no connection keeps a deleted file open."""
        with self._db_lock, self._engines_lock:
            engine = self._engines.pop(run_id, None)
            self._initialized_dbs.discard(run_id)
        if engine is not None:
            engine.dispose()

    def wipe(self) -> None:
        with self._engines_lock:
            runs = [shard for shard in self._engines if shard != INDEX_SHARD_NAME]
        for run_id in runs:
            self.forget(run_id)
        super().wipe()

    def dispose(self) -> None:
        super().dispose()
        with self._engines_lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()
