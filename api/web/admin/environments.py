"""Environments of an organization: create, list, read, rename, switch insights."""

from __future__ import annotations

from typing import Annotated

import falcon
import falcon.asgi
import msgspec
from flagsight_core.contract import KEY_SCHEMA_PATTERN
from msgspec import Meta

from api.controlplane import documents, model
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Key, Name
from api.web.admin.organizations import existing_organization
from api.web.admin.slices import Answer, Operation, Route, Slice
from api.web.errors import NotFound
from api.web.jsonio import write_json


class Environment(msgspec.Struct):
    id: Annotated[str, Meta(pattern="^env_[0-9a-f]{16}$")]
    key: Annotated[str, Meta(pattern=KEY_SCHEMA_PATTERN)]
    name: str
    insightsEnabled: bool


class EnvironmentList(msgspec.Struct):
    items: list[Environment]


class EnvironmentCreate(Body):
    key: Key
    name: Annotated[Name, Meta(description="Defaults to the key")] | None = None
    insightsEnabled: bool | None = False


class EnvironmentUpdate(Body):
    name: Name | None = None
    insightsEnabled: bool | None = None


def environment(env: model.Environment) -> Environment:
    return Environment(**documents.environment(env))


async def existing_environment(resource: AdminResource, environment_id: str) -> model.Environment:
    found = await resource.read(resource.store.get_environment, environment_id)
    if found is None:
        raise NotFound(f"Environment '{environment_id}' does not exist")
    return found


@falcon.before(require_admin)
class EnvironmentsResource(AdminResource):
    """``/admin/v1/organizations/{org_id}/environments``."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await existing_organization(self, org_id)
        environments = await self.read(self.store.list_environments, org_id)
        write_json(resp, EnvironmentList([environment(e) for e in environments]))

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        body = await self.body(req, EnvironmentCreate)
        created = await self.write(
            self.store.create_environment, org_id, body.key, body.name, bool(body.insightsEnabled)
        )
        write_json(resp, environment(created), status=201)


@falcon.before(require_admin)
class EnvironmentResource(AdminResource):
    """``/admin/v1/environments/{env_id}``."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        write_json(resp, environment(await existing_environment(self, env_id)))

    async def on_patch(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        body = await self.body(req, EnvironmentUpdate)
        updated = await self.write(
            self.store.update_environment, env_id, name=body.name,
            insights_enabled=body.insightsEnabled,
        )  # fmt: skip
        write_json(resp, environment(updated))


SLICE = Slice(
    Route("/organizations/{org_id}/environments", EnvironmentsResource, {
        "get": Operation("List an organization's environments",
                         {200: Answer("Environments", EnvironmentList)}),
        "post": Operation("Create an environment", {201: Answer("Created", Environment)},
                          body=EnvironmentCreate, errors={409: None}),
    }),
    Route("/environments/{env_id}", EnvironmentResource, {
        "get": Operation("Read an environment", {200: Answer("The environment", Environment)}),
        "patch": Operation("Rename an environment or switch insights",
                           {200: Answer("Updated", Environment)}, body=EnvironmentUpdate),
    }),
)  # fmt: skip
