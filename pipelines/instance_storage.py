"""Dagster's SQLite storages (runs, event logs, schedules) keeping one SQLAlchemy engine per
database file: the embedded default's instance storage (``api.infra.dagster_home`` names these
classes in ``dagster.yaml``).

Dagster 1.13's SQLite storages make a new engine for every connection, and an engine starts
with an empty cache of compiled statements: each of the ~120 events of an insights run
compiled its INSERT and its lookups again, and built a dialect besides. With the engines kept,
the insights job with empty bodies (``bench.dagster_floor``, a fresh process per run) took
1.25-1.46 s against 1.47-2.11 s, alternated four times (``bench/history.md``).

What Dagster's classes do otherwise is kept: a new SQLite connection for every use
(``NullPool``, as several processes write the same files), the event log's lock around it and
its first-use creation of a run's database. A run's database is opened by few runs at once,
so the event log keeps the engines of its latest ``RUN_ENGINES`` databases. PostgreSQL
(dagster-postgres) keeps one engine per storage already and needs none of this.

The event log overrides ``_connect``, a private method; ``dagster`` is pinned to one release
(``pyproject.toml``) and ``tests/pipelines/test_instance_storage.py`` runs these storages.
"""

from __future__ import annotations

import threading
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
from sqlalchemy.pool import NullPool

RUN_ENGINES = 8
"""The event log's run databases whose engines are kept (the daemon and the webserver read
a few runs at a time; the index database's engine is always kept)."""


def _engine(conn_string: str, **connect_args: Any) -> Engine:
    return create_engine(conn_string, poolclass=NullPool, connect_args=connect_args)


@contextmanager
def _transaction(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction, as each Dagster storage's ``connect`` gives."""
    with engine.connect() as conn, conn.begin():
        yield conn


class KeptEngineRunStorage(SqliteRunStorage):
    """``SqliteRunStorage`` with its one engine kept."""

    def __init__(self, conn_string: str, inst_data: Any = None):
        super().__init__(conn_string, inst_data)
        self._engine = _engine(conn_string)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> SqliteRunStorage:
        return cls.from_local(inst_data=inst_data, **config_value)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with _transaction(self._engine) as conn:
            yield conn


class KeptEngineScheduleStorage(SqliteScheduleStorage):
    """``SqliteScheduleStorage`` with its one engine kept."""

    def __init__(self, conn_string: str, inst_data: Any = None):
        super().__init__(conn_string, inst_data)
        self._engine = _engine(conn_string)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> SqliteScheduleStorage:
        return cls.from_local(inst_data=inst_data, **config_value)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with _transaction(self._engine) as conn:
            yield conn


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
