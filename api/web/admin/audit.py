"""The audit log (contract section 10): an organization's records, newest first, and the
one-call restore of a record's target to what it was before that change."""

from __future__ import annotations

from typing import Annotated, Any

import falcon
import falcon.asgi
import msgspec
from msgspec import Meta

from api.controlplane import changes, documents
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Timestamp, one_of, words
from api.web.admin.organizations import existing_organization
from api.web.admin.slices import Answer, Operation, Route, Slice
from api.web.jsonio import write_json

MAX_LIMIT = 1000
ActorName = one_of(changes.Actor)


class AuditQuery(Body):
    limit: Annotated[
        int,
        Meta(ge=1, le=MAX_LIMIT, extra=words(
            every=f"Query parameter 'limit' must be an integer from 1 to {MAX_LIMIT}")),
    ] = MAX_LIMIT  # fmt: skip


class AuditRecord(msgspec.Struct):
    id: Annotated[str, Meta(pattern="^aud_[0-9a-f]{16}$")]
    at: Timestamp
    actor: ActorName
    action: Annotated[str, Meta(description="e.g. flag.updated, restore")]
    target: Annotated[str, Meta(description="kind:id, e.g. flag:env_…/checkout")]
    before: Annotated[dict[str, Any] | None, Meta(description="null when it did not exist")]
    after: Annotated[dict[str, Any] | None, Meta(description="null when it no longer exists")]
    restoredFrom: str | None


class AuditList(msgspec.Struct):
    items: list[AuditRecord]


def audit(record: changes.AuditRecord) -> AuditRecord:
    """As ``documents.shown_audit`` shows it (a webhook's URL without its user information)."""
    shown = documents.shown_audit(record)
    return AuditRecord(
        shown.id, shown.at, shown.actor, shown.action, shown.target, shown.before, shown.after,
        shown.restored_from,
    )  # fmt: skip


@falcon.before(require_admin)
class AuditResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        limit = self.query(req, AuditQuery).limit
        await existing_organization(self, org_id)
        records = await self.read(self.store.list_audit, org_id, limit)
        write_json(resp, AuditList([audit(record) for record in records]))


@falcon.before(require_admin)
class RestoreResource(AdminResource):
    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, audit_id: str
    ) -> None:
        record = await self.write(self.store.restore, audit_id)
        write_json(resp, audit(record), status=201)


SLICE = Slice(
    Route("/organizations/{org_id}/audit", AuditResource, {
        "get": Operation("The organization's audit log, newest first",
                         {200: Answer("Records", AuditList)}, query=AuditQuery,
                         errors={400: None}),
    }),
    Route("/audit/{audit_id}/restore", RestoreResource, {
        "post": Operation("Put the record's target back as it was before that change",
                          {201: Answer("The restore's own audit record", AuditRecord)},
                          errors={409: "That target cannot be restored (see docs/admin-api.md)"}),
    }),
)  # fmt: skip
