"""``.../flags/{flag_key}/schedules``: flag bodies to apply at a set time (contract section
10); applied by every worker's ``ScheduleApplier`` (``api/jobs/schedules.py``)."""

from __future__ import annotations

import falcon
import falcon.asgi

from api.web.admin import fields, views
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.environments import existing_environment
from api.web.jsonio import require_object, write_json


@falcon.before(require_admin)
class SchedulesResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        fields.key_param(flag_key, "flagKey")
        await existing_environment(self, env_id)
        schedules = await self.read(self.store.list_schedules, env_id, flag_key)
        write_json(resp, views.items(map(views.schedule, schedules)))

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        fields.key_param(flag_key, "flagKey")
        body = await self.body(req)
        at = fields.moment(body, "at")
        flag = fields.flag_body(require_object(body.get("flag"), "field 'flag'"), "flag.")
        schedule = await self.write(self.store.create_schedule, env_id, flag_key, at, flag)
        write_json(resp, views.schedule(schedule), status=201)


@falcon.before(require_admin)
class ScheduleResource(AdminResource):
    async def on_delete(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        env_id: str,
        flag_key: str,
        schedule_id: str,
    ) -> None:
        await self.write(self.store.cancel_schedule, env_id, flag_key, schedule_id)
        resp.status = falcon.HTTP_204
