"""The API keys slice: its codes, its part of the store, its SQL and its restore.

A key belongs to an environment; the store keeps only its sha256 (the plaintext is shown once,
at creation). Revoking bumps the config version, so every worker refuses the key within a
poll; a restore takes a revocation back, or undoes a creation by revoking.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from api.controlplane import documents
from api.controlplane.changes import Actor, AuditRecord
from api.controlplane.errors import ConflictError, ConflictReason, NotFoundError, Resource
from api.controlplane.model import ApiKey
from api.controlplane.resources.audit import Restore, restores
from api.controlplane.sql_backend import Connection, Row
from api.controlplane.sql_history import new_id
from api.controlplane.sql_slice import SqlSlice

API_KEY_PREFIX = "fsk_"


class ApiKeyCode(StrEnum):
    # NotFoundError: details["identifier"] is the id the caller gave
    API_KEY_NOT_FOUND = "api_key_not_found"
    LIVE_API_KEY_NOT_FOUND = "live_api_key_not_found"
    """Revoking: no key of that id, or it is already revoked."""
    # a restore that would change nothing (ConflictReason.NOTHING_TO_RESTORE): ``api_key``
    API_KEY_ALREADY_REVOKED = "api_key_already_revoked"
    API_KEY_NOT_REVOKED = "api_key_not_revoked"


def new_api_key() -> str:
    """``fsk_`` and 43 URL-safe characters: 256 random bits."""
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CreatedApiKey:
    """A new API key: ``plaintext`` exists only here, the store keeps its sha256."""

    record: ApiKey
    plaintext: str


def api_key_of(row: Row) -> ApiKey:
    return ApiKey(
        row["id"],
        row["environment_id"],
        row["name"],
        row["created_at"],
        row["revoked_at"] is not None,
    )


_API_KEY_BY_ID = "SELECT * FROM api_keys WHERE id = ?"
"""One key: read outside a transaction (``get_api_key``) and inside the caller's."""


class ApiKeyStore(Protocol):
    def create_api_key(
        self, environment_id: str, name: str = "", *, actor: str = Actor.SYSTEM
    ) -> CreatedApiKey: ...

    def get_api_key(self, key_id: str) -> ApiKey | None: ...

    def list_api_keys(self, environment_id: str) -> list[ApiKey]:
        """The environment's keys that are not revoked, oldest first, without secrets."""
        ...

    def revoke_api_key(self, key_id: str, *, actor: str = Actor.SYSTEM) -> None:
        """Raises ``NotFoundError`` for an unknown or already revoked key."""
        ...


class ApiKeySql(SqlSlice):
    """API keys in SQL (see ``ApiKeyStore``)."""

    codes = ApiKeyCode

    def create_api_key(
        self, environment_id: str, name: str = "", *, actor: str = Actor.SYSTEM
    ) -> CreatedApiKey:
        plaintext = new_api_key()
        record = ApiKey(new_id("key_"), environment_id, name, self._now())
        with self._transaction(write=True) as conn:
            environment = self._require_environment(conn, environment_id)
            conn.execute(
                "INSERT INTO api_keys (id, environment_id, name, key_sha256, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (record.id, environment_id, name, sha256_hex(plaintext), record.created_at),
            )
            self._bump(conn)
            self._audit(
                conn, environment.organization_id, actor, "apiKey.created",
                f"apiKey:{record.id}", None, documents.api_key(record),
            )  # fmt: skip
        return CreatedApiKey(record, plaintext)

    def get_api_key(self, key_id: str) -> ApiKey | None:
        row = self._fetchone(_API_KEY_BY_ID, (key_id,))
        return api_key_of(row) if row else None

    def list_api_keys(self, environment_id: str) -> list[ApiKey]:
        rows = self._fetchall(
            "SELECT * FROM api_keys WHERE environment_id = ? AND revoked_at IS NULL ORDER BY rowid",
            (environment_id,),
        )
        return [api_key_of(row) for row in rows]

    def revoke_api_key(self, key_id: str, *, actor: str = Actor.SYSTEM) -> None:
        with self._transaction(write=True) as conn:
            key = self._api_key_in(conn, key_id)
            if key is None or key.revoked:
                raise NotFoundError(ApiKeyCode.LIVE_API_KEY_NOT_FOUND, Resource.API_KEY, key_id)
            self._set_revoked(conn, key, True, actor=actor, action="apiKey.revoked")

    @staticmethod
    def _api_key_in(conn: Connection, key_id: str) -> ApiKey | None:
        """The key, revoked or not; None when there is no such key."""
        row = conn.execute(_API_KEY_BY_ID, (key_id,)).fetchone()
        return api_key_of(row) if row else None

    def _set_revoked(
        self,
        conn: Connection,
        key: ApiKey,
        revoked: bool,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Revoke ``key``, or take its revocation back, inside the caller's write transaction;
        the version bump makes every worker refuse (or accept) it within a poll. Revoking and
        restoring both come here."""
        environment = self._require_environment(conn, key.environment_id)
        conn.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE id = ?",
            (self._now() if revoked else None, key.id),
        )
        self._bump(conn)
        after = dataclasses.replace(key, revoked=revoked)
        return self._audit(
            conn, environment.organization_id, actor, action, f"apiKey:{key.id}",
            documents.api_key(key), documents.api_key(after), restored_from,
        )  # fmt: skip

    @restores("apiKey")
    def _restore_api_key(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """A revocation is taken back; a creation is undone by revoking the key (its secret
        was shown once and is not kept, so revoking is all there is to undo)."""
        key = self._api_key_in(conn, ident)
        if key is None:
            raise NotFoundError(ApiKeyCode.API_KEY_NOT_FOUND, Resource.API_KEY, ident)
        revoked = record.before is None or bool(record.before["revoked"])
        if key.revoked == revoked:
            raise ConflictError(
                ApiKeyCode.API_KEY_ALREADY_REVOKED if revoked else ApiKeyCode.API_KEY_NOT_REVOKED,
                ConflictReason.NOTHING_TO_RESTORE,
                api_key=ident,
            )
        return lambda actor: self._set_revoked(
            conn, key, revoked, actor=actor, action="restore", restored_from=record.id
        )
