"""The SQLite control plane: one file shared by every gunicorn worker and thread.

Concurrency: WAL mode (readers never block the writer), a busy timeout so a writer waits for
another process's write instead of failing, and one connection per thread and process (a
connection opened before ``fork`` is never used, nor closed, in the child). A write
transaction takes the write lock up front (``BEGIN IMMEDIATE``), and every transaction closes
the statements it ran before it ends (``_Connection``). A file still locked after the busy
timeout, or that cannot be read, is ``UnavailableError``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from api.controlplane.errors import UnavailableError
from api.controlplane.migrations import SQLITE_MIGRATIONS, Migration, discover
from api.controlplane.sql_backend import Params
from api.controlplane.store import SqlControlPlaneStore


@contextmanager
def _unavailable_on_operational_error() -> Iterator[None]:
    try:
        yield
    except sqlite3.OperationalError as exc:
        raise UnavailableError(f"the control-plane database is busy or unreadable: {exc}") from exc


class _Connection(sqlite3.Connection):
    """A connection whose transactions close every statement they ran before they end.

    SQLite keeps an unfinished statement's read snapshot past ``COMMIT``: the connection
    stays in a read transaction, and once another connection has committed, its next write
    fails at once with "database is locked" (``SQLITE_BUSY_SNAPSHOT``, which the busy timeout
    does not wait out). A cursor read partly is freed with the frame that made it, unless an
    exception's traceback keeps that frame alive (a refusal kept as a value, until a garbage
    collection): the dashboard's audit page made workers answer 503 so. Python's ``sqlite3``
    has no call that resets a connection's statements, so the cursors are remembered."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._cursors: list[weakref.ref[sqlite3.Cursor]] | None = None

    def execute(self, sql: str, parameters: Params = (), /) -> sqlite3.Cursor:
        cursor = super().execute(sql, parameters)
        if self._cursors is not None:
            self._cursors.append(weakref.ref(cursor))
        return cursor

    def remember_cursors(self) -> None:
        """From now on, until ``close_cursors``."""
        self._cursors = []

    def close_cursors(self) -> None:
        """Close the cursors executed since ``remember_cursors`` that are still alive."""
        cursors, self._cursors = self._cursors or [], None
        for ref in cursors:
            cursor = ref()
            if cursor is not None:
                cursor.close()


class SqliteBackend:
    """``SqlBackend`` on one SQLite file; see the module docstring."""

    def __init__(self, path: Path, *, busy_timeout_s: float = 10.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._connections: list[_Connection] = []
        self._inherited: list[_Connection] = []

    def _connect(self) -> _Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
            factory=_Connection,
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def connection(self) -> _Connection:
        """This thread's connection in this process."""
        pid = os.getpid()
        with self._lock:
            if pid != self._pid:  # forked: keep the parent's connections alive, never use them
                self._inherited.extend(self._connections)
                self._connections = []
                self._pid = pid
        local = self._local
        if getattr(local, "pid", None) != pid:
            local.conn = self._connect()
            local.pid = pid
            with self._lock:
                self._connections.append(local.conn)
        return local.conn

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        with _unavailable_on_operational_error():
            conn = self.connection()
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            conn.remember_cursors()
            try:
                yield conn
            except BaseException:
                conn.close_cursors()
                conn.execute("ROLLBACK")
                raise
            conn.close_cursors()
            conn.execute("COMMIT")

    def fetch(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        with _unavailable_on_operational_error():
            return self.connection().execute(sql, params).fetchall()

    def migrate(self) -> list[int]:
        return apply_migrations(self.connection())

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
            self._local = threading.local()
        for conn in connections:
            conn.close()


class SqliteControlPlaneStore(SqlControlPlaneStore):
    """``ControlPlaneStore`` on a SQLite file; creates and migrates the file when opened."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout_s: float = 10.0,
    ):
        self.backend = SqliteBackend(path, busy_timeout_s=busy_timeout_s)
        self.path = self.backend.path
        super().__init__(self.backend, clock=clock)


# -- migrations -------------------------------------------------------------------------------


def statements(migration: Migration) -> list[str]:
    """The file's statements, split where SQLite says a statement is complete."""
    found, current = [], ""
    for line in migration.sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            found.append(current.strip())
            current = ""
    if current.strip() and not _only_comments(current):
        raise ValueError(f"migration {migration.number:04d} ends with an incomplete statement")
    return found


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in text.splitlines())


def _applied(conn: sqlite3.Connection) -> set[int]:
    return {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}


def apply_migrations(conn: sqlite3.Connection, directory: Path = SQLITE_MIGRATIONS) -> list[int]:
    """Apply what is missing; return the numbers applied by this call (usually none).

    Each file runs in its own ``BEGIN IMMEDIATE`` transaction: the write lock makes one process
    apply it and the others find it recorded. ``conn`` must be in autocommit mode
    (``isolation_level=None``): transactions are explicit.
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    applied_now: list[int] = []
    already = _applied(conn)
    for migration in (m for m in discover(directory) if m.number not in already):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if migration.number not in _applied(conn):
                for statement in statements(migration):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.number, migration.name, time.time()),
                )
                applied_now.append(migration.number)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return applied_now
