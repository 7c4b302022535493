"""``/admin/v1/organizations``: create, list, read, change plan, and monthly usage."""

from __future__ import annotations

import falcon
import falcon.asgi

from api.controlplane.model import Organization
from api.metering.meter import month_of
from api.web import usage_answer
from api.web.admin import fields, views
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.errors import NotFound
from api.web.jsonio import write_json


async def existing_organization(resource: AdminResource, organization_id: str) -> Organization:
    organization = await resource.read(resource.store.get_organization, organization_id)
    if organization is None:
        raise NotFound(f"Organization '{organization_id}' does not exist")
    return organization


@falcon.before(require_admin)
class OrganizationsResource(AdminResource):
    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        organizations = await self.read(self.store.list_organizations)
        write_json(resp, views.items(map(views.organization, organizations)))

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        body = await self.body(req)
        name, plan = fields.name(body), fields.plan(body, required=True)
        limit = fields.monthly_limit(body)
        organization = await self.write(self.store.create_organization, name, plan, limit)
        write_json(resp, views.organization(organization), status=201)


@falcon.before(require_admin)
class OrganizationResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        write_json(resp, views.organization(await existing_organization(self, org_id)))

    async def on_patch(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        body = await self.body(req)
        plan, limit = fields.plan(body, required=False), fields.monthly_limit(body)
        organization = await self.write(
            self.store.update_organization, org_id, plan=plan, monthly_evaluation_limit=limit
        )
        write_json(resp, views.organization(organization))


@falcon.before(require_admin)
class UsageResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        organization = await existing_organization(self, org_id)
        month = month_of(self.services.clock())
        evaluations = await self.read(self.services.meter.usage, org_id, month)
        write_json(resp, usage_answer.usage(organization, month, evaluations))
