"""API keys of an environment: create (the secret is answered once), list, revoke."""

from __future__ import annotations

from typing import Annotated

import falcon
import falcon.asgi
import msgspec
from flagsight_core.contract import MAX_NAME_LENGTH
from msgspec import Meta

from api.controlplane.model import ApiKey as ApiKeyRecord
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Timestamp
from api.web.admin.environments import existing_environment
from api.web.admin.slices import Answer, Operation, Route, Slice
from api.web.jsonio import write_json

KeyId = Annotated[str, Meta(pattern="^key_[0-9a-f]{16}$")]


class ApiKey(msgspec.Struct):
    id: KeyId
    name: str
    createdAt: Timestamp


class NewApiKey(msgspec.Struct):
    id: KeyId
    name: str
    key: Annotated[
        str,
        Meta(pattern="^fsk_[A-Za-z0-9_-]{43}$",
             description="The secret. Shown only in this answer; only its hash is kept."),
    ]  # fmt: skip
    createdAt: Timestamp


class ApiKeyList(msgspec.Struct):
    items: list[ApiKey]


class ApiKeyCreate(Body):
    name: Annotated[str, Meta(min_length=0, max_length=MAX_NAME_LENGTH)] | None = None


def api_key(key: ApiKeyRecord) -> ApiKey:
    return ApiKey(key.id, key.name, key.created_at)


@falcon.before(require_admin)
class ApiKeysResource(AdminResource):
    """``/admin/v1/environments/{env_id}/api-keys``."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        await existing_environment(self, env_id)
        keys = await self.read(self.store.list_api_keys, env_id)
        write_json(resp, ApiKeyList([api_key(key) for key in keys]))

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        body = await self.optional_body(req, ApiKeyCreate)
        created = await self.write(self.store.create_api_key, env_id, body.name or "")
        record = created.record
        answer = NewApiKey(record.id, record.name, created.plaintext, record.created_at)
        write_json(resp, answer, status=201)
        resp.cache_control = ["no-store"]


@falcon.before(require_admin)
class ApiKeyResource(AdminResource):
    """``/admin/v1/api-keys/{key_id}``: DELETE revokes; the key gets 401 within a second."""

    async def on_delete(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, key_id: str
    ) -> None:
        await self.write(self.store.revoke_api_key, key_id)
        resp.status = falcon.HTTP_204


SLICE = Slice(
    Route("/environments/{env_id}/api-keys", ApiKeysResource, {
        "get": Operation("List an environment's keys (not revoked, without secrets)",
                         {200: Answer("Keys", ApiKeyList)}),
        "post": Operation("Create an API key; the secret is in this answer only",
                          {201: Answer("Created", NewApiKey)}, body=ApiKeyCreate,
                          body_required=False),
    }),
    Route("/api-keys/{key_id}", ApiKeyResource, {
        "delete": Operation("Revoke an API key (401 for it within one second)",
                            {204: Answer("Done; no body")}),
    }),
)  # fmt: skip
