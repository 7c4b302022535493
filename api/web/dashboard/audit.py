"""An organization's audit log, newest first, and restoring a change from it."""

from __future__ import annotations

import falcon
import falcon.asgi

from api.controlplane.documents import shown_audit
from api.controlplane.errors import ConflictError, InvalidError
from api.web.admin.error_messages import message, restore_refusal
from api.web.dashboard.base import Page, organization_crumbs, signed_in

SHOWN = 200
"""Records on the page (the admin API's ``GET .../audit`` lists them all)."""


def audit_path(organization_id: str) -> str:
    return f"/dashboard/organizations/{organization_id}/audit"


class AuditView(Page):
    """What renders the audit log: the page itself and a restore that shows it with its error."""

    async def show(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str,
        *, error: str | None = None, status: int = 200,
    ) -> None:  # fmt: skip
        organization = await self.organization(org_id)
        stored = await self.read(self.store.list_audit, org_id, SHOWN)
        records = [shown_audit(record) for record in stored]  # as the admin API shows them
        refusals = await self.read(self.store.restore_refusals, stored)  # offer what can work
        self.render(
            req, resp, "audit.html", status=status, organization=organization, records=records,
            refusals={audit_id: restore_refusal(exc) for audit_id, exc in refusals.items()},
            restored=req.get_param("restored"), error=error, section="audit",
            crumbs=[*organization_crumbs(organization), ("Audit log", req.path)],
        )  # fmt: skip


@falcon.before(signed_in)
class AuditPage(AuditView):
    """``/dashboard/organizations/{org_id}/audit``: who changed what, when, before and after."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await self.show(req, resp, org_id)


@falcon.before(signed_in)
class RestoreAction(AuditView):
    """``POST /dashboard/organizations/{org_id}/audit/{audit_id}/restore``."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, audit_id: str
    ) -> None:
        await self.form(req)  # the CSRF token
        record = await self.read(self.store.get_audit, audit_id)
        if record is None or record.organization_id != org_id:
            raise self.not_found(f"Audit record '{audit_id}'")
        try:
            restored = await self.write(self.store.restore, audit_id)
        except (ConflictError, InvalidError) as exc:  # not restorable now: say why
            await self.show(req, resp, org_id, error=message(exc), status=409)
            return
        raise falcon.HTTPSeeOther(f"{audit_path(org_id)}?restored={restored.id}")
