"""Webhooks of an organization (contract section 10): create (the secret is shown once),
list, delete. Deliveries come from the control plane's outbox (``api/jobs/webhooks.py``)."""

from __future__ import annotations

import falcon
import falcon.asgi

from api.web.admin import fields, views
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.organizations import existing_organization
from api.web.jsonio import write_json


@falcon.before(require_admin)
class WebhooksResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await existing_organization(self, org_id)
        hooks = await self.read(self.store.list_webhooks, org_id)
        write_json(resp, views.items(map(views.webhook, hooks)))

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        body = await self.body(req)
        allow_private = self.services.settings.webhook_allow_private
        url, events = fields.webhook_url(body, allow_private), fields.webhook_events(body)
        created = await self.write(self.store.create_webhook, org_id, url, events)
        write_json(resp, views.created_webhook(created), status=201)


@falcon.before(require_admin)
class WebhookResource(AdminResource):
    async def on_delete(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, webhook_id: str
    ) -> None:
        await self.write(self.store.delete_webhook, webhook_id)
        resp.status = falcon.HTTP_204
