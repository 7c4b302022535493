"""Every admin route's validation against its generated OpenAPI schema.

For each operation with a request body, bodies are made from the document's own schema for it
(``/openapi.json``, generated from the slices' body types): valid ones (every optional field
left out, every one given, each value of each enum) and mutations of them (a required field
removed, a value of another type, a string past its maximum length or short of its minimum or
off its pattern, a value outside its enum or range, a fractional number where an integer is
declared, an integral float where one is, an array past its bounds or with an item twice, an
unknown field where the schema forbids any). Each goes through the real app, and the answer
must be 400 exactly when the schema, checked with ``jsonschema`` (and its ``date-time``
format asserted), forbids the body.

What no schema states is put into the bodies as a client would (``semantics``): a rule's
segment (a SEGMENT rule's, a PERCENTAGE rule's) exists; a rollout's steps rise to 100 and its tolerances name only
guardrails it watches; a metric a flag follows, or a rollout guards on, exists; a webhook's URL has a public host; an environment's key is new; a limit
alone is sent to an enterprise organization (each organization body goes to a new one).
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from api.controlplane.catalogue import DEFAULT_GUARDRAILS
from api.web.openapi.document import openapi_document
from tests.admin.conftest import AdminClient

DOCUMENT = openapi_document()
ROOT = "urn:flagsight:openapi"
REGISTRY = Registry().with_resource(ROOT, DRAFT202012.create_resource(DOCUMENT))
SCHEMAS = DOCUMENT["components"]["schemas"]
PUBLIC_URL = "https://example.com/hooks/flagsight"
"""A URL whose host is a name (not resolved when a webhook is created) and public."""
STRINGS = (
    "production", PUBLIC_URL, "2030-01-31T09:00:00Z", "beta", "x", "1.4.0", "metric:production",
)  # fmt: skip
"""Candidates for a string with a pattern or a format, the first that fits is taken (a
condition's Semantic Versioning value; a rollout's guardrail on the metric ``production``,
which the world has, as any key in a body is ``production``)."""
MAX_ITEMS_SENT = 1000
"""An array's ``maxItems`` is passed in a mutation up to this (a segment's million
identifiers are tested in ``test_admin_segments.py``)."""

SEGMENT = "beta"
METRIC = "production"
FLAG_WITH_PERCENTAGE = "checkout"


def operations() -> list[tuple[str, str]]:
    """Every admin (method, path) that takes a body."""
    return [
        (method, path)
        for path, item in DOCUMENT["paths"].items()
        if path.startswith("/admin/v1/")
        for method, operation in item.items()
        if method != "parameters" and "requestBody" in operation
    ]


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def absolute(schema: Any) -> Any:
    """``schema`` with its references into the document made absolute."""
    if isinstance(schema, list):
        return [absolute(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: ROOT + v if k == "$ref" else absolute(v) for k, v in schema.items()}


FORMATS = FormatChecker(formats=())
RFC_3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})",
    re.IGNORECASE,
)


@FORMATS.checks("date-time")
def is_date_time(value: object) -> bool:
    """RFC 3339's ``date-time``, as the document means it (``jsonschema`` checks it only with
    an optional package, which the project does not install)."""
    if not isinstance(value, str) or not RFC_3339.fullmatch(value):
        return not isinstance(value, str)
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(absolute(schema), registry=REGISTRY, format_checker=FORMATS)


# -- valid values from a schema --------------------------------------------------------------


def options(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives of a schema (``anyOf``/``oneOf``), or the schema itself."""
    schema = resolve(schema)
    return schema.get("anyOf") or schema.get("oneOf") or [schema]


def samples(schema: dict[str, Any], full: bool = True) -> list[Any]:
    """Values the schema allows: each alternative's, each enum value."""
    schema = resolve(schema)
    if "anyOf" in schema or "oneOf" in schema:
        found = []
        for option in options(schema):
            found.extend(samples(option, full))
        return found
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        return list(schema["enum"])
    kind = schema.get("type")
    if kind == "null":
        return [None]
    if kind == "boolean":
        return [True, False]
    if kind in ("integer", "number"):
        return numbers(schema)
    if kind == "string":
        return [text(schema)]
    if kind == "array":
        return [array(schema, full)]
    if kind == "object":
        return objects(schema, full)
    return [{}]


def numbers(schema: dict[str, Any]) -> list[Any]:
    low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
    high = schema.get("maximum", low + 100)
    found = [v for v in (low + 1, (low + high) // 2, high) if valid(schema, v)]
    return found or [low]


def text(schema: dict[str, Any]) -> str:
    low = schema.get("minLength", 1)
    for candidate in (*STRINGS, "x" * max(low, 1)):
        if valid(schema, candidate):
            return candidate
    raise AssertionError(f"no sample string for {schema}")


def array(schema: dict[str, Any], full: bool) -> list[Any]:
    items = schema.get("items", {})
    pool = samples(items, full)
    wanted = max(schema.get("minItems", 0), 2 if full else 1)
    wanted = min(wanted, schema.get("maxItems", wanted))
    if schema.get("uniqueItems"):
        pool = [v for i, v in enumerate(pool) if v not in pool[:i]]
        return pool[: max(wanted, min(len(pool), schema.get("maxItems", len(pool))))]
    return list(itertools.islice(itertools.cycle(pool), wanted)) if pool else []


def objects(schema: dict[str, Any], full: bool) -> list[dict[str, Any]]:
    """One object with the required fields, one with every field; each enum value of a
    property once."""
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    names = list(properties) if full else list(required)
    base = {name: samples(properties[name], full)[0] for name in names}
    found = [base]
    for name in names:
        for value in samples(properties[name], full)[1:]:
            found.append({**base, name: value})
    if full and required != list(properties):
        found.append({name: samples(properties[name], False)[0] for name in required})
    return found


def valid(schema: dict[str, Any], value: Any) -> bool:
    return validator(schema).is_valid(value)


# -- mutations ---------------------------------------------------------------------------------


def mutations(schema: dict[str, Any], body: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """(what was done, the mutated body) for ``body`` of ``schema``, at every depth."""
    schema = resolve(schema)
    if isinstance(body, dict) and "properties" in schema:
        yield from object_mutations(schema, body, where)
    elif isinstance(body, list) and "items" in schema:
        yield from array_mutations(schema, body, where)


def object_mutations(
    schema: dict[str, Any], body: dict[str, Any], where: str
) -> Iterator[tuple[str, Any]]:
    properties = schema["properties"]
    for name in properties:
        if name in body:
            yield f"{where}{name} removed", {k: v for k, v in body.items() if k != name}
    for name, value in body.items():
        here = f"{where}{name}"
        for what, replacement in value_mutations(properties[name], value):
            yield f"{here}: {what}", {**body, name: replacement}
        for what, inner in mutations(value_schema(properties[name], value), value, f"{here}."):
            yield what, {**body, name: inner}
    yield f"{where}unknown field", {**body, "surelyNotAField": 1}


def array_mutations(
    schema: dict[str, Any], body: list[Any], where: str
) -> Iterator[tuple[str, Any]]:
    items = schema["items"]
    if body:
        for what, replacement in value_mutations(items, body[0]):
            yield f"{where}[0]: {what}", [replacement, *body[1:]]
        for what, inner in mutations(value_schema(items, body[0]), body[0], f"{where}[0]."):
            yield what, [inner, *body[1:]]


def value_schema(schema: dict[str, Any], value: Any) -> dict[str, Any]:
    """The alternative of ``schema`` that ``value`` is of."""
    for option in options(schema):
        if valid(option, value):
            return resolve(option)
    return resolve(schema)


def value_mutations(schema: dict[str, Any], value: Any) -> Iterator[tuple[str, Any]]:
    """Another type, null, and each bound of the alternative ``value`` is of, passed."""
    others = {"a string": "12", "a number": 12, "a boolean": True, "an array": [], "an object": {}}
    for what, other in others.items():
        if type(other) is not type(value):
            yield f"{what} instead", other
    yield "null instead", None
    schema = value_schema(schema, value)
    if "enum" in schema or "const" in schema:
        yield "outside the enum", "surely-not-one-of-them"
    if isinstance(value, str):
        yield "empty", ""
        yield "long", "x" * 10_000
        yield "off any pattern", "has space!"
        if "maxLength" in schema:
            yield "over maxLength", "x" * (schema["maxLength"] + 1)
    if isinstance(value, int | float) and not isinstance(value, bool):
        yield "zero", 0
        yield "negative", -1
        yield "huge", 10**18
        yield "three decimals", round(value / 2 + 0.001, 3) or 0.001
        for bound, delta in (("maximum", 1), ("exclusiveMaximum", 0), ("minimum", -1),
                             ("exclusiveMinimum", 0)):  # fmt: skip
            if bound in schema:
                yield f"at {bound} {'+' if delta >= 0 else ''}{delta}", schema[bound] + delta
        if isinstance(value, int):
            yield "fractional", value + 0.5
            yield "integral float", float(value)
    if isinstance(value, list):
        yield "no items", []
        if value:
            yield "an item twice", [*value, value[0]]
        if value and schema.get("maxItems", MAX_ITEMS_SENT + 1) <= MAX_ITEMS_SENT:
            yield "over maxItems", value[:1] * (schema["maxItems"] + 1)


# -- what no schema says ---------------------------------------------------------------------


class Semantics:
    """Puts into a body what the resource checks beyond its schema, as a client would."""

    def __init__(self) -> None:
        self.counter = itertools.count()

    def __call__(self, path: str, body: Any) -> Any:
        if not isinstance(body, dict):
            return body
        body = copy.deepcopy(body)
        self.rules(body.get("rules"))
        if isinstance(body.get("flag"), dict):  # a schedule's flag
            self.rules(body["flag"].get("rules"))
        if path.endswith("/rollout"):
            self.rollout(body)
        if path.endswith("/environments") and body.get("key") == "production":
            body["key"] = f"env-{next(self.counter)}"
        return body

    @staticmethod
    def rules(rules: Any) -> None:
        """A rule's segment (a SEGMENT rule's, a PERCENTAGE rule's within a segment) is the
        segment that exists."""
        for rule in rules if isinstance(rules, list) else []:
            if isinstance(rule, dict) and rule.get("segment") in STRINGS:
                rule["segment"] = SEGMENT

    @staticmethod
    def rollout(body: dict[str, Any]) -> None:
        """Steps rise to 100; tolerances only for the guardrails watched (the defaults when
        none are named)."""
        steps = body.get("steps")
        numeric = (
            isinstance(steps, list)
            and steps
            and all(
                isinstance(s, int | float) and not isinstance(s, bool) and 0 < s <= 100
                for s in steps
            )
        )
        if numeric and len(set(steps)) == len(steps):  # an item twice stays: a mutation
            rising = sorted(steps)
            body["steps"] = rising if rising[-1] == 100 else [*rising[:19], 100]
        guardrails = body.get("guardrails", list(DEFAULT_GUARDRAILS))  # none: the defaults
        tolerances = body.get("tolerances")
        if isinstance(guardrails, list) and isinstance(tolerances, dict):
            body["tolerances"] = {k: v for k, v in tolerances.items() if k in guardrails}


# -- the test ----------------------------------------------------------------------------------


def concrete(path: str, world: dict[str, str]) -> str:
    for name, value in world.items():
        path = path.replace("{" + name + "}", value)
    return path.removeprefix("/admin/v1")


def world_of(admin_api: AdminClient) -> dict[str, str]:
    """An enterprise organization with an environment, a segment, a conversion metric (its key
    ``production``, the sample of every key) and a flag with a percentage rule."""
    org = admin_api.organization("enterprise", monthlyEvaluationLimit=1_000_000)
    env = admin_api.environment(org["id"])
    segment = admin_api.put(f"/organizations/{org['id']}/segments/{SEGMENT}",
                            {"userIdentifiers": ["u1", "u2"]})  # fmt: skip
    assert segment.status == 200, segment
    metric = admin_api.put(
        f"/organizations/{org['id']}/metrics/{METRIC}",
        {"name": "Checkout", "event": "checkout", "kind": "conversion", "windowHours": 72,
         "better": "higher"},
    )  # fmt: skip
    assert metric.status == 201, metric
    flag = admin_api.put(
        f"/environments/{env['id']}/flags/{FLAG_WITH_PERCENTAGE}",
        {"enabled": True, "rules": [{"type": "PERCENTAGE", "percentage": 0}]},
    )
    assert flag.status == 201, flag
    return {"orgId": org["id"], "envId": env["id"], "segmentKey": SEGMENT,
            "flagKey": FLAG_WITH_PERCENTAGE, "metricKey": METRIC}  # fmt: skip


def bodies_for(schema: dict[str, Any]) -> list[tuple[str, Any]]:
    """Valid bodies, then the mutations of each, each body once."""
    made: list[tuple[str, Any]] = []
    for full in (False, True):
        for index, body in enumerate(samples(schema, full)):
            made.append((f"{'full' if full else 'minimal'} #{index}", body))
    for label, body in list(made):
        made.extend((f"{label}, {what}", mutated) for what, mutated in mutations(schema, body))
    unique: dict[str, tuple[str, Any]] = {}
    for label, body in made:
        unique.setdefault(repr(body), (label, body))
    return list(unique.values())


@pytest.mark.parametrize(("method", "path"), operations(), ids=lambda part: part)
def test_a_body_is_refused_exactly_when_its_schema_forbids_it(
    admin_api: AdminClient, method: str, path: str
) -> None:
    operation = DOCUMENT["paths"][path][method]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    check = validator(schema)
    semantics = Semantics()
    world = world_of(admin_api)
    verdicts = {"allowed": 0, "forbidden": 0}
    drifts = []
    for label, generated in bodies_for(schema):
        body = semantics(path, generated)
        if path == "/admin/v1/organizations/{orgId}":  # a limit alone: only on enterprise
            world["orgId"] = admin_api.organization("enterprise", monthlyEvaluationLimit=7)["id"]
        forbidden = not check.is_valid(body)
        verdicts["forbidden" if forbidden else "allowed"] += 1
        answer = admin_api.call(method.upper(), concrete(path, world), body)
        if (answer.status == 400) != forbidden:
            why = next(iter(check.iter_errors(body)), None)
            drifts.append(
                f"{label}: {body!r:.300} -> {answer.status} {answer.body!r:.200}"
                f" (schema: {'forbids: ' + why.message[:120] if why else 'allows'})"
            )
    if not operation["requestBody"]["required"]:
        answer = admin_api.call(method.upper(), concrete(path, world))
        if answer.status == 400:
            drifts.append(f"no body at all -> 400 {answer.body!r}, but the body is optional")
    assert verdicts["allowed"] > 1 and verdicts["forbidden"] > 5, verdicts
    assert drifts == [], "\n".join(drifts)


def test_every_admin_body_is_generated_from_a_body_type() -> None:
    """The operations tested above are those the slices declare with a body."""
    from api.web.admin.routes import PREFIX, SLICES
    from api.web.openapi.admin import ADMIN_PATHS

    declared = {
        (method, route.path)
        for piece in SLICES
        for route in piece.routes
        for method, operation in route.operations.items()
        if operation.body is not None
    }
    shape = {re.sub(r"\{\w+\}", "{}", path): path for path in ADMIN_PATHS}
    tested = {(m, shape[re.sub(r"\{\w+\}", "{}", PREFIX + p)]) for m, p in declared}
    assert tested == set(operations()) and len(tested) >= 10
