"""The pipeline's working-database schema, as numbered migrations applied once each.

``NNNN_name.sql`` files run in order inside one transaction each, and the version applied is
recorded in ``schema_migrations``. A database created before migrations existed holds version
1's tables already: ``0001`` is written with ``IF NOT EXISTS`` so that it adopts it.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from warehouse.sql import split_statements

MIGRATIONS_DIR = Path(__file__).parent
_NAME = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


def migrations() -> list[tuple[int, str, Path]]:
    """``(version, name, path)`` of every migration file, by version."""
    found = []
    for path in MIGRATIONS_DIR.glob("*.sql"):
        match = _NAME.fullmatch(path.name)
        if match:
            found.append((int(match[1]), match[2], path))
    return sorted(found)


LATEST_VERSION = migrations()[-1][0]


def migrate(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply the migrations the database lacks; returns the versions applied."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
    )
    current = con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0]
    applied = []
    for version, name, path in migrations():
        if version <= current:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            for statement in split_statements(path.read_text(encoding="utf-8")):
                con.execute(statement)
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, current_timestamp)", [version, name]
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        applied.append(version)
    return applied
