"""The whole OpenAPI 3.1 document, assembled from each surface's own description."""

from __future__ import annotations

from functools import cache
from typing import Any

import falcon
import falcon.asgi
from flagsight_core import RULE_TYPES, Rule

from api.web.jsonio import encode
from api.web.openapi.admin import (
    ADMIN_PATHS,
    ADMIN_SCHEMAS,
    ADMIN_SECURITY_SCHEMES,
    rule_schemas,
)
from api.web.openapi.local import LOCAL_PATHS, LOCAL_SCHEMAS
from api.web.openapi.ofrep import OFREP_PATHS, OFREP_SCHEMAS, ofrep_success_schemas
from api.web.openapi.public import (
    PUBLIC_PATHS,
    PUBLIC_SCHEMAS,
    SECURITY_SCHEMES,
    evaluate_response_schemas,
)


def openapi_document() -> dict[str, Any]:
    """The document for the rule types registered now (``flagsight_core.RULE_TYPES``)."""
    return _document(tuple(RULE_TYPES.values()))


def _merged(*parts: dict[str, Any]) -> dict[str, Any]:
    """The surfaces' schemas in one mapping: a name two surfaces define differently is an
    error, not a silent overwrite."""
    merged: dict[str, Any] = {}
    for part in parts:
        for name, schema in part.items():
            if merged.setdefault(name, schema) != schema:
                raise ValueError(f"two different schemas are named {name!r}")
    return merged


@cache
def _document(rule_types: tuple[type[Rule], ...]) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "flagsight",
            "version": "1.0.0",
            "description": "Feature flag evaluation, outcome feedback and administration.",
        },
        "paths": {**PUBLIC_PATHS, **LOCAL_PATHS, **OFREP_PATHS, **ADMIN_PATHS},
        "components": {
            "schemas": _merged(
                ADMIN_SCHEMAS,
                rule_schemas(rule_types),
                PUBLIC_SCHEMAS,
                LOCAL_SCHEMAS,
                evaluate_response_schemas(rule_types),
                OFREP_SCHEMAS,
                ofrep_success_schemas(rule_types),
            ),
            "securitySchemes": {
                **SECURITY_SCHEMES,
                **ADMIN_SECURITY_SCHEMES,
            },
        },
    }


class OpenApiResource:
    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        resp.data = encode(openapi_document())
        resp.content_type = falcon.MEDIA_JSON
