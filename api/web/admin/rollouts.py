"""``.../flags/{flag_key}/rollout``: start (PUT), watch (GET) and stop (DELETE) a guarded
rollout of the flag's first percentage rule (contract section 10). The guardian that judges
it runs in the insights pipeline (``pipelines/assets/rollout_decisions.py``)."""

from __future__ import annotations

import falcon
import falcon.asgi

from api.web.admin import fields, views
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.environments import existing_environment
from api.web.errors import NotFound
from api.web.jsonio import write_json


@falcon.before(require_admin)
class RolloutResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await existing_environment(self, env_id)
        rollout = await self.read(self.store.get_rollout, env_id, flag_key)
        if rollout is None:
            raise NotFound(f"Flag '{flag_key}' has no rollout in environment '{env_id}'")
        write_json(resp, views.rollout(rollout))

    async def on_put(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        fields.key_param(flag_key, "flagKey")
        plan = fields.rollout_plan(await self.optional_body(req))
        rollout = await self.write(self.store.start_rollout, env_id, flag_key, plan)
        write_json(resp, views.rollout(rollout))

    async def on_delete(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await self.write(self.store.stop_rollout, env_id, flag_key)
        resp.status = falcon.HTTP_204
