"""The deployment's secrets, kept in the control plane so every worker of every host shares
them: the key that signs evaluation ids, and the admin token's hash.
"""

from __future__ import annotations

import secrets
from typing import Any, Protocol

from api.controlplane.sql_slice import SqlSlice

_SIGNING_KEY = "signing_key"
_ADMIN_TOKEN_HASH = "admin_token_sha256"


class DeploymentStore(Protocol):
    def signing_key(self) -> bytes:
        """32 random bytes, created once and shared by every worker (signs evaluation ids)."""
        ...

    def admin_token_hash(self) -> str | None: ...

    def set_admin_token_hash(self, token_sha256_hex: str) -> None: ...


class DeploymentSql(SqlSlice):
    """The deployment's secrets in SQL (see ``DeploymentStore``)."""

    def _setting(self, name: str) -> Any:
        """A deployment setting's value: bytes (a BLOB, or BYTEA in PostgreSQL)."""
        row = self._fetchone("SELECT value FROM settings WHERE name = ?", (name,))
        return row[0] if row else None

    def signing_key(self) -> bytes:
        existing = self._setting(_SIGNING_KEY)
        if existing is not None:
            return bytes(existing)
        with self._transaction(write=True) as conn:
            conn.execute(
                "INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                (_SIGNING_KEY, secrets.token_bytes(32)),
            )
        return bytes(self._setting(_SIGNING_KEY))

    def admin_token_hash(self) -> str | None:
        value = self._setting(_ADMIN_TOKEN_HASH)
        if isinstance(value, bytes | memoryview):
            return bytes(value).decode("ascii")
        return None if value is None else str(value)  # TEXT: written by earlier versions

    def set_admin_token_hash(self, token_sha256_hex: str) -> None:
        with self._transaction(write=True) as conn:
            conn.execute(
                "INSERT INTO settings (name, value) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (_ADMIN_TOKEN_HASH, token_sha256_hex.encode("ascii")),
            )
