"""What the SQL control-plane store needs from a database: the small interface its backends
(``sqlite_store``, ``postgres_store``) implement.

The store's SQL is written once, in the dialect both engines share: ``?`` placeholders,
``INSERT ... ON CONFLICT``, ``RETURNING``, savepoints, and a ``rowid`` that orders rows by
insertion (SQLite's own column; a generated column of that name in PostgreSQL). A backend
translates what it must (PostgreSQL's driver wants ``%s``), gives rows readable both by
column name and by position, and turns "the database cannot be reached or is busy" into
``UnavailableError``, so no driver's exception leaves the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

Params = Sequence[Any]


class Row(Protocol):
    """One result row: ``row["column"]``, ``row[0]`` and tuple unpacking all work."""

    def __getitem__(self, key: str | int) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A connection inside one of the backend's transactions."""

    def execute(self, sql: str, params: Params = ...) -> Cursor: ...


class SqlBackend(Protocol):
    """Transactions and reads on one database, safe from every thread and forked process."""

    def transaction(self, *, write: bool) -> AbstractContextManager[Connection]:
        """A transaction: committed when the block ends, rolled back if it raises.

        ``write=True`` takes the database's one write lock first, so the store's read, check
        and write steps run as if alone (every writer of every process and host waits its
        turn); ``write=False`` reads one consistent snapshot.
        """
        ...

    def fetch(self, sql: str, params: Params = ()) -> list[Row]:
        """One read statement outside any transaction; its rows."""
        ...

    def migrate(self) -> list[int]:
        """Bring the schema up to date; the migration numbers applied by this call."""
        ...

    def close(self) -> None:
        """Release this process's connections (a later call opens new ones)."""
        ...
