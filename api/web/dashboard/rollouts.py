"""Starting and stopping a flag's guarded rollout from its insights page.

The form is the admin API's body in form fields (steps as a comma-separated list, minutes per
step, guardrails as checkboxes), validated by the same ``fields.rollout_plan``; an invalid
plan, or a flag without a percentage rule, shows the insights page again with the message.
"""

from __future__ import annotations

import falcon
import falcon.asgi

from api.controlplane.changes import GUARDRAILS
from api.controlplane.errors import ControlPlaneError
from api.web.admin import fields
from api.web.admin.error_messages import message
from api.web.dashboard.base import signed_in
from api.web.dashboard.forms import Form
from api.web.dashboard.insights import InsightsView, insights_path
from api.web.errors import BadRequest


def plan_body(form: Form) -> dict[str, object]:
    """The admin API's rollout body from the dashboard's form (numbers parsed, not checked)."""
    steps: list[object] = []
    for part in (form.get("steps") or "").split(","):
        text = part.strip()
        try:
            steps.append(float(text))
        except ValueError:
            steps.append(text)
    minutes_text = (form.get("step_minutes") or "").strip()
    try:
        minutes: object = float(minutes_text)
    except ValueError:
        minutes = minutes_text
    chosen = [g for g in GUARDRAILS if form.get(f"guardrail_{g}") == "on"]
    return {"steps": steps, "stepMinutes": minutes, "guardrails": chosen}


@falcon.before(signed_in)
class StartRolloutAction(InsightsView):
    """``POST .../flags/{flag_key}/rollout``: start (or restart) a guarded rollout."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await self.flag(env_id, flag_key)
        form = await self.form(req)
        try:
            plan = fields.rollout_plan(plan_body(form))
            await self.write(self.store.start_rollout, env_id, flag_key, plan)
        except (BadRequest, ControlPlaneError) as exc:
            resp.status = falcon.HTTP_400
            await self.show(
                req, resp, env_id, flag_key, rollout_error=_message(exc), rollout_form=form
            )
            return
        raise falcon.HTTPSeeOther(f"{insights_path(env_id, flag_key)}#rollout")


@falcon.before(signed_in)
class StopRolloutAction(InsightsView):
    """``POST .../flags/{flag_key}/rollout/stop``: forget the rollout, percentage kept."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await self.flag(env_id, flag_key)
        await self.form(req)  # the CSRF token
        try:
            await self.write(self.store.stop_rollout, env_id, flag_key)
        except ControlPlaneError as exc:
            resp.status = falcon.HTTP_400
            await self.show(req, resp, env_id, flag_key, rollout_error=_message(exc))
            return
        raise falcon.HTTPSeeOther(f"{insights_path(env_id, flag_key)}#rollout")


def _message(exc: BadRequest | ControlPlaneError) -> str:
    return message(exc) if isinstance(exc, ControlPlaneError) else str(exc.description)
