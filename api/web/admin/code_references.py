"""Code references of an environment (contract section 14): what ``flagsight code-refs
--upload`` found in one repository, replacing that repository's previous upload. Each flag's
``lifecycle.codeReferences`` then says how many, from which repository, scanned when."""

from __future__ import annotations

from typing import Annotated

import falcon
import falcon.asgi
import msgspec
from flagsight_core.contract import FLAG_KEY_MAX
from msgspec import Meta

from api.controlplane.resources.code_references import CodeReference as Reference
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Timestamp
from api.web.admin.slices import Answer, Operation, Route, Slice
from api.web.jsonio import write_json

MAX_REFERENCES = 200_000
"""References in one upload: a monorepo naming a thousand flags two hundred times each."""
MAX_PATH = 1024


class CodeReference(Body):
    flagKey: Annotated[str, Meta(min_length=1, max_length=FLAG_KEY_MAX)]
    path: Annotated[
        str,
        Meta(min_length=1, max_length=MAX_PATH,
             description="Relative to the scanned tree, with forward slashes"),
    ]  # fmt: skip
    line: Annotated[int, Meta(ge=1, le=2**31 - 1)]


class CodeReferencesPut(Body, kw_only=True):
    repository: Annotated[
        str,
        Meta(min_length=1, max_length=512,
             description="Which repository was scanned (its remote URL or name)"),
    ]  # fmt: skip
    revision: Annotated[str, Meta(min_length=1, max_length=256)] | None = None
    references: Annotated[list[CodeReference], Meta(max_length=MAX_REFERENCES)]


class CodeScan(msgspec.Struct):
    repository: str
    revision: str | None
    scannedAt: Timestamp
    count: Annotated[int, Meta(ge=0, description="References kept (repeats counted once)")]


@falcon.before(require_admin)
class CodeReferencesResource(AdminResource):
    """``/admin/v1/environments/{env_id}/code-refs``: PUT replaces one repository's."""

    async def on_put(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        body = await self.body(req, CodeReferencesPut)
        references = [Reference(ref.flagKey, ref.path, ref.line) for ref in body.references]
        # evidence, not configuration: no actor to audit, no worker to refresh (``read`` runs
        # it off the event loop all the same)
        scan = await self.read(
            self.store.put_code_references, env_id, body.repository, body.revision, references
        )
        write_json(resp, CodeScan(scan.repository, scan.revision, scan.scanned_at, scan.count))


SLICE = Slice(
    Route("/environments/{env_id}/code-refs", CodeReferencesResource, {
        "put": Operation("Replace one repository's code references (flagsight code-refs"
                         " --upload)", {200: Answer("Kept", CodeScan)}, body=CodeReferencesPut,
                         errors={404: None}),
    }),
)  # fmt: skip
