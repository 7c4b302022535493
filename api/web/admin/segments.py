"""Segments of an organization: a key and a set of up to 1,000,000 user identifiers."""

from __future__ import annotations

import falcon
import falcon.asgi

from api.web.admin import fields, views
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.organizations import existing_organization
from api.web.errors import NotFound
from api.web.jsonio import write_json


@falcon.before(require_admin)
class SegmentsResource(AdminResource):
    """``/admin/v1/organizations/{org_id}/segments``: summaries, without identifiers."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await existing_organization(self, org_id)
        segments = await self.read(self.store.list_segments, org_id)
        write_json(resp, views.items(views.segment(s) for s in segments))


@falcon.before(require_admin)
class SegmentResource(AdminResource):
    """``/admin/v1/organizations/{org_id}/segments/{segment_key}``.

    PUT replaces the whole set and answers 200 with the summary (``key``, ``size``,
    ``updatedAt``: a million identifiers are not echoed back); GET adds ``userIdentifiers``.
    """

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        segment = await self.read(self.store.get_segment, org_id, segment_key)
        members = await self.read(self.store.segment_members, org_id, segment_key)
        if segment is None or members is None:
            raise NotFound(f"Segment '{segment_key}' does not exist in organization '{org_id}'")
        write_json(resp, views.segment(segment, members))

    async def on_put(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        fields.key_param(segment_key, "segmentKey")
        users = fields.user_identifiers(await self.body(req))
        segment, _created = await self.write(self.store.put_segment, org_id, segment_key, users)
        write_json(resp, views.segment(segment))

    async def on_delete(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        await self.write(self.store.delete_segment, org_id, segment_key)
        resp.status = falcon.HTTP_204
