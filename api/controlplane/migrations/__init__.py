"""Schema migrations for the SQLite control plane: numbered ``NNNN_name.sql`` files.

Each file is applied once, in number order, inside its own ``BEGIN IMMEDIATE`` transaction
and recorded in ``schema_migrations``. Several processes may open the database at once (every
gunicorn worker does): the write lock makes one of them apply a migration and the others see
it recorded when they get the lock, so none applies it twice.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

MIGRATIONS_DIR = Path(__file__).parent
_FILE_NAME = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    sql: str

    def statements(self) -> list[str]:
        """The file's statements, split where SQLite says a statement is complete."""
        statements, current = [], ""
        for line in self.sql.splitlines(keepends=True):
            current += line
            if sqlite3.complete_statement(current):
                statements.append(current.strip())
                current = ""
        if current.strip() and not _only_comments(current):
            raise ValueError(f"migration {self.number:04d} ends with an incomplete statement")
        return statements


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in text.splitlines())


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Every migration file in ``directory``, in number order; numbers must be unique."""
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        match = _FILE_NAME.fullmatch(path.name)
        if match is None:
            raise ValueError(f"migration file name {path.name!r} is not NNNN_name.sql")
        number = int(match.group(1))
        if number in found:
            raise ValueError(f"two migrations are numbered {number:04d}")
        found[number] = Migration(number, match.group(2), path.read_text(encoding="utf-8"))
    return [found[n] for n in sorted(found)]


def _applied(conn: sqlite3.Connection) -> set[int]:
    return {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}


def apply_migrations(conn: sqlite3.Connection, directory: Path = MIGRATIONS_DIR) -> list[int]:
    """Apply what is missing; return the numbers applied by this call (usually none).

    ``conn`` must be in autocommit mode (``isolation_level=None``): transactions are explicit.
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
                for statement in migration.statements():
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
