"""The admin token: ``Authorization: Bearer <token>``, checked against a sha256 hash.

The expected hash is that of ``FLAGSIGHT_ADMIN_TOKEN`` when set, otherwise the one that
``flagsight init`` stored. The plaintext token is never stored; comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any, Protocol

import falcon.asgi

from api.controlplane.store import ControlPlaneStore
from api.settings import Settings
from api.web.errors import Unauthorized

ADMIN_TOKEN_PREFIX = "fsa_"
_SCHEME = "bearer"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_admin_token() -> str:
    """``fsa_`` and 43 URL-safe characters (256 random bits)."""
    return ADMIN_TOKEN_PREFIX + secrets.token_urlsafe(32)


def ensure_admin_token(store: ControlPlaneStore, settings: Settings) -> str | None:
    """Make and store an admin token unless one exists; the new plaintext, else None.

    With ``FLAGSIGHT_ADMIN_TOKEN`` set nothing is stored: that variable is the token.
    """
    if settings.admin_token or store.admin_token_hash():
        return None
    return rotate_admin_token(store)


def rotate_admin_token(store: ControlPlaneStore) -> str:
    """Replace the stored admin token with a new one and return its plaintext (shown once)."""
    token = new_admin_token()
    store.set_admin_token_hash(token_hash(token))
    return token


def bearer_token(authorization: str | None) -> str | None:
    """The token of a ``Bearer`` authorization header (scheme case-insensitive, RFC 7235)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == _SCHEME and token else None


class AdminAuth:
    """Decides whether a request carries the admin token."""

    def __init__(self, settings: Settings, store: ControlPlaneStore):
        self._store = store
        self._configured_hash = token_hash(settings.admin_token) if settings.admin_token else None

    def expected_hash(self) -> str | None:
        """Read per request when stored, so ``flagsight admin-token rotate`` applies at once."""
        return self._configured_hash or self._store.admin_token_hash()

    def is_admin(self, authorization: str | None) -> bool:
        token = bearer_token(authorization)
        expected = self.expected_hash()
        if token is None or expected is None:
            return False
        return hmac.compare_digest(token_hash(token), expected)

    def require(self, req: falcon.asgi.Request) -> None:
        """Raise the contract's 401 unless the request carries the admin token."""
        if not self.is_admin(req.get_header("Authorization")):
            raise Unauthorized()


class _HasAuth(Protocol):
    auth: AdminAuth


async def require_admin(
    req: falcon.asgi.Request, resp: falcon.asgi.Response, resource: _HasAuth, params: dict[str, Any]
) -> None:
    """Falcon ``before`` hook for every admin resource: authentication comes before the body."""
    resource.auth.require(req)
