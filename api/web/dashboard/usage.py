"""The Usage page: this month's evaluations against the plan's limit.

The figures are the admin API's usage answer (``api.web.usage_answer.usage`` over the shared
meter), so the page and ``GET /admin/v1/organizations/{id}/usage`` never disagree. States, as
contract section 4 defines them: within the limit; overage (above the limit, still served, up
to 110 %); blocked (at the hard threshold: every evaluation answers PLAN_LIMIT_EXCEEDED until
the next UTC month).
"""

from __future__ import annotations

from typing import Any

import falcon
import falcon.asgi

from api.metering.meter import month_of
from api.web import usage_answer
from api.web.dashboard.base import PREFIX, Page, organization_crumbs, signed_in

BAR_WIDTH = 600


def usage_state(usage: dict[str, Any]) -> str:
    if usage["blocked"]:
        return "blocked"
    return "overage" if usage["overage"] else "within"


def bar(usage: dict[str, Any]) -> dict[str, float]:
    """Geometry of the usage bar: the scale runs to 120 % of the limit, so both thresholds
    (100 % and 110 %) are always visible."""
    scale = usage["limit"] * 1.2
    return {
        "used": min(usage["evaluations"] / scale, 1.0) * BAR_WIDTH,
        "limit": usage["limit"] / scale * BAR_WIDTH,
        "hard": usage["hardLimit"] / scale * BAR_WIDTH,
        "width": BAR_WIDTH,
    }


@falcon.before(signed_in)
class UsagePage(Page):
    """``/dashboard/organizations/{org_id}/usage``."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        organization = await self.organization(org_id)
        month = month_of(self.services.clock())
        evaluations = await self.read(usage_answer.counted, self.services.meter, org_id, month)
        usage = usage_answer.usage(organization, month, evaluations)
        self.render(
            req, resp, "usage.html", organization=organization, usage=usage,
            state=usage_state(usage), share=evaluations / usage["limit"] * 100, bar=bar(usage),
            crumbs=[*organization_crumbs(organization), ("Usage", f"{PREFIX}/organizations/{org_id}/usage")],
        )  # fmt: skip
