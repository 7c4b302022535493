"""Which control-plane store a process opens: the one choice the service and the pipeline share."""

from __future__ import annotations

from pathlib import Path

from api.controlplane.store import ControlPlaneStore


def open_store(database_url: str | None, sqlite_path: Path) -> ControlPlaneStore:
    """The control plane, its schema created or migrated: PostgreSQL, shared by every host,
    when ``database_url`` is set; else the SQLite file at ``sqlite_path``."""
    if database_url:
        from api.controlplane.postgres_store import (
            PostgresControlPlaneStore,  # psycopg: cluster only
        )

        return PostgresControlPlaneStore(database_url)
    from api.controlplane.sqlite_store import SqliteControlPlaneStore

    return SqliteControlPlaneStore(sqlite_path)
