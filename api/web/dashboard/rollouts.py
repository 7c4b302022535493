"""Starting and stopping a flag's guarded rollout from its insights page.

The form is the admin API's body in form fields (steps as a comma-separated list, minutes per
step, guardrails as checkboxes, the organization's metrics among them as ``metric:<key>``, a
tolerance per guardrail), validated by the same ``rollout_plan`` (``api/web/admin/rollouts.py``)
and the store (a metric guardrail's tolerance); an invalid plan, or a flag without a percentage
rule, shows the insights page again with the message.
"""

from __future__ import annotations

from collections.abc import Sequence

import falcon
import falcon.asgi

from api.controlplane.changes import GUARDRAILS, metric_guardrail
from api.controlplane.errors import ControlPlaneError
from api.web.admin.error_messages import message
from api.web.admin.rollouts import rollout_plan
from api.web.dashboard.base import signed_in
from api.web.dashboard.forms import Form
from api.web.dashboard.insights import InsightsView, insights_path
from api.web.errors import BadRequest


def plan_body(form: Form, offered: Sequence[str] = GUARDRAILS) -> dict[str, object]:
    """The admin API's rollout body from the dashboard's form (numbers parsed, not checked):
    the ``offered`` guardrails ticked, in their order, and a tolerance for each whose field is
    filled, the others at their defaults."""
    steps = [_number(part) for part in form.get("steps").split(",")]
    chosen = [g for g in offered if form.get(f"guardrail_{g}") == "on"]
    tolerances = {
        g: _number(form.get(f"tolerance_{g}")) for g in chosen if form.get(f"tolerance_{g}").strip()
    }
    return {
        "steps": steps,
        "stepMinutes": _number(form.get("step_minutes")),
        "guardrails": chosen,
        "tolerances": tolerances,
    }


def _number(text: str) -> object:
    """A number as typed; text that is not one stays text, so the admin API's check refuses
    it in its own words, naming its field."""
    try:
        return float(text.strip())
    except ValueError:
        return text.strip()


@falcon.before(signed_in)
class StartRolloutAction(InsightsView):
    """``POST .../flags/{flag_key}/rollout``: start (or restart) a guarded rollout."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        _flag, environment, _organization = await self.flag(env_id, flag_key)
        form = await self.form(req)
        metrics = await self.read(self.store.list_metrics, environment.organization_id)
        offered = [*GUARDRAILS, *(metric_guardrail(m.key) for m in metrics)]
        try:
            plan = rollout_plan(plan_body(form, offered))
            await self.write(self.store.start_rollout, env_id, flag_key, plan)
        except (BadRequest, ControlPlaneError) as exc:
            await self.show(
                req, resp, env_id, flag_key, status=400, rollout_error=_message(exc),
                rollout_form=form,
            )  # fmt: skip
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
            await self.show(req, resp, env_id, flag_key, status=400, rollout_error=_message(exc))
            return
        raise falcon.HTTPSeeOther(f"{insights_path(env_id, flag_key)}#rollout")


def _message(exc: BadRequest | ControlPlaneError) -> str:
    return message(exc) if isinstance(exc, ControlPlaneError) else str(exc.description)
