"""An admin resource as one slice: its routes (a path template and the Falcon resource behind
it), what each operation takes and answers, and the words of any store error codes of its own.

A resource's module declares its request bodies (``bodies.Body``) and answers
(``msgspec.Struct``s) once, its resources, and one ``Slice`` (its routes, and the words of any
error codes it brought); ``routes.py`` lists the slices,
``add_admin_routes`` registers their routes, and ``api/web/openapi/admin.py`` generates the
admin half of the OpenAPI document from them: the paths from the routes and operations, the
schemas from the bodies' and answers' types. What the document says a body may be is what the
resource decodes (``tests/admin/test_schema_conformance.py`` holds them to it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from flagsight_core.contract import KEY_PATTERN, KEY_SCHEMA_PATTERN, KEY_SPEC

from api.web.admin import error_messages
from api.web.admin.error_messages import Wording
from api.web.errors import BadRequest

SCHEMAS = "#/components/schemas/"
"""Where the document keeps its schemas: ``ref("Rule")`` points at one."""
METHODS = ("get", "post", "put", "patch", "delete")

STANDARD_ERRORS: Mapping[int, str] = {
    400: "Malformed JSON, or a missing, mistyped or invalid field (the message names it)",
    401: "Missing or invalid admin token",
    404: "No such resource",
    409: "The key is taken, or the change would break another record",
    413: "Body over the admin size limit",
    415: "Body is not application/json",
    503: "The control plane stayed locked or unreadable; nothing changed, retry",
}
"""Each error status's words where an operation gives none of its own: 401 and 503 are every
operation's, 400, 413 and 415 those of an operation with a body, 404 of a path with ids."""


def ref(name: str) -> dict[str, str]:
    """A JSON Schema reference to the document's schema ``name`` (a rule's, from the
    registry: ``ref("Rule")``)."""
    return {"$ref": SCHEMAS + name}


@dataclass(frozen=True)
class Answer:
    """A success answer: its description and its body's type (None: no body)."""

    description: str
    body: type | None = None


@dataclass(frozen=True)
class Operation:
    """One method on a route, as the document describes it."""

    summary: str
    answers: Mapping[int, Answer]
    body: type | None = None
    """The request body's type (a ``bodies.Body``), None when it takes none."""
    body_required: bool = True
    """False where every field has a default and the body may be left out."""
    query: type | None = None
    """The query string's type (a ``bodies.Body`` read with ``read_query``)."""
    errors: Mapping[int, str | None] = field(default_factory=dict)
    """Error statuses beyond the standard ones, or standard ones in words of their own (None:
    the ``STANDARD_ERRORS`` words)."""


@dataclass(frozen=True)
class Parameter:
    """A path parameter: its name in the document, its description, its pattern."""

    name: str
    description: str
    pattern: str | None = None


PATH_PARAMETERS: Mapping[str, Parameter] = {
    "org_id": Parameter("orgId", "Organization id", "^org_[0-9a-f]{16}$"),
    "env_id": Parameter("envId", "Environment id", "^env_[0-9a-f]{16}$"),
    "key_id": Parameter("keyId", "API key id", "^key_[0-9a-f]{16}$"),
    "segment_key": Parameter("segmentKey", "Segment key (case-sensitive)", KEY_SCHEMA_PATTERN),
    "flag_key": Parameter("flagKey", "Flag key (case-sensitive)", KEY_SCHEMA_PATTERN),
    "schedule_id": Parameter("scheduleId", "Schedule id", "^sch_[0-9a-f]{16}$"),
    "audit_id": Parameter("auditId", "Audit record id", "^aud_[0-9a-f]{16}$"),
    "webhook_id": Parameter("webhookId", "Webhook id", "^whk_[0-9a-f]{16}$"),
}
"""Every path template's parameters (``{env_id}``) as the document names them (``envId``); a
route may describe one otherwise (``Route.parameters``)."""


@dataclass(frozen=True)
class Route:
    """A path template under ``/admin/v1``, its resource class, and its operations by method
    (the resource has an ``on_<method>`` for each)."""

    path: str
    resource: type
    operations: Mapping[str, Operation]
    parameters: Mapping[str, Parameter] = field(default_factory=dict)

    def __post_init__(self) -> None:
        served = {m for m in METHODS if hasattr(self.resource, f"on_{m}")}
        if served != set(self.operations):
            raise TypeError(
                f"{self.path}: {self.resource.__name__} serves {sorted(served)},"
                f" the route describes {sorted(self.operations)}"
            )

    def parameter(self, placeholder: str) -> Parameter:
        return self.parameters.get(placeholder) or PATH_PARAMETERS[placeholder]


class Slice:
    """An admin resource's routes, and the words of the error codes it brought (a newer
    resource's control-plane slice raises codes of its own; its edge slice words them here,
    once, for the admin API and the dashboard: ``error_messages.word``)."""

    def __init__(self, *routes: Route, words: Mapping[str, Wording] | None = None):
        self.routes = routes
        self.words = error_messages.word(words or {})

    def __repr__(self) -> str:
        return f"Slice({', '.join(route.path for route in self.routes)})"


def key_param(value: str, name: str) -> str:
    """A flag, segment or environment key from the path: 400 naming it unless it is a key."""
    if not KEY_PATTERN.fullmatch(value):
        raise BadRequest(f"'{name}' must match {KEY_SPEC} (got {value[:140]!r})")
    return value
