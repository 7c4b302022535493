"""OpenAPI 3.1 description of the admin API (``/admin/v1``, contract sections 5, 9 and 10),
generated from the admin slices (``api.web.admin.routes.SLICES``).

Each route gives a path and its parameters, each operation its summary, statuses, query
parameters and request body; the schemas are those of the request bodies' and answers' types
(``msgspec.Struct``s), through ``msgspec.json.schema_components``: the very types the resources
decode and answer, so the document says what is validated. Written here are only what every
operation shares (the security scheme, the error answers, a status's usual words) and the rule
schemas, which come from the rule registry. ``ADMIN_PATHS`` and ``ADMIN_SCHEMAS`` are merged
into the one document ``/openapi.json`` serves (``document.py``); ``Error`` is the public
description's.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any, get_type_hints

import msgspec
from flagsight_core import Rule

from api.web.admin.bodies import Body, in_order
from api.web.admin.routes import PREFIX, SLICES
from api.web.admin.slices import SCHEMAS, STANDARD_ERRORS, Operation, Route, Slice, ref

ADMIN_SECURITY_SCHEMES: dict[str, Any] = {"AdminToken": {"type": "http", "scheme": "bearer"}}
_SECURITY = [{"AdminToken": []}]
_VALUE = {"type": "boolean", "default": True}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, **_json(ref("Error"))}


def _responses(route: Route, operation: Operation) -> dict[str, Any]:
    """The answers an operation declares, then its errors: 401 and 503 for every operation,
    400 for one with a query, 400, 413 and 415 for one with a body, 404 on a path with
    parameters, and its own."""
    responses: dict[str, Any] = {}
    for status, answer in sorted(operation.answers.items()):
        body = _json(ref(answer.body.__name__)) if answer.body is not None else {}
        responses[str(status)] = {"description": answer.description, **body}
    errors: dict[int, str | None] = dict.fromkeys((401, 503))
    if operation.query is not None:
        errors[400] = "A query parameter is not one the operation takes (the message names it)"
    if operation.body is not None:
        errors.update(dict.fromkeys((400, 413, 415)))
    if "{" in route.path:
        errors[404] = None
    errors.update(operation.errors)
    for status in sorted(errors):
        responses[str(status)] = _error(errors[status] or STANDARD_ERRORS[status])
    return responses


def _query_parameters(query_type: type) -> list[dict[str, Any]]:
    hints = get_type_hints(query_type, include_extras=True)
    parameters = []
    for field in msgspec.inspect.type_info(query_type).fields:  # type: ignore[attr-defined]
        schema = msgspec.json.schema(hints[field.name])
        if not field.required:
            schema["default"] = field.default
        parameters.append(
            {"name": field.encode_name, "in": "query", "required": field.required,
             "schema": schema}
        )  # fmt: skip
    return parameters


def _operation(route: Route, operation: Operation) -> dict[str, Any]:
    described: dict[str, Any] = {
        "tags": ["admin"],
        "summary": operation.summary,
        "security": _SECURITY,
        "responses": _responses(route, operation),
    }
    if operation.query is not None:
        described["parameters"] = _query_parameters(operation.query)
    if operation.body is not None:
        described["requestBody"] = {
            "required": operation.body_required,
            **_json(ref(operation.body.__name__)),
        }
    return described


def _path_parameters(route: Route) -> list[dict[str, Any]]:
    described = []
    for placeholder in re.findall(r"\{(\w+)\}", route.path):
        parameter = route.parameter(placeholder)
        schema = {"type": "string"}
        if parameter.pattern:
            schema["pattern"] = parameter.pattern
        described.append(
            {"name": parameter.name, "in": "path", "required": True,
             "description": parameter.description, "schema": schema}
        )  # fmt: skip
    return described


def _path(route: Route) -> str:
    return PREFIX + re.sub(
        r"\{(\w+)\}", lambda found: "{" + route.parameter(found[1]).name + "}", route.path
    )


def _types(slices: Iterable[Slice]) -> list[type]:
    """Every body's and answer's type the slices name, each once, in order."""
    found: dict[type, None] = {}
    for piece in slices:
        for route in piece.routes:
            for operation in route.operations.values():
                named = [operation.body, *(a.body for a in operation.answers.values())]
                found.update(dict.fromkeys(t for t in named if t is not None))
    return list(found)


def _schemas(types: Sequence[type]) -> dict[str, Any]:
    """The types' schemas by name, with what each body type adds (``Body.schema_extra``), its
    description from its docstring, and no ``title`` (the name says it)."""
    _, components = msgspec.json.schema_components(types, ref_template=SCHEMAS + "{name}")
    classes = {cls.__name__: cls for cls in _reachable(types)}
    schemas: dict[str, Any] = {}
    for name, schema in components.items():
        if name not in classes:
            raise TypeError(f"two admin types are both named {name.rsplit('.', 1)[-1]!r}")
        schema.pop("title", None)
        if schema.get("required") == []:
            del schema["required"]
        if "description" in schema:
            schema["description"] = " ".join(inspect.cleandoc(schema["description"]).split())
        cls = classes[name]
        if isinstance(cls, type) and issubclass(cls, Body):
            schema.update(cls.schema_extra)
        schemas[name] = _enums_in_order(schema)
    return schemas


def _enums_in_order(schema: Any) -> Any:
    """``schema`` with each ``enum`` listed in the order it was declared (``in_order``)."""
    if isinstance(schema, list):
        return [_enums_in_order(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ordered = {key: _enums_in_order(value) for key, value in schema.items()}
    if isinstance(schema.get("enum"), list) and all(isinstance(v, str) for v in schema["enum"]):
        ordered["enum"] = in_order(schema["enum"])
    return ordered


def _reachable(types: Iterable[type]) -> set[type]:
    """The Struct types ``types`` are made of (a field's, an item's), themselves included."""
    seen: set[type] = set()

    def visit(info: Any) -> None:
        if isinstance(info, msgspec.inspect.StructType):
            if info.cls in seen:
                return
            seen.add(info.cls)
            for field in info.fields:
                visit(field.type)
            return
        for value in getattr(info, "__struct_fields__", ()):
            visit(getattr(info, value))
        if isinstance(info, tuple):
            for item in info:
                visit(item)

    for found in msgspec.inspect.multi_type_info(list(types)):
        visit(found)
    return seen


@cache
def admin_document(slices: tuple[Slice, ...] = SLICES) -> tuple[dict[str, Any], dict[str, Any]]:
    """The admin API's paths and schemas, from ``slices``."""
    paths: dict[str, Any] = {}
    for piece in slices:
        for route in piece.routes:
            item: dict[str, Any] = {}
            parameters = _path_parameters(route)
            if parameters:
                item["parameters"] = parameters
            for method, operation in route.operations.items():
                item[method] = _operation(route, operation)
            paths[_path(route)] = item
    document = msgspec.json.encode([paths, _schemas(_types(slices))])
    paths, schemas = msgspec.json.decode(document)  # JSON's own values: a default tuple a list
    return paths, schemas


def rule_schemas(rule_types: Sequence[type[Rule]]) -> dict[str, Any]:
    """Each rule type's schema, named after its class (``StaticRule``), from what the type
    says of its fields (``Rule.fields``), and ``Rule``: one of them, by ``type``."""
    schemas: dict[str, Any] = {}
    for rule_type in rule_types:
        schemas[rule_type.__name__] = {
            "type": "object",
            "required": ["type", *(f.name for f in rule_type.fields if f.required)],
            "properties": {
                "type": {"const": str(rule_type.type)},
                **{f.name: f.schema for f in rule_type.fields},
                "value": _VALUE,
            },
        }
    names = {str(rule_type.type): rule_type.__name__ for rule_type in rule_types}
    schemas["Rule"] = {
        "oneOf": [ref(name) for name in names.values()],
        "discriminator": {
            "propertyName": "type",
            "mapping": {kind: SCHEMAS + name for kind, name in names.items()},
        },
    }
    return schemas


ADMIN_PATHS, ADMIN_SCHEMAS = admin_document()
