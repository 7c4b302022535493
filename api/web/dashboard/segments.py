"""Segments of an organization (contract 12): a key, the user identifiers it lists (pasted or
uploaded), those it excludes, and its conditions on a user's attributes.

The segments page lists them (members, conditions) and creates or replaces one; a segment's
page shows its counts, each condition in words and a searchable sample of its members, and
edits it. Both forms are ``segment_form``'s, checked by the admin API's body type; saving
writes the whole segment through the store as the admin API's ``PUT`` does (audited, and
restorable from the audit log).

Identifiers are one per line (a text or CSV export's first column pasted as is works too);
surrounding spaces and blank lines are dropped, a repeated identifier counts once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import falcon
import falcon.asgi
from flagsight_core.contract import (
    CONDITIONS_MAX,
    KEY_IN_WORDS,
    KEY_PATTERN,
    MAX_SEGMENT_SIZE,
    USER_IDENTIFIER_MAX,
)

from api.controlplane.model import Segment
from api.web.dashboard.base import PREFIX, Page, organization_crumbs, signed_in
from api.web.dashboard.forms import Form
from api.web.dashboard.segment_form import (
    EDITABLE_MAX,
    FILE,
    OPERATOR_CHOICES,
    OPERATOR_HINTS,
    SegmentChange,
    SegmentDraft,
    checked,
    rows_shown,
)


def segments_path(organization_id: str) -> str:
    return f"{PREFIX}/organizations/{organization_id}/segments"


def form_context(draft: SegmentDraft, errors: dict[str, str]) -> dict[str, Any]:
    """What the segment form's template needs besides the page's own."""
    return {
        "draft": draft, "rows": rows_shown(draft.rows), "errors": errors,
        "operators": OPERATOR_CHOICES, "operator_hints": OPERATOR_HINTS, "max_size": MAX_SEGMENT_SIZE,
        "conditions_max": CONDITIONS_MAX, "editable_max": EDITABLE_MAX,
    }  # fmt: skip


def refused(draft: SegmentDraft, errors: dict[str, str]) -> SegmentDraft:
    """The draft with the API's words on the condition row they name."""
    return draft.with_error(errors["conditions"]) if "conditions" in errors else draft


class SegmentWriter(Page):
    """Saving a segment's form: the whole segment, through the store, as the admin API's PUT."""

    async def save(self, org_id: str, key: str, change: SegmentChange) -> None:
        store = self.store

        def put(*, actor: str) -> tuple[Segment, bool]:
            """A list the form kept is read in the same thread as the write."""
            members = change.members
            if members is None:
                members = store.segment_members(org_id, key) or []
            excluded = change.excluded
            if excluded is None:
                excluded = store.segment_excluded(org_id, key) or []
            return store.put_segment(
                org_id, key, members, excluded_user_identifiers=excluded,
                conditions=change.conditions, actor=actor,
            )  # fmt: skip

        await self.write(put)


class SegmentsView(SegmentWriter):
    """The segments page, rendered after a GET and after a refused form."""

    async def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        org_id: str,
        *,
        status: int = 200,
        errors: dict[str, str] | None = None,
        form: Form | None = None,
        draft: SegmentDraft | None = None,
        saved: str | None = None,
        problem: str | None = None,
    ) -> None:
        organization = await self.organization(org_id)
        segments = await self.read(self.store.list_segments, org_id)
        self.render(
            req, resp, "segments.html", status=status, organization=organization,
            segments=segments, form=form or Form(), saved=saved, problem=problem,
            **form_context(draft or SegmentDraft(), errors or {}),
            crumbs=[*organization_crumbs(organization), ("Segments", segments_path(org_id))],
        )  # fmt: skip


@falcon.before(signed_in)
class SegmentsPage(SegmentsView):
    """``/dashboard/organizations/{org_id}/segments``; ``POST`` creates or replaces one."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await self._show(req, resp, org_id, saved=req.get_param("saved"))

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await self.organization(org_id)
        form = await self.form(req)
        key = form.get("key").strip()
        draft = SegmentDraft.from_form(form)
        change, errors = checked(draft, form.files.get(FILE))
        if not KEY_PATTERN.fullmatch(key):
            errors = {"key": f"Use {KEY_IN_WORDS}.", **errors}
        if change is None or errors:
            await self._show(
                req, resp, org_id, status=400, errors=errors, form=form,
                draft=refused(draft, errors),
            )  # fmt: skip
            return
        await self.save(org_id, key, change)
        raise falcon.HTTPSeeOther(f"{segments_path(org_id)}?saved={key}")


@falcon.before(signed_in)
class DeleteSegmentAction(SegmentsView):
    """``POST .../segments/{segment_key}/delete``; refused while a flag's rule names it."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        await self.organization(org_id)
        problem = await self.delete(self.store.delete_segment, org_id, segment_key)
        if problem is not None:
            await self._show(req, resp, org_id, status=409, problem=problem)
            return
        raise falcon.HTTPSeeOther(segments_path(org_id))


SAMPLE_SIZE = 200
"""Members shown on a segment's page: enough to check a list by eye, few enough for a page."""


def member_sample(members: list[str], query: str) -> tuple[list[str], int]:
    """The first ``SAMPLE_SIZE`` members containing ``query`` (any case), and how many do."""
    needle = query.strip().casefold()
    matching = [m for m in members if needle in m.casefold()] if needle else members
    return matching[:SAMPLE_SIZE], len(matching)


@dataclass(frozen=True)
class SegmentShown:
    """What a segment's page shows of it, read in one thread."""

    segment: Segment
    sample: list[str]
    matching: int
    draft: SegmentDraft
    """The edit form of the segment as stored."""


@falcon.before(signed_in)
class SegmentMembersPage(SegmentWriter):
    """``/dashboard/organizations/{org_id}/segments/{segment_key}``: the counts, each condition
    in words, a searchable sample of the members (``?q=`` searches every member; the page's
    filter narrows the sample), and the form that edits the segment (``POST``)."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        await self._show(req, resp, org_id, segment_key, saved=req.get_param("saved") == "1")

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        await self.organization(org_id)
        form = await self.form(req)
        draft = SegmentDraft.from_form(form)
        change, errors = checked(draft, form.files.get(FILE))
        if change is None:
            await self._show(
                req, resp, org_id, segment_key, status=400, errors=errors,
                draft=refused(draft, errors),
            )  # fmt: skip
            return
        await self.save(org_id, segment_key, change)
        raise falcon.HTTPSeeOther(f"{segments_path(org_id)}/{segment_key}?saved=1#edit-segment")

    async def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        org_id: str,
        segment_key: str,
        *,
        status: int = 200,
        errors: dict[str, str] | None = None,
        draft: SegmentDraft | None = None,
        saved: bool = False,
    ) -> None:
        organization = await self.organization(org_id)
        query = (req.get_param("q") or "")[:USER_IDENTIFIER_MAX]
        found = await self.read(self._load, org_id, segment_key, query)
        if found is None:
            raise self.not_found(f"Segment '{segment_key}'")
        self.render(
            req, resp, "segment.html", status=status, organization=organization,
            key=segment_key, shown=found, segment=found.segment, size=found.segment.size,
            sample=found.sample, matching=found.matching, query=query, saved=saved,
            problem=next(iter((errors or {}).values()), None),
            **form_context(draft or found.draft, errors or {}),
            crumbs=[
                *organization_crumbs(organization), ("Segments", segments_path(org_id)),
                (segment_key, f"{segments_path(org_id)}/{segment_key}"),
            ],
        )  # fmt: skip

    def _load(self, org_id: str, segment_key: str, query: str) -> SegmentShown | None:
        """Read and search in one thread: a segment may hold a million members, and scanning
        them on the event loop would stall every request this worker serves meanwhile."""
        segment = self.store.get_segment(org_id, segment_key)
        members = self.store.segment_members(org_id, segment_key)
        excluded = self.store.segment_excluded(org_id, segment_key)
        if segment is None or members is None or excluded is None:
            return None
        sample, matching = member_sample(members, query)
        draft = SegmentDraft.of(members, excluded, segment.conditions)
        return SegmentShown(segment, sample, matching, draft)
