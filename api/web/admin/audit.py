"""The audit log (contract section 10): an organization's records, newest first, and the
one-call restore of a record's target to what it was before that change."""

from __future__ import annotations

import falcon
import falcon.asgi

from api.web.admin import views
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.organizations import existing_organization
from api.web.errors import BadRequest
from api.web.jsonio import write_json

MAX_LIMIT = 1000


@falcon.before(require_admin)
class AuditResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        limit = req.get_param("limit", default=str(MAX_LIMIT))
        if not limit.isdigit() or not 0 < int(limit) <= MAX_LIMIT:
            raise BadRequest(f"Query parameter 'limit' must be an integer from 1 to {MAX_LIMIT}")
        await existing_organization(self, org_id)
        records = await self.read(self.store.list_audit, org_id, int(limit))
        write_json(resp, views.items(map(views.audit, records)))


@falcon.before(require_admin)
class RestoreResource(AdminResource):
    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, audit_id: str
    ) -> None:
        record = await self.write(self.store.restore, audit_id)
        write_json(resp, views.audit(record), status=201)
