"""The environments slice: its codes, its part of the store, its SQL and its restore.

An environment belongs to an organization, has a key unique within it, a name and an insights
switch; it is never deleted, so its creation has no restore.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from flagsight_core.contract import KEY_PATTERN

from api.controlplane import documents
from api.controlplane.changes import Actor, AuditRecord
from api.controlplane.errors import (
    ConflictError,
    ConflictReason,
    InvalidError,
    NotFoundError,
    Resource,
)
from api.controlplane.model import Environment
from api.controlplane.resources.audit import Restore, not_restorable, restores
from api.controlplane.sql_backend import Connection, Row
from api.controlplane.sql_history import new_id
from api.controlplane.sql_slice import SqlSlice


class EnvironmentCode(StrEnum):
    ENVIRONMENT_NOT_FOUND = "environment_not_found"
    """``NotFoundError``: details["identifier"] is the id the caller gave."""
    ENVIRONMENT_KEY_TAKEN = "environment_key_taken"
    """``ConflictError``: the organization has an environment ``key`` already."""
    ENVIRONMENTS_NEVER_DELETED = "environments_never_deleted"
    """A restore of an environment's creation refused (``ConflictReason.NOT_RESTORABLE``)."""
    ENVIRONMENT_KEY_MALFORMED = "environment_key_malformed"
    """``InvalidError`` of the field ``key``."""


def environment_of(row: Row) -> Environment:
    return Environment(
        row["id"], row["organization_id"], row["key"], row["name"], bool(row["insights_enabled"])
    )


class EnvironmentStore(Protocol):
    def create_environment(
        self,
        organization_id: str,
        key: str,
        name: str | None = None,
        insights_enabled: bool = False,
        *,
        actor: str = Actor.SYSTEM,
    ) -> Environment:
        """Raises ``ConflictError`` when the organization already has an environment ``key``."""
        ...

    def get_environment(self, environment_id: str) -> Environment | None: ...

    def find_environment(self, organization_id: str, key: str) -> Environment | None: ...

    def list_environments(self, organization_id: str) -> list[Environment]: ...

    def update_environment(
        self,
        environment_id: str,
        *,
        name: str | None = None,
        insights_enabled: bool | None = None,
        actor: str = Actor.SYSTEM,
    ) -> Environment: ...


class EnvironmentSql(SqlSlice):
    """Environments in SQL (see ``EnvironmentStore``)."""

    codes = EnvironmentCode

    def create_environment(
        self,
        organization_id: str,
        key: str,
        name: str | None = None,
        insights_enabled: bool = False,
        *,
        actor: str = Actor.SYSTEM,
    ) -> Environment:
        if not KEY_PATTERN.fullmatch(key):
            raise InvalidError(EnvironmentCode.ENVIRONMENT_KEY_MALFORMED, "key", value=key)
        environment = Environment(
            new_id("env_"), organization_id, key, name or key, bool(insights_enabled)
        )
        with self._transaction(write=True) as conn:
            self._require_organization(conn, organization_id)
            taken = conn.execute(
                "SELECT 1 FROM environments WHERE organization_id = ? AND key = ?",
                (organization_id, key),
            ).fetchone()
            if taken:
                raise ConflictError(
                    EnvironmentCode.ENVIRONMENT_KEY_TAKEN, ConflictReason.KEY_TAKEN, "key",
                    key=key,
                )  # fmt: skip
            conn.execute(
                "INSERT INTO environments VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    environment.id,
                    organization_id,
                    key,
                    environment.name,
                    bool(environment.insights_enabled),
                    self._now(),
                    self._bump(conn),
                ),
            )
            self._audit(
                conn, organization_id, actor, "environment.created",
                f"environment:{environment.id}", None, documents.environment(environment),
            )  # fmt: skip
        return environment

    def get_environment(self, environment_id: str) -> Environment | None:
        row = self._fetchone("SELECT * FROM environments WHERE id = ?", (environment_id,))
        return environment_of(row) if row else None

    def find_environment(self, organization_id: str, key: str) -> Environment | None:
        row = self._fetchone(
            "SELECT * FROM environments WHERE organization_id = ? AND key = ?",
            (organization_id, key),
        )
        return environment_of(row) if row else None

    def list_environments(self, organization_id: str) -> list[Environment]:
        rows = self._fetchall(
            "SELECT * FROM environments WHERE organization_id = ? ORDER BY rowid",
            (organization_id,),
        )
        return [environment_of(row) for row in rows]

    def update_environment(
        self,
        environment_id: str,
        *,
        name: str | None = None,
        insights_enabled: bool | None = None,
        actor: str = Actor.SYSTEM,
    ) -> Environment:
        with self._transaction(write=True) as conn:
            current = self._require_environment(conn, environment_id)
            updated = Environment(
                current.id,
                current.organization_id,
                current.key,
                current.name if name is None else name,
                current.insights_enabled if insights_enabled is None else bool(insights_enabled),
            )
            conn.execute(
                "UPDATE environments SET name = ?, insights_enabled = ?, version = ? WHERE id = ?",
                (updated.name, bool(updated.insights_enabled), self._bump(conn), environment_id),
            )
            self._audit(
                conn, current.organization_id, actor, "environment.updated",
                f"environment:{current.id}", documents.environment(current),
                documents.environment(updated),
            )  # fmt: skip
        return updated

    @staticmethod
    def _require_environment(conn: Connection, environment_id: str) -> Environment:
        row = conn.execute("SELECT * FROM environments WHERE id = ?", (environment_id,)).fetchone()
        if row is None:
            raise NotFoundError(
                EnvironmentCode.ENVIRONMENT_NOT_FOUND, Resource.ENVIRONMENT, environment_id
            )
        return environment_of(row)

    @restores("environment")
    def _restore_environment(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """The name and insights switch put back; a creation cannot be undone (environments
        are never deleted)."""
        before = record.before
        if before is None:
            raise not_restorable(record, EnvironmentCode.ENVIRONMENTS_NEVER_DELETED)
        current = self._require_environment(conn, before["id"])

        def write(actor: str) -> AuditRecord:
            conn.execute(
                "UPDATE environments SET name = ?, insights_enabled = ?, version = ? WHERE id = ?",
                (before["name"], bool(before["insightsEnabled"]), self._bump(conn), current.id),
            )
            restored = Environment(
                current.id, current.organization_id, current.key, before["name"],
                before["insightsEnabled"],
            )  # fmt: skip
            return self._audit(
                conn, current.organization_id, actor, "restore", record.target,
                documents.environment(current), documents.environment(restored), record.id,
            )  # fmt: skip

        return write
