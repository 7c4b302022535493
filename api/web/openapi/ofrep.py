"""OpenAPI 3.1 description of the OFREP 0.3 endpoints as flagsight serves them (contract 7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flagsight_core import Rule
from flagsight_core.contract import (
    ATTRIBUTE_NAME_SPEC,
    ATTRIBUTES_MAX,
    FLAG_KEY_MAX,
    USER_IDENTIFIER_ATTRIBUTE,
    USER_IDENTIFIER_MAX,
    OfrepErrorCode,
    OfrepReason,
)

from api.web.openapi.public import (
    ATTRIBUTE_ARRAY,
    ATTRIBUTE_STRING,
    ENTITY_TAGS,
    EVALUATION_ID,
    QUOTA_HEADERS,
    error_response,
)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


_METADATA = {
    "type": "object",
    "required": ["evaluationId"],
    "properties": {"evaluationId": {**EVALUATION_ID, "description": "For /v1/feedback"}},
}
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Whole seconds until the next UTC month, when the plan's count restarts",
        "schema": {"type": "integer", "minimum": 1},
    }
}

OFREP_SCHEMAS: dict[str, Any] = {
    "OfrepContext": {
        "type": "object",
        "description": "OpenFeature evaluation context; `targetingKey` is the user identifier,"
        " and each other field named as an attribute may be (`^" + ATTRIBUTE_NAME_SPEC + "$`,"
        f" not `{USER_IDENTIFIER_ATTRIBUTE}`) is one of the user's attributes (contract 12)."
        " A field of another shape (an object, null, an array holding anything but strings, a"
        " number no double holds) is ignored. Refused with 400 `INVALID_CONTEXT`: more than"
        f" {ATTRIBUTES_MAX} fields of an attribute's shape (a string, a number, a boolean, an"
        " array of strings), or a string or array over an attribute's limits.",
        "required": ["targetingKey"],
        "properties": {
            "targetingKey": {"type": "string", "minLength": 1, "maxLength": USER_IDENTIFIER_MAX}
        },
        "additionalProperties": {
            "anyOf": [
                {"type": ["number", "boolean", "null", "object"]},
                ATTRIBUTE_STRING,
                ATTRIBUTE_ARRAY,
                {"type": "array", "contains": {"not": {"type": "string"}}},
            ]
        },
    },
    "OfrepEvaluationRequest": {
        "type": "object",
        "required": ["context"],
        "properties": {"context": _ref("OfrepContext")},
    },
    "OfrepEvaluationFailure": {
        "type": "object",
        "description": "A flag that could not be evaluated. Request errors (400, 413, 415) also "
        "carry the contract's `status`, `error` and `message`; evaluation outcomes (404, 429, "
        "bulk entries) carry `metadata.evaluationId`.",
        "required": ["errorCode", "errorDetails"],
        "properties": {
            "key": {"type": "string"},
            "errorCode": {"enum": [str(code) for code in OfrepErrorCode]},
            "errorDetails": {"type": "string"},
            "metadata": _METADATA,
            "status": {"type": "integer"},
            "error": {"type": "string"},
            "message": {"type": "string"},
        },
    },
    "OfrepBulkEvaluationSuccess": {
        "type": "object",
        "required": ["flags"],
        "properties": {
            "flags": {
                "type": "array",
                "description": "Every flag of the environment, by key; disabled and archived "
                "flags answer value false, reason DISABLED. A flag refused by the plan's hard "
                "threshold (only when the threshold is reached during this request) is a "
                "GENERAL failure entry.",
                "items": {
                    "oneOf": [_ref("OfrepEvaluationSuccess"), _ref("OfrepEvaluationFailure")]
                },
            },
            "eventStreams": {
                "type": "array",
                "description": "ADR-0008: the server-sent event stream that asks for a "
                "re-fetch within a second of a change (GET it with the same key)",
                "items": {
                    "type": "object",
                    "required": ["type", "url"],
                    "properties": {"type": {"const": "sse"}, "url": {"type": "string"}},
                },
            },
        },
    },
}


def ofrep_success_schemas(rule_types: Sequence[type[Rule]]) -> dict[str, Any]:
    """``OfrepEvaluationSuccess``: its reasons are the rule types' and the answers' without a
    rule (no match, disabled)."""
    reasons = [rule_type.ofrep_reason for rule_type in rule_types]
    reasons += [OfrepReason.DEFAULT, OfrepReason.DISABLED]
    return {
        "OfrepEvaluationSuccess": {
            "type": "object",
            "required": ["key", "value", "reason", "variant", "metadata"],
            "properties": {
                "key": {"type": "string"},
                "value": {"type": "boolean"},
                "reason": {"enum": [str(reason) for reason in dict.fromkeys(reasons)]},
                "variant": {"enum": ["on", "off"]},
                "metadata": _METADATA,
            },
        },
    }


_API_KEY = [{"ApiKey": []}]
_UNAUTHORIZED = {"description": "Missing or invalid API key", **_json(_ref("UnauthorizedError"))}
_BAD_REQUEST = {
    "description": "Malformed body (PARSE_ERROR), context not an object, a targeting key that is "
    f"not a 1..{USER_IDENTIFIER_MAX}-character string or a context over the attributes' limits"
    " (INVALID_CONTEXT), no targeting key (TARGETING_KEY_MISSING)",
    **_json(_ref("OfrepEvaluationFailure")),
}
_REQUEST_BODY = {"required": True, **_json(_ref("OfrepEvaluationRequest"))}

OFREP_PATHS: dict[str, Any] = {
    "/ofrep/v1/evaluate/flags/{key}": {
        "post": {
            "summary": "OFREP: evaluate one flag for the context's targeting key",
            "tags": ["ofrep"],
            "security": _API_KEY,
            "parameters": [
                {
                    "name": "key",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "maxLength": FLAG_KEY_MAX},
                }
            ],
            "requestBody": _REQUEST_BODY,
            "responses": {
                "200": {
                    "description": "Evaluated (one metered evaluation event)",
                    "headers": QUOTA_HEADERS,
                    **_json(_ref("OfrepEvaluationSuccess")),
                },
                "400": _BAD_REQUEST,
                "401": _UNAUTHORIZED,
                "404": {
                    "description": "Flag not found (an evaluation event)",
                    "headers": QUOTA_HEADERS,
                    **_json(_ref("OfrepEvaluationFailure")),
                },
                "413": error_response("Body over its size limit"),
                "415": error_response("Body is not application/json"),
                "429": {
                    "description": "The organization is at its plan's hard threshold",
                    "headers": {**_RETRY_AFTER, **QUOTA_HEADERS},
                    **_json(_ref("OfrepEvaluationFailure")),
                },
            },
        }
    },
    "/ofrep/v1/evaluate/flags": {
        "post": {
            "summary": "OFREP: evaluate every flag of the key's environment for one targeting key",
            "tags": ["ofrep"],
            "security": _API_KEY,
            "parameters": [
                {
                    "name": "If-None-Match",
                    "in": "header",
                    "required": False,
                    "schema": ENTITY_TAGS,
                    "description": "An ETag from an earlier answer: 304 if no answer changed",
                }
            ],
            "requestBody": _REQUEST_BODY,
            "responses": {
                "200": {
                    "description": "One metered evaluation event per flag",
                    "headers": {
                        **QUOTA_HEADERS,
                        "ETag": {
                            "description": "Strong; from the environment's configuration version and "
                            "the context. Absent when the plan refused some of the flags.",
                            "schema": {"type": "string"},
                        },
                    },
                    **_json(_ref("OfrepBulkEvaluationSuccess")),
                },
                "304": {
                    "description": "No answer changed; nothing was recorded or metered",
                    "headers": QUOTA_HEADERS,
                },
                "400": _BAD_REQUEST,
                "401": _UNAUTHORIZED,
                "413": error_response("Body over its size limit"),
                "415": error_response("Body is not application/json"),
                "429": {
                    "description": "The organization is at its plan's hard threshold",
                    "headers": {**_RETRY_AFTER, **QUOTA_HEADERS},
                    **_json(_ref("OfrepEvaluationFailure")),
                },
            },
        }
    },
}
