"""A new admin resource is one slice module: its body and answer types, its resource, its
route and the words of its own error codes; ``add_admin_routes`` serves it and the OpenAPI
document describes it, with nothing else at the edge to change."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import falcon
import falcon.asgi
import falcon.testing
import msgspec
import pytest
from msgspec import Meta

from api.controlplane.errors import InvalidError
from api.settings import Settings
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Key
from api.web.admin.error_messages import MESSAGES
from api.web.admin.routes import SLICES, add_admin_routes
from api.web.admin.slices import Answer, Operation, Route, Slice
from api.web.errors import serialize_error
from api.web.jsonio import write_json
from api.web.openapi.admin import admin_document
from tests.admin.conftest import ADMIN_TOKEN, build_services


class NoteCode(StrEnum):
    """What a control-plane slice of notes would raise."""

    UNLUCKY_LINE = "unlucky_line"


class NotePut(Body):
    flagKey: Key
    line: Annotated[int, Meta(ge=1)]
    text: Annotated[str, Meta(max_length=20)] | None = None


class Note(msgspec.Struct):
    flagKey: str
    line: int
    text: str | None


@falcon.before(require_admin)
class NotesResource(AdminResource):
    async def on_put(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        body = await self.body(req, NotePut)
        if body.line == 13:
            raise InvalidError(NoteCode.UNLUCKY_LINE, "line", line=body.line)
        write_json(resp, Note(body.flagKey, body.line, body.text))


NOTES = Slice(
    Route("/environments/{env_id}/notes", NotesResource, {
        "put": Operation("Put a note", {200: Answer("The note", Note)}, body=NotePut),
    }),
    words={NoteCode.UNLUCKY_LINE: lambda d: f"Field 'line' must not be {d['line']}"},
)  # fmt: skip


@pytest.fixture
def client(tmp_path) -> falcon.testing.TestClient:
    services = build_services(Settings(data_dir=tmp_path, admin_token=ADMIN_TOKEN))
    app = falcon.asgi.App()
    app.set_error_serializer(serialize_error)
    add_admin_routes(app, services, (*SLICES, NOTES))
    yield falcon.testing.TestClient(app)
    services.config.stop()
    services.meter.close()
    services.store.close()


@pytest.mark.parametrize(
    ("body", "status", "answer"),
    [
        ({"flagKey": "checkout", "line": 7}, 200, {"flagKey": "checkout", "line": 7, "text": None}),
        ({"flagKey": "checkout", "line": 7.0, "text": "x"}, 200,
         {"flagKey": "checkout", "line": 7, "text": "x"}),
        ({"line": 7}, 400, "Field 'flagKey' is required"),
        ({"flagKey": "a b", "line": 7}, 400, "Field 'flagKey' must match [A-Za-z0-9._-]{1,128}"),
        ({"flagKey": "checkout", "line": 0}, 400, "Field 'line' must be an integer at least 1"),
        ({"flagKey": "checkout", "line": "7"}, 400, "Field 'line' must be an integer at least 1"),
        ({"flagKey": "checkout", "line": 7, "text": "x" * 21}, 400,
         "Field 'text' must be at most 20 characters long"),
        ({"flagKey": "checkout", "line": 13}, 400, "Field 'line' must not be 13"),
    ],
)  # fmt: skip
def test_the_slice_is_served_in_the_admin_api_words(client, body, status, answer) -> None:
    result = client.simulate_put(
        "/admin/v1/environments/env_0000000000000000/notes",
        json=body,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert result.status_code == status
    assert (result.json if status == 200 else result.json["message"]) == answer


def test_its_codes_are_worded_where_every_code_is() -> None:
    assert MESSAGES[NoteCode.UNLUCKY_LINE]({"line": 13}) == "Field 'line' must not be 13"
    with pytest.raises(ValueError, match="already worded: unlucky_line"):
        Slice(words={NoteCode.UNLUCKY_LINE: lambda d: "again"})


def test_the_document_describes_it_from_its_types() -> None:
    paths, schemas = admin_document((NOTES,))
    put = paths["/admin/v1/environments/{envId}/notes"]["put"]
    assert put["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/NotePut"
    }
    assert sorted(put["responses"]) == ["200", "400", "401", "404", "413", "415", "503"]
    assert schemas["NotePut"]["required"] == ["flagKey", "line"]
    assert schemas["NotePut"]["properties"]["line"] == {"type": "integer", "minimum": 1}
    assert set(schemas) == {"Note", "NotePut"}
