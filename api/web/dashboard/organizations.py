"""Organizations and their environments, including each environment's insights switch.

Creation applies the admin API's rules through the same store calls: plans and their limits
(``resolve_monthly_limit``), key syntax and uniqueness. Store errors come back as the admin
API's messages (``error_messages``), next to the field they concern.
"""

from __future__ import annotations

import falcon
import falcon.asgi
from flagsight_core.contract import KEY_IN_WORDS, KEY_PATTERN, MAX_NAME_LENGTH

from api.controlplane.errors import ConflictError, InvalidError
from api.controlplane.model import PLAN_MONTHLY_LIMITS, Plan
from api.controlplane.store import MAX_MONTHLY_LIMIT
from api.web.admin.error_messages import message
from api.web.dashboard.base import PREFIX, Page, organization_crumbs, signed_in
from api.web.dashboard.forms import Form

PLANS = [(plan.value, PLAN_MONTHLY_LIMITS[plan]) for plan in Plan]
_FORM_FIELDS = {"monthly_evaluation_limit": "monthly_limit", "name": "name", "key": "key"}
"""The store's fields (``InvalidError.field``) as this page's form names them."""


def _name_error(name: str) -> str | None:
    if not 0 < len(name) <= MAX_NAME_LENGTH:
        return f"Enter a name of 1 to {MAX_NAME_LENGTH} characters."
    return None


def _limit(text: str) -> int | None | str:
    """The typed limit: None when blank, an int, or the error message.

    Only ASCII digits count (``str.isdigit`` accepts ``²``, which ``int`` refuses), and no
    more of them than the largest limit has: ``int`` refuses over 4,300 digits, and the store
    gives the range's own message for anything shorter.
    """
    if not text.strip():
        return None
    cleaned = text.strip().replace(",", "").replace("_", "").replace(" ", "")
    if not (cleaned.isascii() and cleaned.isdigit()):
        return "Enter a whole number of evaluations."
    if len(cleaned.lstrip("0")) > len(str(MAX_MONTHLY_LIMIT)):
        return f"Enter a whole number of evaluations from 1 to {MAX_MONTHLY_LIMIT}."
    return int(cleaned)


@falcon.before(signed_in)
class OrganizationsPage(Page):
    """``/dashboard/organizations``: every organization, and a form to create one."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        await self._show(req, resp)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        form = await self.form(req)
        name, plan_text = form.get("name").strip(), form.get("plan")
        errors: dict[str, str] = {}
        if error := _name_error(name):
            errors["name"] = error
        if plan_text not in Plan._value2member_map_:
            errors["plan"] = "Choose a plan."
        limit = _limit(form.get("monthly_limit"))
        if isinstance(limit, str):
            errors["monthly_limit"] = limit
        if not errors:
            try:
                limit_value = None if isinstance(limit, str) else limit
                organization = await self.write(
                    self.store.create_organization, name, Plan(plan_text), limit_value
                )
            except InvalidError as exc:
                errors[_FORM_FIELDS.get(exc.field, "name")] = message(exc)
            else:
                raise falcon.HTTPSeeOther(f"{PREFIX}/organizations/{organization.id}")
        await self._show(req, resp, status=400, errors=errors, form=form)

    async def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        *,
        status: int = 200,
        errors: dict[str, str] | None = None,
        form: Form | None = None,
    ) -> None:
        organizations = await self.read(self.store.list_organizations)
        self.render(
            req, resp, "organizations.html", status=status, organizations=organizations,
            plans=PLANS, errors=errors or {}, form=form or Form(),
            crumbs=[("Organizations", f"{PREFIX}/organizations")],
        )  # fmt: skip


@falcon.before(signed_in)
class OrganizationPage(Page):
    """``/dashboard/organizations/{org_id}``: its plan and environments (with their insights
    switches), and a form to add an environment (``POST``)."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await self._show(req, resp, org_id)

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await self.organization(org_id)
        form = await self.form(req)
        key, name = form.get("key").strip(), form.get("name").strip()
        errors: dict[str, str] = {}
        if not KEY_PATTERN.fullmatch(key):
            errors["key"] = f"Use {KEY_IN_WORDS} (e.g. production)."
        if name and (error := _name_error(name)):
            errors["name"] = error
        if not errors:
            try:
                await self.write(
                    self.store.create_environment, org_id, key, name or None,
                    form.get("insights") == "on",
                )  # fmt: skip
            except ConflictError as exc:
                errors[exc.field or "key"] = (
                    f"This organization already has an environment '{key}'."
                )
            except InvalidError as exc:
                errors[_FORM_FIELDS.get(exc.field, "key")] = message(exc)
            else:
                raise falcon.HTTPSeeOther(f"{PREFIX}/organizations/{org_id}")
        await self._show(req, resp, org_id, status=400, errors=errors, form=form)

    async def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        org_id: str,
        *,
        status: int = 200,
        errors: dict[str, str] | None = None,
        form: Form | None = None,
    ) -> None:
        organization = await self.organization(org_id)
        environments = await self.read(self.store.list_environments, org_id)
        self.render(
            req, resp, "organization.html", status=status, organization=organization,
            environments=environments, errors=errors or {}, form=form or Form(),
            crumbs=organization_crumbs(organization),
        )  # fmt: skip


@falcon.before(signed_in)
class InsightsSwitchAction(Page):
    """``POST /dashboard/environments/{env_id}/insights``: ``enabled=true|false``.

    The state is sent, not flipped, so a repeated or stale submission cannot invert it.
    """

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        environment, _organization = await self.environment(env_id)
        enabled = (await self.form(req)).get("enabled") == "true"
        await self.write(self.store.update_environment, env_id, insights_enabled=enabled)
        raise falcon.HTTPSeeOther(f"{PREFIX}/organizations/{environment.organization_id}")
