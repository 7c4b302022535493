"""Segments of an organization: a key and a list of user identifiers, pasted or uploaded.

Identifiers are one per line (a text or CSV export's first column pasted as is works too);
surrounding spaces and blank lines are dropped, a repeated identifier counts once. Saving a
key that exists replaces its whole list, as the admin API's PUT does.
"""

from __future__ import annotations

import falcon
import falcon.asgi
from flagsight_core.contract import KEY_IN_WORDS, KEY_PATTERN, MAX_SEGMENT_SIZE, USER_IDENTIFIER_MAX

from api.controlplane.errors import ConflictError, NotFoundError
from api.web.admin.error_messages import message
from api.web.dashboard.base import PREFIX, Page, organization_crumbs, signed_in
from api.web.dashboard.forms import Form


def segments_path(organization_id: str) -> str:
    return f"{PREFIX}/organizations/{organization_id}/segments"


def parse_identifiers(pasted: str, uploaded: bytes | None) -> list[str] | str:
    """The identifiers, in order, or an error message naming the line."""
    sources = [("pasted list", pasted)]
    if uploaded:
        try:
            sources.append(("file", uploaded.decode("utf-8-sig")))
        except UnicodeDecodeError:
            return "The file is not UTF-8 text. Upload a plain text file, one identifier per line."
    identifiers: list[str] = []
    for where, text in sources:
        for number, line in enumerate(text.splitlines(), start=1):
            value = line.strip()
            if len(value) > USER_IDENTIFIER_MAX:
                return (
                    f"Line {number} of the {where} is longer than {USER_IDENTIFIER_MAX} characters."
                )
            if value:
                identifiers.append(value)
    if len(identifiers) > MAX_SEGMENT_SIZE:
        return f"A segment holds at most {MAX_SEGMENT_SIZE:,} identifiers."
    return identifiers


class SegmentsView(Page):
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
        saved: str | None = None,
        problem: str | None = None,
    ) -> None:
        organization = await self.organization(org_id)
        segments = await self.read(self.store.list_segments, org_id)
        self.render(
            req, resp, "segments.html", status=status, organization=organization,
            segments=segments, errors=errors or {}, form=form or Form(), saved=saved,
            problem=problem, max_size=MAX_SEGMENT_SIZE,
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
        errors: dict[str, str] = {}
        if not KEY_PATTERN.fullmatch(key):
            errors["key"] = f"Use {KEY_IN_WORDS}."
        identifiers = parse_identifiers(form.get("identifiers"), form.files.get("file"))
        if isinstance(identifiers, str):
            errors["identifiers"] = identifiers
        elif not identifiers:
            errors["identifiers"] = "Paste identifiers or choose a file (one per line)."
        if errors:
            await self._show(req, resp, org_id, status=400, errors=errors, form=form)
            return
        await self.write(self.store.put_segment, org_id, key, identifiers)
        raise falcon.HTTPSeeOther(f"{segments_path(org_id)}?saved={key}")


@falcon.before(signed_in)
class DeleteSegmentAction(SegmentsView):
    """``POST .../segments/{segment_key}/delete``; refused while a flag's rule names it."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        await self.organization(org_id)
        try:
            await self.write(self.store.delete_segment, org_id, segment_key)
        except ConflictError as exc:
            await self._show(req, resp, org_id, status=409, problem=message(exc))
            return
        except NotFoundError:
            pass  # already gone: the outcome asked for
        raise falcon.HTTPSeeOther(segments_path(org_id))


SAMPLE_SIZE = 200
"""Members shown on a segment's page: enough to check a list by eye, few enough for a page."""


def member_sample(members: list[str], query: str) -> tuple[list[str], int]:
    """The first ``SAMPLE_SIZE`` members containing ``query`` (any case), and how many do."""
    needle = query.strip().casefold()
    matching = [m for m in members if needle in m.casefold()] if needle else members
    return matching[:SAMPLE_SIZE], len(matching)


@falcon.before(signed_in)
class SegmentMembersPage(Page):
    """``/dashboard/organizations/{org_id}/segments/{segment_key}``: the member count and a
    searchable sample (``?q=`` searches every member; the page's filter narrows the sample)."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, segment_key: str
    ) -> None:
        organization = await self.organization(org_id)
        query = (req.get_param("q") or "")[:USER_IDENTIFIER_MAX]
        found = await self.read(self._sample, org_id, segment_key, query)
        if found is None:
            raise self.not_found(f"Segment '{segment_key}'")
        size, sample, matching = found
        self.render(
            req, resp, "segment.html", organization=organization, key=segment_key,
            size=size, sample=sample, matching=matching, query=query,
            crumbs=[
                *organization_crumbs(organization), ("Segments", segments_path(org_id)),
                (segment_key, f"{segments_path(org_id)}/{segment_key}"),
            ],
        )  # fmt: skip

    def _sample(
        self, org_id: str, segment_key: str, query: str
    ) -> tuple[int, list[str], int] | None:
        """Read and search in one thread: a segment may hold a million members, and scanning
        them on the event loop would stall every request this worker serves meanwhile."""
        members = self.store.segment_members(org_id, segment_key)
        if members is None:
            return None
        sample, matching = member_sample(members, query)
        return len(members), sample, matching
