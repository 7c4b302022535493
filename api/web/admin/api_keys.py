"""API keys of an environment: create (the secret is answered once), list, revoke."""

from __future__ import annotations

import falcon
import falcon.asgi

from api.web.admin import fields, views
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.environments import existing_environment
from api.web.jsonio import write_json


@falcon.before(require_admin)
class ApiKeysResource(AdminResource):
    """``/admin/v1/environments/{env_id}/api-keys``."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        await existing_environment(self, env_id)
        keys = await self.read(self.store.list_api_keys, env_id)
        write_json(resp, views.items(views.api_key(key) for key in keys))

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        body = await self.optional_body(req)
        name = fields.optional_name(body, min_len=0) or ""
        created = await self.write(self.store.create_api_key, env_id, name)
        write_json(resp, views.api_key(created.record, created.plaintext), status=201)
        resp.cache_control = ["no-store"]


@falcon.before(require_admin)
class ApiKeyResource(AdminResource):
    """``/admin/v1/api-keys/{key_id}``: DELETE revokes; the key gets 401 within a second."""

    async def on_delete(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, key_id: str
    ) -> None:
        await self.write(self.store.revoke_api_key, key_id)
        resp.status = falcon.HTTP_204
