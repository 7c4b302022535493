"""Signing in with the admin token, signing out, and the dashboard's front door.

The admin token is checked by the admin API's own ``AdminAuth`` (a constant-time comparison
of hashes); it is never stored in the session, logged or echoed back. Cookies are HttpOnly,
SameSite=Strict, limited to ``/dashboard``, and Secure whenever the request came over HTTPS
(directly or through a proxy that says so).
"""

from __future__ import annotations

import falcon
import falcon.asgi

from api.web.dashboard.base import CSRF_FIELD, PREFIX, SIGN_IN_PATH, Page, signed_in
from api.web.dashboard.sessions import (
    COOKIE_PATH,
    SESSION_COOKIE,
    SESSION_TTL_S,
    SIGNIN_COOKIE,
    SIGNIN_TTL_S,
)

HOME = f"{PREFIX}/organizations"


def is_https(req: falcon.asgi.Request) -> bool:
    return req.scheme == "https" or req.forwarded_scheme == "https"


def set_cookie(
    req: falcon.asgi.Request, resp: falcon.asgi.Response, name: str, value: str, max_age: int
) -> None:
    resp.set_cookie(
        name, value, max_age=max_age, path=COOKIE_PATH, secure=is_https(req),
        http_only=True, same_site="Strict",
    )  # fmt: skip


def clear_cookie(resp: falcon.asgi.Response, name: str) -> None:
    """Expire the cookie in the browser (Falcon sends an expiry date in the past)."""
    resp.unset_cookie(name, path=COOKIE_PATH, same_site="Strict")


def safe_next(target: str | None) -> str:
    """Only a dashboard path of this site: never another origin (``//host``) or scheme, and
    only printable ASCII, which is all a path needs (it goes into the ``Location`` header,
    where CR or LF would end the header and non-ASCII cannot be sent)."""
    if not target or not target.startswith(PREFIX + "/") or "//" in target or "\\" in target:
        return HOME
    if not (target.isascii() and target.isprintable()):
        return HOME
    return target


class SignInPage(Page):
    """``/dashboard/sign-in``: a form for the admin token."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        target = safe_next(req.get_param("next"))
        if self.session_of(req) is not None:
            raise falcon.HTTPSeeOther(target)
        self._show(req, resp, target, signed_out=req.get_param("signed_out") == "1")

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        form = await self.form(req)
        target = safe_next(form.get("next"))
        nonce = (req.get_cookie_values(SIGNIN_COOKIE) or [None])[0]
        if not self.signer.check_signin_csrf(nonce, form.get(CSRF_FIELD) or None):
            self._show(req, resp, target, status=403, error=(
                "This sign-in form has expired or was not sent from this site."
                " Enter the token again."), field_error=False)  # fmt: skip
            return
        token = form.get("admin_token").strip()
        if not token or not self.auth.is_admin(f"Bearer {token}"):
            self._show(req, resp, target, status=401, error="That is not the admin token.")
            return
        cookie, _session = self.signer.issue()
        set_cookie(req, resp, SESSION_COOKIE, cookie, SESSION_TTL_S)
        clear_cookie(resp, SIGNIN_COOKIE)
        resp.status = falcon.HTTP_303
        resp.location = target

    def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        target: str,
        *,
        status: int = 200,
        error: str | None = None,
        field_error: bool = True,
        signed_out: bool = False,
    ) -> None:
        nonce = (req.get_cookie_values(SIGNIN_COOKIE) or [None])[0]
        if not nonce or not self.signer.check_signin_csrf(
            nonce, self.signer.signin_csrf_token(nonce)
        ):
            nonce = self.signer.new_signin_nonce()
            set_cookie(req, resp, SIGNIN_COOKIE, nonce, SIGNIN_TTL_S)
        self.renderer.page(
            resp, "sign_in.html", status=status, signed_in=False, csrf_token="", crumbs=[],
            path=req.path, signin_token=self.signer.signin_csrf_token(nonce), next=target,
            error=error, field_error=field_error, signed_out=signed_out,
        )  # fmt: skip


@falcon.before(signed_in)
class SignOutAction(Page):
    """``POST /dashboard/sign-out``: the browser forgets the session."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        clear_cookie(resp, SESSION_COOKIE)
        resp.status = falcon.HTTP_303
        resp.location = f"{SIGN_IN_PATH}?signed_out=1"


@falcon.before(signed_in)
class HomePage(Page):
    """``/dashboard``: straight on to the organizations."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        raise falcon.HTTPSeeOther(HOME)
