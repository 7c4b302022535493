"""The PostgreSQL control plane: one database shared by every worker of every host.

The store's SQL is its slices', unchanged; this backend runs it with psycopg 3:

- Tables live in their own schema, ``controlplane`` (every connection's ``search_path``), next
  to the meter's and Dagster's in the same database.
- Each process opens its own ``psycopg_pool.ConnectionPool``, lazily, on first use: a pool
  (or connection) made before ``fork`` is never used, nor closed, in the child.
- A write transaction takes one transaction-scoped advisory lock first: writers of every
  process and host take turns, as SQLite's ``BEGIN IMMEDIATE`` makes them do on one machine.
  The store's check-then-write steps thus see every earlier write, and a due schedule is
  applied by exactly one of the workers that race for it. A read transaction is ``REPEATABLE
  READ READ ONLY``: one consistent snapshot, never waiting on a writer.
- ``config_version()`` is one single-row ``SELECT`` in autocommit: what each worker polls.
- A pooled connection found broken (the server restarted since) is dropped and the statement
  tried on another; a server that cannot be reached within ``timeout_s`` is
  ``UnavailableError``, and the pool reconnects in the background.
- Migrations (``migrations/postgres``) run under a session advisory lock, so hosts that start
  at once apply each file once.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg_pool

from api.controlplane.errors import UnavailableError
from api.controlplane.migrations import POSTGRES_MIGRATIONS, discover
from api.controlplane.sql_backend import Params
from api.controlplane.store import SqlControlPlaneStore

SCHEMA = "controlplane"


def advisory_key(name: str) -> int:
    """A stable 64-bit advisory-lock key for ``name``."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


WRITE_LOCK = advisory_key("flagsight.controlplane.write")
MIGRATION_LOCK = advisory_key("flagsight.controlplane.migrate")
_BEGIN_WRITE = f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})"
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


class PgRow(tuple):
    """A result row readable by position and by column name, like ``sqlite3.Row``."""

    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> PgRow:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


def _row_factory(cursor: psycopg.Cursor[Any]) -> Callable[[Sequence[Any]], PgRow]:
    index = {column.name: i for i, column in enumerate(cursor.description or ())}
    return functools.partial(PgRow, index=index)


@functools.lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """The shared SQL's ``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Connection:
    """A pooled connection inside a transaction, speaking the shared SQL."""

    def __init__(self, conn: psycopg.Connection[PgRow]):
        self._conn = conn

    def execute(self, sql: str, params: Params = ()) -> psycopg.Cursor[PgRow]:
        return self._conn.execute(translate(sql), params)


@contextmanager
def _unavailable_when_unreachable() -> Iterator[None]:
    try:
        yield
    except psycopg.OperationalError as exc:
        raise UnavailableError(f"the control-plane database cannot be reached: {exc}") from exc


class PostgresBackend:
    """``SqlBackend`` on a PostgreSQL database; see the module docstring."""

    def __init__(
        self,
        url: str,
        *,
        max_connections: int = 4,
        timeout_s: float = 2.0,
        connect_timeout_s: int = 2,
    ):
        self.url = url
        self._max_connections = max_connections
        self._timeout_s = timeout_s
        self._connect_options: dict[str, Any] = {
            "options": f"-c search_path={SCHEMA}",
            "connect_timeout": connect_timeout_s,
        }
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._pool_of_pid: psycopg_pool.ConnectionPool | None = None
        self._inherited: list[psycopg_pool.ConnectionPool] = []

    def _pool(self) -> psycopg_pool.ConnectionPool:
        """This process's pool, opened on first use (never the parent's after a fork)."""
        with self._lock:
            if os.getpid() != self._pid:  # forked: keep the parent's pool, never touch it
                if self._pool_of_pid is not None:
                    self._inherited.append(self._pool_of_pid)
                self._pool_of_pid, self._pid = None, os.getpid()
            if self._pool_of_pid is None:
                pool = psycopg_pool.ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=self._max_connections,
                    kwargs={"autocommit": True, "row_factory": _row_factory,
                            **self._connect_options},
                    timeout=self._timeout_s,
                    name=f"flagsight-controlplane-{self._pid}",
                    open=False,
                )  # fmt: skip
                pool.open(wait=False)
                self._pool_of_pid = pool
            return self._pool_of_pid

    def _start(
        self, sql: str, params: Params | None
    ) -> tuple[psycopg_pool.ConnectionPool, psycopg.Connection[PgRow], psycopg.Cursor[PgRow]]:
        """Borrow a connection and run ``sql`` on it. A connection that turns out broken (the
        server restarted since it was pooled) is given back, which drops it, and the statement
        tried on another: at most every pooled connection can be stale."""
        pool = self._pool()
        for attempt in range(self._max_connections, -1, -1):
            conn = pool.getconn()
            try:
                return pool, conn, conn.execute(sql, params)
            except psycopg.OperationalError:
                pool.putconn(conn)
                if not attempt or not conn.broken:
                    raise
        raise AssertionError("not reached")

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[_Connection]:
        with _unavailable_when_unreachable():
            pool, conn, _ = self._start(_BEGIN_WRITE if write else _BEGIN_READ, None)
            try:
                try:
                    yield _Connection(conn)
                except BaseException:
                    if not conn.broken:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            finally:
                pool.putconn(conn)

    def fetch(self, sql: str, params: Params = ()) -> list[PgRow]:
        with _unavailable_when_unreachable():
            pool, conn, cursor = self._start(translate(sql), params)
            try:
                return cursor.fetchall()
            finally:
                pool.putconn(conn)

    def migrate(self) -> list[int]:
        """Create the schema or bring it up to date, on a connection of its own (no pool is
        opened, so a process that migrates and then forks hands its children nothing)."""
        with (
            _unavailable_when_unreachable(),
            psycopg.connect(self.url, autocommit=True, **self._connect_options) as conn,
        ):
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
            return apply_migrations(conn)

    def close(self) -> None:
        with self._lock:
            pool, self._pool_of_pid = self._pool_of_pid, None
            mine = self._pid == os.getpid()
        if pool is not None and mine:
            pool.close()


class PostgresControlPlaneStore(SqlControlPlaneStore):
    """``ControlPlaneStore`` on PostgreSQL (``postgresql://user:password@host:port/db``);
    creates or migrates the schema when opened."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        max_connections: int = 4,
        timeout_s: float = 2.0,
    ):
        self.backend = PostgresBackend(url, max_connections=max_connections, timeout_s=timeout_s)
        super().__init__(self.backend, clock=clock)


def apply_migrations(conn: psycopg.Connection[Any]) -> list[int]:
    """Apply the missing migrations, each file in its own transaction; the numbers applied.

    The caller holds ``MIGRATION_LOCK``, so concurrent runners take turns and each finds
    what the one before it applied.
    """
    conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
    )
    applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    applied_now = []
    for migration in discover(POSTGRES_MIGRATIONS):
        if migration.number in applied:
            continue
        with conn.transaction():
            conn.execute(migration.sql)  # every statement of the file, in one trip
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                (migration.number, migration.name, time.time()),
            )
        applied_now.append(migration.number)
    return applied_now
