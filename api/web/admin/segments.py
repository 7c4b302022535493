"""Segments of an organization: a key, up to 1,000,000 user identifiers it lists, as many it
excludes, and up to 20 conditions on a user's attributes (contract 12: a user listed is in;
otherwise one excluded is out; otherwise the user is in when there are conditions and every
one holds)."""

from __future__ import annotations

from typing import Annotated, Any

import falcon
import falcon.asgi
import msgspec
from flagsight_core.conditions import (
    Condition,
    Operator,
    condition_schema,
    conditions_from_json,
    expression_size,
)
from flagsight_core.contract import (
    CONDITION_PROGRAM_MAX,
    CONDITIONS_MAX,
    KEY_SCHEMA_PATTERN,
    MAX_SEGMENT_SIZE,
    USER_IDENTIFIER_MAX,
)
from flagsight_core.registry import RuleError
from msgspec import UNSET, Meta, UnsetType

from api.controlplane import documents, model
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Place, Timestamp, words
from api.web.admin.organizations import existing_organization
from api.web.admin.slices import Answer, Operation, Route, Slice, key_param
from api.web.errors import BadRequest, NotFound
from api.web.jsonio import write_json

UserIdentifier = Annotated[
    str,
    Meta(min_length=1, max_length=USER_IDENTIFIER_MAX,
         extra=words(every="Field '{label}' must be a string of 1 to"
                           f" {USER_IDENTIFIER_MAX} characters")),
]  # fmt: skip


Identifiers = Annotated[list[UserIdentifier], Meta(max_length=MAX_SEGMENT_SIZE)]
ConditionJson = Annotated[dict[str, Any], Meta(extra_json_schema=condition_schema())]
"""A condition as JSON: its schema from the operators' catalogue; ``conditions_from_json``
decides (an RE2 expression's syntax, an instant's calendar)."""
Conditions = Annotated[
    list[Any],
    Meta(max_length=CONDITIONS_MAX, extra_json_schema={"items": condition_schema()},
         description="Conditions on a user's attributes, every one must hold (contract 12);"
                     " a user listed in userIdentifiers is in whatever they say, one listed"
                     " in excludedUserIdentifiers out"),
]  # fmt: skip


class Segment(msgspec.Struct):
    key: Annotated[str, Meta(pattern=KEY_SCHEMA_PATTERN)]
    size: Annotated[int, Meta(ge=0, description="Distinct identifiers listed")]
    excludedSize: Annotated[int, Meta(ge=0, description="Distinct identifiers excluded")]
    conditions: Annotated[list[ConditionJson], Meta(description="As given at PUT")]
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
    excludedUserIdentifiers: (
        Annotated[
            list[str],
            Meta(
                description="Only in GET of one segment: the distinct identifiers excluded,"
                " in the order first given."
            ),
        ]  # fmt: skip
        | UnsetType
    ) = UNSET


class SegmentList(msgspec.Struct):
    items: list[Segment]


def _check_conditions(conditions: list[Any] | None, place: Place) -> None:
    if conditions is not None:  # null: absent, as every optional field
        parsed_conditions(conditions, place.label("conditions"))


def parsed_conditions(conditions: list[Any], label: str) -> tuple[Condition, ...]:
    """The conditions through the catalogue; 400 naming the field
    (``conditions[2].values[0]``)."""
    try:
        parsed = conditions_from_json(conditions, label)
    except RuleError as exc:
        field_name, _, problem = str(exc).partition(" ")
        raise BadRequest(f"Field '{field_name}' {problem}") from None
    for index, condition in enumerate(parsed):
        if condition.operator is Operator.MATCHES:
            size = expression_size(str(condition.values[0]))
            if size > CONDITION_PROGRAM_MAX:
                raise BadRequest(
                    f"Field '{label}[{index}].values[0]' must compile to at most"
                    f" {CONDITION_PROGRAM_MAX:,} RE2 instructions (it compiles to {size:,}; a"
                    " counted repetition such as {0,100} multiplies what it repeats)"
                )
    return parsed


class SegmentPut(Body):
    """The whole segment: a field left out is empty (a body of ``userIdentifiers`` alone is
    the list it always was)."""

    userIdentifiers: Identifiers | None = None
    excludedUserIdentifiers: Identifiers | None = None
    conditions: Conditions | None = None

    checks = {"conditions": _check_conditions}


def segment(
    seg: model.Segment,
    user_identifiers: list[str] | None = None,
    excluded_user_identifiers: list[str] | None = None,
) -> Segment:
    """The identifiers only when reading one segment (a list or PUT answer leaves them out)."""
    members = UNSET if user_identifiers is None else user_identifiers
    excluded = UNSET if excluded_user_identifiers is None else excluded_user_identifiers
    return Segment(
        **documents.segment(seg), userIdentifiers=members, excludedUserIdentifiers=excluded
    )


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

    PUT replaces the whole segment and answers 200 with the summary (``key``, ``size``,
    ``excludedSize``, ``conditions``, ``updatedAt``: a million identifiers are not echoed
    back); GET adds ``userIdentifiers`` and ``excludedUserIdentifiers``.
    """

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        found = await self.read(self.store.get_segment, org_id, segment_key)
        members = await self.read(self.store.segment_members, org_id, segment_key)
        excluded = await self.read(self.store.segment_excluded, org_id, segment_key)
        if found is None or members is None or excluded is None:
            raise NotFound(f"Segment '{segment_key}' does not exist in organization '{org_id}'")
        write_json(resp, segment(found, members, excluded))

    async def on_put(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        key_param(segment_key, "segmentKey")
        body = await self.body(req, SegmentPut)
        stored, _created = await self.write(
            self.store.put_segment, org_id, segment_key, body.userIdentifiers or (),
            excluded_user_identifiers=body.excludedUserIdentifiers or (),
            conditions=parsed_conditions(body.conditions or [], "conditions"),
        )  # fmt: skip
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
        "get": Operation("Read a segment with its identifiers and conditions",
                         {200: Answer("The segment", Segment)}),
        "put": Operation("Create or replace a segment",
                         {200: Answer("Stored (without identifiers)", Segment)}, body=SegmentPut),
        "delete": Operation("Delete a segment", {204: Answer("Done; no body")},
                            errors={409: None}),
    }),
)  # fmt: skip
