"""An organization's webhooks (contract section 10): list, create (the signing secret is shown
once), delete.

The form is the admin API's body (``url``, ``events`` as checkboxes), checked by the admin
API's own body type (``webhook_of``: the rules of ``api/controlplane/webhook_targets.py`` for
the URL), so a refused URL reads as the admin API's answer. Like a new API
key, the secret is rendered only into the answer to the form that created the webhook, never
into a URL or redirect. The store keeps no per-webhook delivery record that it lists, so the
page shows none; deliveries are retried for 24 hours (``api/jobs/webhooks.py``).
"""

from __future__ import annotations

import contextlib

import falcon
import falcon.asgi

from api.controlplane.changes import CreatedWebhook, EventType
from api.controlplane.errors import ControlPlaneError, NotFoundError
from api.web.admin.errors import http_error
from api.web.admin.webhooks import webhook_of
from api.web.dashboard.base import PREFIX, Page, organization_crumbs, signed_in
from api.web.dashboard.forms import Form
from api.web.errors import BadRequest

EVENT_TEXT = {
    EventType.FLAG_CHANGED: "a flag changed (admin API, dashboard, schedule, rollout or restore)",
    EventType.ROLLOUT_ADVANCED: "a guarded rollout advanced a step (or completed)",
    EventType.ROLLOUT_ROLLED_BACK: "a guarded rollout rolled back to 0 %",
    EventType.ROLLOUT_HELD: "a guarded rollout is held (sample ratio mismatch)",
    EventType.USAGE_THRESHOLD: "usage passed 80 %, 100 % or 110 % of the monthly limit",
}
"""What each event type announces, for the form's checkboxes."""


def webhooks_path(organization_id: str) -> str:
    return f"{PREFIX}/organizations/{organization_id}/webhooks"


class WebhooksView(Page):
    """The webhooks page, after a GET, a created webhook or a refused form."""

    async def show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        org_id: str,
        *,
        status: int = 200,
        form: Form | None = None,
        errors: dict[str, str] | None = None,
        created: CreatedWebhook | None = None,
    ) -> None:
        organization = await self.organization(org_id)
        hooks = await self.read(self.store.list_webhooks, org_id)
        chosen = form.getall("events") if form is not None else [str(e) for e in EventType]
        self.render(
            req, resp, "webhooks.html", status=status, organization=organization, hooks=hooks,
            events=EVENT_TEXT, chosen=chosen, url=form.get("url") if form else "",
            errors=errors or {}, created=created, deleted=req.get_param("deleted"),
            allow_private=self.services.settings.webhook_allow_private, section="webhooks",
            crumbs=[*organization_crumbs(organization), ("Webhooks", webhooks_path(org_id))],
        )  # fmt: skip


@falcon.before(signed_in)
class WebhooksPage(WebhooksView):
    """``/dashboard/organizations/{org_id}/webhooks``; ``POST`` creates a webhook."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await self.show(req, resp, org_id)

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await self.organization(org_id)
        form = await self.form(req)
        body = {"url": form.get("url"), "events": form.getall("events")}
        allow_private = self.services.settings.webhook_allow_private
        try:
            made = webhook_of(body, allow_private)
            created = await self.write(self.store.create_webhook, org_id, made.url, made.events)
        except BadRequest as exc:
            message = str(exc.description)
            field = "url" if message.startswith("Field 'url'") else "events"
            await self.show(req, resp, org_id, status=400, form=form, errors={field: message})
            return
        except ControlPlaneError as exc:
            error = http_error(exc)
            await self.show(req, resp, org_id, status=error.status_code, form=form,
                            errors={"url": str(error.description)})  # fmt: skip
            return
        await self.show(req, resp, org_id, status=201, created=created)


@falcon.before(signed_in)
class DeleteWebhookAction(Page):
    """``POST /dashboard/organizations/{org_id}/webhooks/{webhook_id}/delete``: no more
    deliveries; what is still queued for it is dropped."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, webhook_id: str
    ) -> None:
        await self.organization(org_id)
        await self.form(req)  # the CSRF token
        hooks = await self.read(self.store.list_webhooks, org_id)
        if all(hook.id != webhook_id for hook in hooks):
            raise self.not_found(f"Webhook '{webhook_id}'")
        # Deleted meanwhile (another tab, the admin API): the outcome is the same.
        with contextlib.suppress(NotFoundError):
            await self.write(self.store.delete_webhook, webhook_id)
        raise falcon.HTTPSeeOther(f"{webhooks_path(org_id)}?deleted={webhook_id}")
