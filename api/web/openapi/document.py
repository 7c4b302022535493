"""The whole OpenAPI 3.1 document, assembled from each surface's own description."""

from __future__ import annotations

from functools import cache
from typing import Any

import falcon
import falcon.asgi

from api.web.jsonio import encode
from api.web.openapi.admin import ADMIN_PATHS, ADMIN_SCHEMAS
from api.web.openapi.ofrep import OFREP_PATHS, OFREP_SCHEMAS
from api.web.openapi.public import PUBLIC_PATHS, PUBLIC_SCHEMAS, SECURITY_SCHEMES


@cache
def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "flagsight",
            "version": "1.0.0",
            "description": "Feature flag evaluation, outcome feedback and administration.",
        },
        "paths": {**PUBLIC_PATHS, **OFREP_PATHS, **ADMIN_PATHS},
        "components": {
            "schemas": {**ADMIN_SCHEMAS, **PUBLIC_SCHEMAS, **OFREP_SCHEMAS},
            "securitySchemes": {
                **SECURITY_SCHEMES,
                "AdminToken": {"type": "http", "scheme": "bearer"},
            },
        },
    }


class OpenApiResource:
    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        resp.data = encode(openapi_document())
        resp.content_type = falcon.MEDIA_JSON
