"""``.../flags/{flag_key}/schedules``: flag bodies to apply at a set time (contract section
10); applied by every worker's ``ScheduleApplier`` (``api/jobs/schedules.py``)."""

from __future__ import annotations

from typing import Annotated, Any

import falcon
import falcon.asgi
import msgspec
from flagsight_core.contract import KEY_SCHEMA_PATTERN
from msgspec import Meta

from api.controlplane import documents
from api.controlplane.changes import FlagBody, ScheduleState
from api.controlplane.changes import Schedule as ScheduleRecord
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Timestamp, convert, one_of, words
from api.web.admin.environments import existing_environment
from api.web.admin.error_messages import schedule_error
from api.web.admin.flags import ScheduledFlag, Time, moment
from api.web.admin.slices import Answer, Operation, Route, Slice, key_param
from api.web.jsonio import write_json

NOT_AN_OBJECT = "The field 'flag' must be a JSON object"
StateName = one_of(ScheduleState)


class ScheduleCreate(Body):
    at: Annotated[Time, Meta(description="With offset; a year from 1970 to 9999")]
    flag: Annotated[ScheduledFlag, Meta(extra=words(required=NOT_AN_OBJECT, type=NOT_AN_OBJECT))]

    checks = {"at": lambda text, place: moment(text, place.label("at"))}

    def parsed(self) -> tuple[float, FlagBody]:
        """The time (unix seconds) and the flag body to apply then."""
        return moment(self.at, "at"), self.flag.flag_body()


def schedule_of(body: Any) -> tuple[float, FlagBody]:
    """A schedule from plain JSON values (the dashboard's form): 400 as the API says."""
    return convert(ScheduleCreate, body).parsed()


class Schedule(msgspec.Struct):
    id: Annotated[str, Meta(pattern="^sch_[0-9a-f]{16}$")]
    flagKey: Annotated[str, Meta(pattern=KEY_SCHEMA_PATTERN)]
    at: Timestamp
    flag: ScheduledFlag
    state: StateName
    createdAt: Timestamp
    appliedAt: Timestamp | None
    error: str | None


class ScheduleList(msgspec.Struct):
    items: list[Schedule]


def schedule(made: ScheduleRecord) -> Schedule:
    """The schedule's document, a failed one's ``error`` in the API's words."""
    return Schedule(**{**documents.schedule(made), "error": schedule_error(made)})


@falcon.before(require_admin)
class SchedulesResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        key_param(flag_key, "flagKey")
        await existing_environment(self, env_id)
        schedules = await self.read(self.store.list_schedules, env_id, flag_key)
        write_json(resp, ScheduleList([schedule(made) for made in schedules]))

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        key_param(flag_key, "flagKey")
        at, flag = (await self.body(req, ScheduleCreate)).parsed()
        made = await self.write(self.store.create_schedule, env_id, flag_key, at, flag)
        write_json(resp, schedule(made), status=201)


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


SLICE = Slice(
    Route("/environments/{env_id}/flags/{flag_key}/schedules", SchedulesResource, {
        "get": Operation("The flag's scheduled changes, by time (every state)",
                         {200: Answer("Schedules", ScheduleList)},
                         errors={400: "The flag key does not match its pattern"}),
        "post": Operation("Schedule a flag body to be applied at a time",
                          {201: Answer("Scheduled", Schedule)}, body=ScheduleCreate),
    }),
    Route("/environments/{env_id}/flags/{flag_key}/schedules/{schedule_id}", ScheduleResource, {
        "delete": Operation("Cancel a pending schedule", {204: Answer("Done; no body")}),
    }),
)  # fmt: skip
