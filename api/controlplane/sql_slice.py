"""What every slice of the SQL store builds on: one backend's transactions, the config
version, the clock, and the audit record and webhook events a change writes.

Each slice's SQL (``api.controlplane.resources``) is a mixin of ``SqlSlice``, and
``SqlControlPlaneStore`` (``store``) is them composed on one backend (``sql_backend``). Writes
run in a write transaction, which takes the database's one write lock up front: each reads
what it checks and writes in that one transaction, and increases the config version in it, so
every worker of every host that polls the version sees the change as a whole or not at all.
A slice reaches another's helpers through ``self`` (a flag's write checks its environment with
``_require_environment``), inside the caller's transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from api.controlplane import documents
from api.controlplane.changes import AuditRecord, EventType
from api.controlplane.sql_backend import Connection, Params, Row, SqlBackend
from api.controlplane.sql_history import emit, record_audit


class SqlSlice:
    """The part of ``SqlControlPlaneStore`` every slice shares; opening it brings the schema
    up to date at once."""

    def __init__(self, backend: SqlBackend, *, clock: Callable[[], float] = time.time):
        self._backend = backend
        self._clock = clock
        backend.migrate()

    def _transaction(self, *, write: bool) -> AbstractContextManager[Connection]:
        return self._backend.transaction(write=write)

    def _fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        return self._backend.fetch(sql, params)

    def _fetchone(self, sql: str, params: Params = ()) -> Row | None:
        rows = self._backend.fetch(sql, params)
        return rows[0] if rows else None

    @staticmethod
    def _bump(conn: Connection) -> int:
        """The next config version, taken inside the caller's write transaction."""
        row = conn.execute("UPDATE config_version SET version = version + 1 RETURNING version")
        return row.fetchone()[0]

    def _now(self) -> str:
        return documents.iso_time(self._clock())

    def _audit(
        self,
        conn: Connection,
        organization_id: str,
        actor: str,
        action: str,
        target: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        restored_from: str | None = None,
    ) -> AuditRecord:
        return record_audit(
            conn, at=self._now(), organization_id=organization_id, actor=str(actor),
            action=action, target=target, before=before, after=after,
            restored_from=restored_from,
        )  # fmt: skip

    def _emit(self, conn: Connection, organization_id: str, event: EventType, data: dict) -> str:
        return emit(
            conn, now=self._clock(), at=self._now(), organization_id=organization_id,
            event_type=event, data=data,
        )  # fmt: skip

    def close(self) -> None:
        """Close this process's connections (the store reopens them if used again)."""
        self._backend.close()
