"""Segments of an organization: a key and a set of up to 1,000,000 user identifiers."""

from __future__ import annotations

from typing import Annotated

import falcon
import falcon.asgi
import msgspec
from flagsight_core.contract import KEY_SCHEMA_PATTERN, MAX_SEGMENT_SIZE, USER_IDENTIFIER_MAX
from msgspec import UNSET, Meta, UnsetType

from api.controlplane import documents, model
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Timestamp, words
from api.web.admin.organizations import existing_organization
from api.web.admin.slices import Answer, Operation, Route, Slice, key_param
from api.web.errors import NotFound
from api.web.jsonio import write_json

UserIdentifier = Annotated[
    str,
    Meta(min_length=1, max_length=USER_IDENTIFIER_MAX,
         extra=words(every="Field '{label}' must be a string of 1 to"
                           f" {USER_IDENTIFIER_MAX} characters")),
]  # fmt: skip


class Segment(msgspec.Struct):
    key: Annotated[str, Meta(pattern=KEY_SCHEMA_PATTERN)]
    size: Annotated[int, Meta(ge=0, description="Distinct identifiers")]
    updatedAt: Timestamp
    userIdentifiers: (
        Annotated[
            list[str],
            Meta(
                description="Only in GET of one segment: the distinct identifiers, in the"
                " order first given."
            ),
        ]  # fmt: skip
        | UnsetType
    ) = UNSET


class SegmentList(msgspec.Struct):
    items: list[Segment]


class SegmentPut(Body):
    userIdentifiers: Annotated[list[UserIdentifier], Meta(max_length=MAX_SEGMENT_SIZE)]


def segment(seg: model.Segment, user_identifiers: list[str] | None = None) -> Segment:
    """``userIdentifiers`` only when reading one segment (a list or PUT answer leaves it out)."""
    members = UNSET if user_identifiers is None else user_identifiers
    return Segment(**documents.segment(seg), userIdentifiers=members)


@falcon.before(require_admin)
class SegmentsResource(AdminResource):
    """``/admin/v1/organizations/{org_id}/segments``: summaries, without identifiers."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await existing_organization(self, org_id)
        segments = await self.read(self.store.list_segments, org_id)
        write_json(resp, SegmentList([segment(s) for s in segments]))


@falcon.before(require_admin)
class SegmentResource(AdminResource):
    """``/admin/v1/organizations/{org_id}/segments/{segment_key}``.

    PUT replaces the whole set and answers 200 with the summary (``key``, ``size``,
    ``updatedAt``: a million identifiers are not echoed back); GET adds ``userIdentifiers``.
    """

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        found = await self.read(self.store.get_segment, org_id, segment_key)
        members = await self.read(self.store.segment_members, org_id, segment_key)
        if found is None or members is None:
            raise NotFound(f"Segment '{segment_key}' does not exist in organization '{org_id}'")
        write_json(resp, segment(found, members))

    async def on_put(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        key_param(segment_key, "segmentKey")
        body = await self.body(req, SegmentPut)
        stored, _created = await self.write(
            self.store.put_segment, org_id, segment_key, body.userIdentifiers
        )
        write_json(resp, segment(stored))

    async def on_delete(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        await self.write(self.store.delete_segment, org_id, segment_key)
        resp.status = falcon.HTTP_204


SLICE = Slice(
    Route("/organizations/{org_id}/segments", SegmentsResource, {
        "get": Operation("List an organization's segments (without identifiers)",
                         {200: Answer("Segments", SegmentList)}),
    }),
    Route("/organizations/{org_id}/segments/{segment_key}", SegmentResource, {
        "get": Operation("Read a segment with its identifiers",
                         {200: Answer("The segment", Segment)}),
        "put": Operation("Create or replace a segment",
                         {200: Answer("Stored (without identifiers)", Segment)}, body=SegmentPut),
        "delete": Operation("Delete a segment", {204: Answer("Done; no body")},
                            errors={409: None}),
    }),
)  # fmt: skip
