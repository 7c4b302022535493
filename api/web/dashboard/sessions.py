"""Dashboard sessions and CSRF tokens, signed with a key derived from the store's signing key.

Nothing is kept per session on the server, so every worker accepts every session without shared
state. A session cookie is ``<issued>.<nonce>.<mac>``: the MAC covers the issue time, the nonce
and the admin token's hash, so a session expires after ``SESSION_TTL_S`` and every session ends
when the admin token is rotated. A CSRF token is an HMAC of the session's nonce, so it is valid
for that session only. Before sign-in, a short-lived pre-session cookie plays the nonce's role
so that the sign-in form is protected too (login CSRF).

Keys are derived with HMAC from ``ControlPlaneStore.signing_key()`` under labels of their own,
so a dashboard MAC can never be confused with an evaluation id signed with the same root key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

SESSION_COOKIE = "flagsight_session"
SIGNIN_COOKIE = "flagsight_signin"
COOKIE_PATH = "/dashboard"
SESSION_TTL_S = 8 * 3600
SIGNIN_TTL_S = 3600
CLOCK_SKEW_S = 60

_SESSION_LABEL = b"flagsight/dashboard/session/v1"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def derive_key(root_key: bytes, label: bytes = _SESSION_LABEL) -> bytes:
    """A key for one purpose: HMAC-SHA256 of ``label`` under the deployment's root key."""
    return hmac.new(root_key, label, hashlib.sha256).digest()


@dataclass(frozen=True)
class Session:
    """A verified session; ``nonce`` identifies it and binds its CSRF token."""

    nonce: str
    issued_at: int

    @property
    def expires_at(self) -> int:
        return self.issued_at + SESSION_TTL_S


class SessionSigner:
    """Issues and verifies session cookies and CSRF tokens.

    ``admin_hash`` returns the current admin token's sha256 (``AdminAuth.expected_hash``);
    it is read at every verification, so rotating the token signs everyone out at once.
    """

    def __init__(
        self,
        root_key: bytes,
        admin_hash: Callable[[], str | None],
        clock: Callable[[], float],
    ):
        self._key = derive_key(root_key)
        self._admin_hash = admin_hash
        self._clock = clock

    def _mac(self, *parts: str) -> str:
        message = "|".join(parts).encode("utf-8")
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())

    # sessions
    def issue(self) -> tuple[str, Session]:
        """A new session and its cookie value; call only after the admin token was verified."""
        session = Session(nonce=_b64(secrets.token_bytes(18)), issued_at=int(self._clock()))
        binding = self._admin_hash() or ""
        mac = self._mac("session", str(session.issued_at), session.nonce, binding)
        return f"{session.issued_at}.{session.nonce}.{mac}", session

    def verify(self, cookie: str | None) -> Session | None:
        """The session a cookie carries, or None when missing, forged, expired or outdated."""
        if not cookie or cookie.count(".") != 2:
            return None
        issued_text, nonce, mac = cookie.split(".")
        binding = self._admin_hash()
        if not issued_text.isdigit() or not nonce or binding is None:
            return None
        if not hmac.compare_digest(mac, self._mac("session", issued_text, nonce, binding)):
            return None
        session = Session(nonce=nonce, issued_at=int(issued_text))
        now = self._clock()
        if session.issued_at > now + CLOCK_SKEW_S or now >= session.expires_at:
            return None
        return session

    # CSRF
    def csrf_token(self, session: Session) -> str:
        return self._mac("csrf", session.nonce)

    def check_csrf(self, session: Session, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(token or "", self.csrf_token(session))

    # the sign-in form, before any session exists
    def new_signin_nonce(self) -> str:
        """The pre-session cookie's value: a random nonce with its issue time."""
        return f"{int(self._clock())}.{_b64(secrets.token_bytes(18))}"

    def signin_csrf_token(self, signin_nonce: str) -> str:
        return self._mac("signin-csrf", signin_nonce)

    def check_signin_csrf(self, signin_nonce: str | None, token: str | None) -> bool:
        """True when the form's token matches a fresh pre-session cookie."""
        if not signin_nonce or not token or "." not in signin_nonce:
            return False
        issued_text = signin_nonce.split(".", 1)[0]
        if not (issued_text.isascii() and issued_text.isdigit() and len(issued_text) <= 12):
            return False  # ``int`` of a Unicode digit, or of thousands of digits, raises
        if self._clock() >= int(issued_text) + SIGNIN_TTL_S:
            return False
        return hmac.compare_digest(token, self.signin_csrf_token(signin_nonce))
