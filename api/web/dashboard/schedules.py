"""A flag's schedules (contract section 10): the flag bodies set to apply at a given time,
with their state; schedule one, cancel a pending one.

The form is the admin API's body in form fields: ``at`` (a UTC time; the browser's date-time
field sends it without an offset, so one without an offset is read as UTC), the state
checkboxes and the rules as JSON (prefilled with the flag's rules now). It is validated by the
admin API's own body type (``schedule_of``, ``api/web/admin/schedules.py``) and written by the same store call,
so a refusal reads as the admin API's. Every worker applies a schedule within a second of its
time (``api/jobs/schedules.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import falcon
import falcon.asgi
import msgspec
from flagsight_core import rule_to_json

from api.controlplane.changes import FlagBody, Schedule, ScheduleState
from api.controlplane.documents import iso_time
from api.controlplane.errors import ControlPlaneError
from api.controlplane.model import Environment, FlagRecord, Organization
from api.web.admin.error_messages import schedule_error
from api.web.admin.errors import http_error
from api.web.admin.schedules import schedule_of
from api.web.dashboard.base import Page, environment_crumbs, signed_in
from api.web.dashboard.flags import flag_path, flags_path
from api.web.dashboard.forms import Form
from api.web.errors import BadRequest
from api.web.jsonio import decode_json

_WITHOUT_OFFSET = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?")
"""What a ``datetime-local`` field sends: a local time, which the form labels as UTC."""


def schedules_path(environment_id: str, flag_key: str) -> str:
    return f"{flag_path(environment_id, flag_key)}/schedules"


def rules_text(rules: list[dict[str, Any]]) -> str:
    """Rules as the JSON the form shows: one rule a line."""
    if not rules:
        return "[]"
    lines = ",\n".join("  " + msgspec.json.encode(rule).decode() for rule in rules)
    return f"[\n{lines}\n]"


def body_rules(body: FlagBody | FlagRecord) -> list[dict[str, Any]]:
    return [rule_to_json(rule) for rule in body.rules]


def schedule_body(form: Form) -> dict[str, Any]:
    """The admin API's schedule body from the form (parsed, not checked: ``schedule_of`` checks)."""
    at = form.get("at").strip()
    if _WITHOUT_OFFSET.fullmatch(at):
        at += "Z"
    text = form.get("rules").strip() or "[]"
    try:
        rules = decode_json(text.encode("utf-8"))
    except BadRequest as exc:
        detail = str(exc.description).partition(": ")[2]
        raise BadRequest(f"Field 'flag.rules' is not valid JSON: {detail}") from None
    flag = {"enabled": form.get("enabled") == "on", "archived": form.get("archived") == "on",
            "rules": rules}  # fmt: skip
    return {"at": at, "flag": flag}


def field_of(message: str) -> str:
    """The form field an admin API message names (``at`` or ``rules``)."""
    return "at" if message.startswith("Field 'at'") else "rules"


def default_time(now: float) -> str:
    """The next full hour (UTC), as the date-time field takes it."""
    moment = datetime.fromtimestamp(now, UTC).replace(minute=0, second=0, microsecond=0)
    return (moment + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")


@dataclass(frozen=True)
class ScheduleRow:
    """A schedule as the page lists it."""

    schedule: Schedule

    @classmethod
    def of(cls, schedule: Schedule) -> ScheduleRow:
        """The row, a failed schedule's ``error`` in the admin API's words (the page shows
        it as they are)."""
        return cls(replace(schedule, error=schedule_error(schedule)))

    @property
    def pending(self) -> bool:
        return self.schedule.state == ScheduleState.PENDING

    @property
    def at_iso(self) -> str:
        return iso_time(self.schedule.at)

    @property
    def rule_count(self) -> int:
        return len(self.schedule.flag.rules)

    @property
    def rules_json(self) -> str:
        return rules_text(body_rules(self.schedule.flag))


class SchedulesView(Page):
    """The schedules page, after a GET, a refused form or a refused cancel."""

    async def subject(
        self, env_id: str, flag_key: str
    ) -> tuple[FlagRecord | None, list[Schedule], Environment, Organization]:
        """The flag and its schedules; 404 unless the flag exists or has schedules (a flag
        deleted since keeps its schedules, and a pending one puts it back at its time)."""
        environment, organization = await self.environment(env_id)
        flag = await self.read(self.store.get_flag, env_id, flag_key)
        schedules = await self.read(self.store.list_schedules, env_id, flag_key)
        if flag is None and not schedules:
            raise self.not_found(f"Flag '{flag_key}' in environment '{environment.key}'")
        return flag, schedules, environment, organization

    async def show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        env_id: str,
        flag_key: str,
        *,
        status: int = 200,
        form: Form | None = None,
        errors: dict[str, str] | None = None,
        problem: str | None = None,
    ) -> None:
        flag, schedules, environment, organization = await self.subject(env_id, flag_key)
        rows = [ScheduleRow.of(schedule) for schedule in schedules]
        values = {
            "at": default_time(self.services.clock()),
            "rules": rules_text(body_rules(flag)) if flag else "[]",
            "enabled": "on" if flag and flag.enabled else "",
            "archived": "on" if flag and flag.archived else "",
        }
        if form is not None:
            values = {name: form.get(name) for name in values}
        self.render(
            req, resp, "schedules.html", status=status, flag=flag, flag_key=flag_key,
            environment=environment, organization=organization, rows=rows, values=values,
            errors=errors or {}, problem=problem, created=req.get_param("created"),
            cancelled=req.get_param("cancelled"), section="flags",
            crumbs=[*environment_crumbs(environment, organization),
                    ("Flags", flags_path(env_id)), (flag_key, flag_path(env_id, flag_key)),
                    ("Schedules", schedules_path(env_id, flag_key))],
        )  # fmt: skip


@falcon.before(signed_in)
class SchedulesPage(SchedulesView):
    """``/dashboard/environments/{env_id}/flags/{flag_key}/schedules``; ``POST`` schedules."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await self.show(req, resp, env_id, flag_key)

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await self.subject(env_id, flag_key)
        form = await self.form(req)
        try:
            body = schedule_body(form)
            at, flag = schedule_of(body)
            made = await self.write(self.store.create_schedule, env_id, flag_key, at, flag)
        except BadRequest as exc:
            message = str(exc.description)
            await self.show(req, resp, env_id, flag_key, status=400, form=form,
                            errors={field_of(message): message})  # fmt: skip
            return
        except ControlPlaneError as exc:  # a segment the rules name does not exist
            error = http_error(exc)
            await self.show(req, resp, env_id, flag_key, status=error.status_code, form=form,
                            errors={"rules": str(error.description)})  # fmt: skip
            return
        raise falcon.HTTPSeeOther(f"{schedules_path(env_id, flag_key)}?created={made.id}")


@falcon.before(signed_in)
class CancelScheduleAction(SchedulesView):
    """``POST .../schedules/{schedule_id}/cancel``: only a pending schedule can be cancelled."""

    async def on_post(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        env_id: str,
        flag_key: str,
        schedule_id: str,
    ) -> None:
        await self.subject(env_id, flag_key)
        await self.form(req)  # the CSRF token
        try:
            await self.write(self.store.cancel_schedule, env_id, flag_key, schedule_id)
        except ControlPlaneError as exc:  # applied, cancelled or unknown meanwhile: say so
            error = http_error(exc)
            await self.show(req, resp, env_id, flag_key, status=error.status_code,
                            problem=str(error.description))  # fmt: skip
            return
        raise falcon.HTTPSeeOther(f"{schedules_path(env_id, flag_key)}?cancelled={schedule_id}")
