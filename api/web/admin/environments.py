"""Environments of an organization: create, list, read, rename, switch insights."""

from __future__ import annotations

import falcon
import falcon.asgi

from api.controlplane.model import Environment
from api.web.admin import fields, views
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.organizations import existing_organization
from api.web.errors import NotFound
from api.web.jsonio import write_json


async def existing_environment(resource: AdminResource, environment_id: str) -> Environment:
    environment = await resource.read(resource.store.get_environment, environment_id)
    if environment is None:
        raise NotFound(f"Environment '{environment_id}' does not exist")
    return environment


@falcon.before(require_admin)
class EnvironmentsResource(AdminResource):
    """``/admin/v1/organizations/{org_id}/environments``."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await existing_organization(self, org_id)
        environments = await self.read(self.store.list_environments, org_id)
        write_json(resp, views.items(map(views.environment, environments)))

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        body = await self.body(req)
        key, name = fields.environment_key(body), fields.optional_name(body)
        insights = bool(fields.optional_bool(body, "insightsEnabled"))
        environment = await self.write(self.store.create_environment, org_id, key, name, insights)
        write_json(resp, views.environment(environment), status=201)


@falcon.before(require_admin)
class EnvironmentResource(AdminResource):
    """``/admin/v1/environments/{env_id}``."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        write_json(resp, views.environment(await existing_environment(self, env_id)))

    async def on_patch(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        body = await self.body(req)
        name, insights = fields.optional_name(body), fields.optional_bool(body, "insightsEnabled")
        environment = await self.write(
            self.store.update_environment, env_id, name=name, insights_enabled=insights
        )
        write_json(resp, views.environment(environment))
