"""Checking real answers against the service's own OpenAPI document (every surface)."""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from api.web.openapi.document import openapi_document

_ROOT_URI = "urn:flagsight:openapi"


class OpenApiChecker:
    """Finds the documented response for a concrete call and validates the body against it."""

    def __init__(self, document: dict[str, Any] | None = None):
        self.document = document or openapi_document()
        self._registry = Registry().with_resource(
            _ROOT_URI, DRAFT202012.create_resource(self.document)
        )
        paths = self.document["paths"]
        self._templates = [
            (re.compile(re.sub(r"\{[^/]+\}", "[^/]+", template) + "$"), template)
            for template in sorted(paths, key=lambda t: t.count("{"))
        ]

    def documented_response(self, path: str, method: str, status: int) -> dict[str, Any] | None:
        """The response object; None for paths the document does not describe or a 405."""
        for pattern, template in self._templates:
            if pattern.match(path):
                operation = self.document["paths"][template].get(method.lower())
                if operation is None:
                    return None
                assert str(status) in operation["responses"], (
                    f"{method} {template} answered {status}, undocumented"
                )
                return operation["responses"][str(status)]
        return None

    def check(self, path: str, method: str, status: int, body: Any, raw: bytes) -> None:
        response = self.documented_response(path, method, status)
        if response is None:
            return
        if "content" not in response:
            assert raw == b"", f"{method} {path} {status} must have no body"
            return
        media = response["content"].get("application/json")
        if media is None:
            return
        schema = media["schema"]
        if "$ref" in schema:
            schema = {"$ref": _ROOT_URI + schema["$ref"]}
        Draft202012Validator(schema, registry=self._registry).validate(body)
