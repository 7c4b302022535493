"""What every dashboard page shares: its dependencies, the session check, the CSRF check on
every form post, and rendering with the signed-in chrome.

Pages subclass ``Page`` and are decorated with ``@falcon.before(signed_in)``: without a valid
session a request is answered with a redirect to the sign-in page before any data is read, and
a post whose CSRF token does not match its session is refused with 403 before it is acted on.
Store calls go through ``AdminResource.read``/``write``, the same path the admin API uses, so a
change made here is served by this worker at once and by every worker within a second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import falcon
import falcon.asgi

from api.controlplane.changes import Actor
from api.controlplane.errors import ConflictError, NotFoundError
from api.controlplane.model import Environment, Organization
from api.serving.services import Services
from api.web.admin.auth import AdminAuth
from api.web.admin.base import AdminResource
from api.web.admin.error_messages import message
from api.web.dashboard.forms import Form, FormError, read_form
from api.web.dashboard.rendering import Renderer
from api.web.dashboard.sessions import SESSION_COOKIE, Session, SessionSigner
from api.web.errors import ApiError

PREFIX = "/dashboard"
SIGN_IN_PATH = f"{PREFIX}/sign-in"
CSRF_FIELD = "csrf_token"

Crumbs = list[tuple[str, str]]


@dataclass(frozen=True)
class Dashboard:
    """The dashboard's shared parts, built once per app by ``add_dashboard_routes``."""

    services: Services
    auth: AdminAuth
    signer: SessionSigner
    renderer: Renderer


def sign_in_redirect(req: falcon.asgi.Request) -> falcon.HTTPSeeOther:
    """Back to the sign-in page; a GET remembers where it was going."""
    if req.method == "GET" and req.path.startswith(PREFIX + "/"):
        target = req.path + (f"?{req.query_string}" if req.query_string else "")
        return falcon.HTTPSeeOther(f"{SIGN_IN_PATH}?next={quote(target, safe='')}")
    return falcon.HTTPSeeOther(SIGN_IN_PATH)


class Page(AdminResource):
    """Base of the dashboard's resources."""

    actor = Actor.DASHBOARD

    def __init__(self, dashboard: Dashboard):
        super().__init__(dashboard.services, dashboard.auth)
        self.dashboard = dashboard

    @property
    def signer(self) -> SessionSigner:
        return self.dashboard.signer

    @property
    def renderer(self) -> Renderer:
        return self.dashboard.renderer

    def session_of(self, req: falcon.asgi.Request) -> Session | None:
        cookies = req.get_cookie_values(SESSION_COOKIE) or []
        return next(filter(None, map(self.signer.verify, cookies)), None)

    async def form(self, req: falcon.asgi.Request) -> Form:
        """The posted form, read once (by the CSRF check) and kept on the request.

        A form that cannot be read (too large, not UTF-8, too many fields, cut short) is
        refused with the API's JSON error body (contract section 3: "on the API and the
        dashboard alike"), unless the client asks for HTML first, as a browser does: a person
        gets the same refusal as a page.
        """
        form: Form | None = getattr(req.context, "form", None)
        if form is None:
            try:
                form = await read_form(req, self.services.settings.body_limits.admin)
            except FormError as exc:
                if req.client_prefers((falcon.MEDIA_JSON, falcon.MEDIA_HTML)) == falcon.MEDIA_HTML:
                    raise self.renderer.status(
                        exc.status, "The form was not accepted", exc.message
                    ) from None
                raise ApiError(exc.status, exc.message) from None
            req.context.form = form
        return form

    def render(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        template: str,
        *,
        status: int = 200,
        crumbs: Crumbs | None = None,
        **context: Any,
    ) -> None:
        session: Session | None = getattr(req.context, "session", None)
        csrf = self.signer.csrf_token(session) if session else ""
        self.renderer.page(
            resp, template, status=status, signed_in=session is not None,
            csrf_token=csrf, crumbs=crumbs or [], path=req.path, **context,
        )  # fmt: skip

    async def delete(self, fn: Callable[..., object], *args: Any) -> str | None:
        """Delete through the store (``fn``), as the admin API's ``DELETE``: None once it is
        gone (already gone too: the outcome asked for), else the store's words for why not
        (a segment a flag's rule names, a metric a rollout guards on)."""
        try:
            await self.write(fn, *args)
        except ConflictError as exc:
            return message(exc)
        except NotFoundError:
            pass
        return None

    def not_found(self, what: str) -> falcon.HTTPStatus:
        return self.renderer.status(404, "Not found", f"{what} does not exist.", signed_in=True)

    async def organization(self, organization_id: str) -> Organization:
        organization = await self.read(self.store.get_organization, organization_id)
        if organization is None:
            raise self.not_found(f"Organization '{organization_id}'")
        return organization

    async def environment(self, environment_id: str) -> tuple[Environment, Organization]:
        environment = await self.read(self.store.get_environment, environment_id)
        if environment is None:
            raise self.not_found(f"Environment '{environment_id}'")
        return environment, await self.organization(environment.organization_id)


async def signed_in(
    req: falcon.asgi.Request, resp: falcon.asgi.Response, resource: Page, params: dict[str, Any]
) -> None:
    """Falcon ``before`` hook of every page that shows or changes data."""
    session = resource.session_of(req)
    if session is None:
        raise sign_in_redirect(req)
    req.context.session = session
    if req.method == "POST":
        form = await resource.form(req)
        if not resource.signer.check_csrf(session, form.get(CSRF_FIELD) or None):
            raise resource.renderer.status(
                403, "The form was refused",
                "Its security token is missing or does not belong to your session."
                " Go back, reload the page and submit it again.", signed_in=True,
            )  # fmt: skip


def organization_crumbs(organization: Organization) -> Crumbs:
    return [
        ("Organizations", f"{PREFIX}/organizations"),
        (organization.name, f"{PREFIX}/organizations/{organization.id}"),
    ]


def environment_crumbs(environment: Environment, organization: Organization) -> Crumbs:
    return [
        *organization_crumbs(organization),
        (f"{environment.name or environment.key} ({environment.key})",
         f"{PREFIX}/environments/{environment.id}/flags"),
    ]  # fmt: skip
