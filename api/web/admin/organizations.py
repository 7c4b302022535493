"""``/admin/v1/organizations``: create, list, read, change plan, and monthly usage."""

from __future__ import annotations

from typing import Annotated, Any

import falcon
import falcon.asgi
import msgspec
from msgspec import Meta

from api.controlplane import documents, model
from api.controlplane.model import PLAN_MONTHLY_LIMITS, Plan
from api.controlplane.store import MAX_MONTHLY_LIMIT
from api.metering.meter import month_of
from api.web import usage_answer
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Name, one_of, words
from api.web.admin.slices import Answer, Operation, Route, Slice
from api.web.errors import NotFound
from api.web.jsonio import write_json

PlanName = one_of(Plan)
Limit = Annotated[int, Meta(ge=1, le=MAX_MONTHLY_LIMIT)]
OptionalLimit = (
    Annotated[
        int,
        Meta(
            ge=1,
            le=MAX_MONTHLY_LIMIT,
            extra=words(type="Field '{label}' must be an integer or null"),
        ),
    ]  # fmt: skip
    | None
)


def _plan_rules() -> list[dict[str, Any]]:
    """The store's rules between the plan and the limit (``resolve_monthly_limit``), in JSON
    Schema: a plan without a limit of its own needs one; another plan's limit is its own, so
    a body may only echo it."""
    rules = []
    for plan, limit in PLAN_MONTHLY_LIMITS.items():
        when = {"required": ["plan"], "properties": {"plan": {"const": plan.value}}}
        if limit is None:
            then = {"required": ["monthlyEvaluationLimit"],
                    "properties": {"monthlyEvaluationLimit": {"type": "integer"}}}  # fmt: skip
        else:
            then = {"properties": {"monthlyEvaluationLimit": {"enum": [None, limit]}}}
        rules.append({"if": when, "then": then})
    return rules


class Organization(msgspec.Struct):
    id: Annotated[str, Meta(pattern="^org_[0-9a-f]{16}$")]
    name: str
    plan: PlanName
    monthlyEvaluationLimit: Limit


class OrganizationList(msgspec.Struct):
    items: list[Organization]


class OrganizationCreate(Body):
    """monthlyEvaluationLimit is required for enterprise; other plans take their plan's limit
    (a body may send exactly it)."""

    name: Name
    plan: PlanName
    monthlyEvaluationLimit: OptionalLimit = None

    schema_extra = {"allOf": _plan_rules()}


class OrganizationUpdate(Body):
    """A field left out or null is left unchanged. A limit can be chosen only on the
    enterprise plan: moving to free, pro or team takes that plan's limit (sending exactly it is
    accepted); moving to enterprise without a limit keeps the limit the organization has until
    one is chosen; a limit alone applies to an enterprise organization only (400 otherwise)."""

    plan: PlanName | None = None
    monthlyEvaluationLimit: OptionalLimit = None

    schema_extra = {"allOf": [rule for rule in _plan_rules() if "required" not in rule["then"]]}


class Usage(msgspec.Struct):
    month: Annotated[str, Meta(pattern="^[0-9]{4}-[0-9]{2}$")]
    evaluations: Annotated[int, Meta(ge=0)]
    limit: Limit
    hardLimit: Annotated[int, Meta(ge=1)]
    overage: Annotated[bool, Meta(description="evaluations > limit")]
    blocked: Annotated[bool, Meta(description="evaluations >= hardLimit")]


def organization(org: model.Organization) -> Organization:
    return Organization(**documents.organization(org))


async def existing_organization(
    resource: AdminResource, organization_id: str
) -> model.Organization:
    organization = await resource.read(resource.store.get_organization, organization_id)
    if organization is None:
        raise NotFound(f"Organization '{organization_id}' does not exist")
    return organization


@falcon.before(require_admin)
class OrganizationsResource(AdminResource):
    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        organizations = await self.read(self.store.list_organizations)
        write_json(resp, OrganizationList([organization(o) for o in organizations]))

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        body = await self.body(req, OrganizationCreate)
        created = await self.write(
            self.store.create_organization, body.name, Plan(body.plan), body.monthlyEvaluationLimit
        )
        write_json(resp, organization(created), status=201)


@falcon.before(require_admin)
class OrganizationResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        write_json(resp, organization(await existing_organization(self, org_id)))

    async def on_patch(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        body = await self.body(req, OrganizationUpdate)
        plan = None if body.plan is None else Plan(body.plan)
        updated = await self.write(
            self.store.update_organization, org_id, plan=plan,
            monthly_evaluation_limit=body.monthlyEvaluationLimit,
        )  # fmt: skip
        write_json(resp, organization(updated))


@falcon.before(require_admin)
class UsageResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        found = await existing_organization(self, org_id)
        month = month_of(self.services.clock())
        evaluations = await self.read(usage_answer.counted, self.services.meter, org_id, month)
        write_json(resp, Usage(**usage_answer.usage(found, month, evaluations)))


SLICE = Slice(
    Route("/organizations", OrganizationsResource, {
        "get": Operation("List organizations", {200: Answer("Every organization", OrganizationList)}),
        "post": Operation("Create an organization", {201: Answer("Created", Organization)},
                          body=OrganizationCreate),
    }),
    Route("/organizations/{org_id}", OrganizationResource, {
        "get": Operation("Read an organization", {200: Answer("The organization", Organization)}),
        "patch": Operation("Change an organization's plan or custom limit",
                           {200: Answer("Updated", Organization)}, body=OrganizationUpdate),
    }),
    Route("/organizations/{org_id}/usage", UsageResource, {
        "get": Operation("Evaluations metered this UTC month", {200: Answer("Usage", Usage)}),
    }),
)  # fmt: skip
