"""OpenAPI 3.1 description of the public ``/v1`` endpoints and the operations endpoints."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from flagsight_core import Rule
from flagsight_core.contract import (
    ATTRIBUTE_ARRAY_MAX,
    ATTRIBUTE_NAME_SPEC,
    ATTRIBUTE_STRING_MAX,
    ATTRIBUTES_MAX,
    BULK_MAX_FEEDBACKS,
    BULK_MAX_USERS,
    ERROR_TYPE_MAX,
    FLAG_KEY_MAX,
    KEY_SCHEMA_PATTERN,
    SDK_MAX,
    TRACK_MAX_AGE_S,
    TRACK_MAX_AHEAD_S,
    TRACK_MAX_EVENTS,
    TRACK_SOURCE_HEADER,
    USER_IDENTIFIER_ATTRIBUTE,
    USER_IDENTIFIER_MAX,
    ErrorType,
)

from api.eventlog.schema import TRACK_SOURCES


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def error_response(description: str) -> dict[str, Any]:
    return {"description": description, **_json(_ref("Error"))}


QUOTA_HEADERS: dict[str, Any] = {
    "RateLimit-Policy": {
        "description": "The organization's monthly quota (draft-ietf-httpapi-ratelimit-headers):"
        ' `"monthly";q=<evaluations served this UTC month at most: the plan\'s hard threshold>`',
        "schema": {"type": "string", "pattern": '^"monthly";q=[0-9]+$'},
    },
    "RateLimit": {
        "description": '`"monthly";r=<evaluations left>;t=<seconds until the next UTC month>`;'
        " refreshed at most once a second per worker",
        "schema": {"type": "string", "pattern": '^"monthly";r=[0-9]+;t=[0-9]+$'},
    },
}
"""On every evaluate answer (``api.web.public.quota``)."""

EVALUATION_ID = {"type": "string", "pattern": "^[A-Za-z0-9_-]{42}[0-9a-f]{4}$"}

ENTITY_TAGS = {"type": "string", "pattern": "^[\\t\\x20-\\x7e]*$"}
"""An ``If-None-Match`` value: entity tags, visible ASCII (RFC 9110 8.8.3). A control
character is no field value at all (RFC 9110 5.5): the HTTP parser refuses the request before
any route, in the service's generic error body."""
"""An evaluation id as this service issues it (``flagsight_core.ids``): 42 characters of
URL-safe base64, then the index in the batch as four hex digits."""

_UNAUTHORIZED = {"description": "Missing or invalid API key", **_json(_ref("UnauthorizedError"))}

_COMMON_ERRORS = {
    "400": error_response("Malformed JSON, a missing or mistyped field, or a limit passed"),
    "401": _UNAUTHORIZED,
    "413": error_response("Body over its size limit"),
    "415": error_response("Body is not application/json"),
}

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["status", "error", "message"],
    "properties": {
        "status": {"type": "integer"},
        "error": {"type": "string"},
        "message": {"type": "string"},
    },
}

_FLAG_KEY = {"type": "string", "minLength": 1, "maxLength": FLAG_KEY_MAX}
_USER_IDENTIFIER = {"type": "string", "minLength": 1, "maxLength": USER_IDENTIFIER_MAX}
_SDK = {"type": ["string", "null"], "maxLength": SDK_MAX}
ATTRIBUTE_STRING = {"type": "string", "maxLength": ATTRIBUTE_STRING_MAX}
"""An attribute's string value, or an item of its array value (contract 12)."""
ATTRIBUTE_ARRAY = {"type": "array", "maxItems": ATTRIBUTE_ARRAY_MAX, "items": ATTRIBUTE_STRING}
_DOUBLE_MAX = sys.float_info.max
"""A finite number is one an IEEE double holds: the core compares numbers as doubles."""

ATTRIBUTE_SCHEMAS: dict[str, Any] = {
    "AttributeValue": {
        "description": f"A string of at most {ATTRIBUTE_STRING_MAX} characters, a finite number,"
        f" a boolean, or an array of at most {ATTRIBUTE_ARRAY_MAX} such strings",
        "anyOf": [
            ATTRIBUTE_STRING,
            {"type": "number", "minimum": -_DOUBLE_MAX, "maximum": _DOUBLE_MAX},
            {"type": "boolean"},
            ATTRIBUTE_ARRAY,
        ],
    },
    "Attributes": {
        "type": "object",
        "description": "What the application knows of the user, by attribute name (contract 12):"
        " segment conditions read them. The name `userIdentifier` is reserved (conditions read"
        " the user's identifier by it). Values are never stored or logged.",
        "maxProperties": ATTRIBUTES_MAX,
        "propertyNames": {
            "pattern": f"^{ATTRIBUTE_NAME_SPEC}$",
            "not": {"const": USER_IDENTIFIER_ATTRIBUTE},
        },
        "additionalProperties": _ref("AttributeValue"),
    },
}
"""One user's attributes, as ``/v1`` takes them (``api.web.attributes``)."""

_FINITE_NUMBER = {"type": "number", "minimum": -_DOUBLE_MAX, "maximum": _DOUBLE_MAX}

TRACK_SCHEMAS: dict[str, Any] = {
    "TrackEvent": {
        "type": "object",
        "required": ["name", "userIdentifier"],
        "properties": {
            "name": {
                "type": "string",
                "pattern": KEY_SCHEMA_PATTERN,
                "description": "What happened, as a metric's `event` names it",
            },
            "userIdentifier": {**_USER_IDENTIFIER, "description": "Who did it"},
            "value": {
                "oneOf": [{"type": "null"}, _FINITE_NUMBER],
                "description": "A finite number the metrics of kind sum and mean add up"
                " (a JSON boolean is not a number)",
            },
            "at": {
                "type": ["string", "null"],
                "format": "date-time",
                "description": "When it happened (RFC 3339 with its offset), within the"
                f" {TRACK_MAX_AGE_S // 3600} hours before the request arrives and at most"
                f" {TRACK_MAX_AHEAD_S // 60} minutes after it (else 400); default: its arrival",
            },
        },
    },
    "TrackRequest": {
        "type": "object",
        "required": ["events"],
        "properties": {
            "events": {
                "type": "array",
                "maxItems": TRACK_MAX_EVENTS,
                "items": _ref("TrackEvent"),
            },
        },
    },
}
"""``POST /v1/track`` (``api.web.public.track``)."""

PUBLIC_SCHEMAS: dict[str, Any] = {
    **ATTRIBUTE_SCHEMAS,
    **TRACK_SCHEMAS,
    "Error": ERROR_SCHEMA,
    "UnauthorizedError": {
        "type": "object",
        "required": ["status", "error", "message"],
        "properties": {
            "status": {"const": 401},
            "error": {"const": "Unauthorized"},
            "message": {"const": "Missing or invalid Authorization header"},
        },
    },
    "EvaluateRequest": {
        "type": "object",
        "required": ["flagKey", "userIdentifier"],
        "properties": {
            "flagKey": _FLAG_KEY,
            "userIdentifier": _USER_IDENTIFIER,
            "sdk": _SDK,
            "attributes": {"oneOf": [{"type": "null"}, _ref("Attributes")]},
        },
    },
    "EvaluationError": {
        "type": "object",
        "required": ["type", "message"],
        "properties": {
            "type": {"enum": [str(error) for error in ErrorType]},
            "message": {"type": "string"},
        },
    },
    "BulkEvaluateRequest": {
        "type": "object",
        "required": ["flagKey", "userIdentifiers"],
        "properties": {
            "flagKey": _FLAG_KEY,
            "userIdentifiers": {
                "type": "array",
                "maxItems": BULK_MAX_USERS,
                "items": _USER_IDENTIFIER,
            },
            "sdk": _SDK,
            "attributes": {
                "type": ["object", "null"],
                "description": "By user identifier, the attributes of the users that have any;"
                " each key must be one of `userIdentifiers` (else 400)",
                "maxProperties": BULK_MAX_USERS,
                "propertyNames": _USER_IDENTIFIER,
                "additionalProperties": _ref("Attributes"),
            },
        },
    },
    "BulkEvaluateResponse": {
        "type": "object",
        "additionalProperties": _ref("EvaluateResponse"),
    },
    "FeedbackEvent": {
        "type": "object",
        "required": ["evaluationId", "result"],
        "properties": {
            "evaluationId": {
                **EVALUATION_ID,
                "description": "As issued by an evaluate answer of this service for this key's"
                " environment: the id is signed, so any other (of this form or not) is refused"
                " with 400",
            },
            "result": {"type": "boolean"},
            "latencyMs": {"type": ["number", "null"], "minimum": 0},
            "errorType": {"type": ["string", "null"], "maxLength": ERROR_TYPE_MAX},
        },
    },
    "BulkFeedbackRequest": {
        "type": "object",
        "required": ["feedbacks"],
        "properties": {
            "feedbacks": {
                "type": "array",
                "maxItems": BULK_MAX_FEEDBACKS,
                "items": _ref("FeedbackEvent"),
            },
        },
    },
}


def evaluate_response_schemas(rule_types: Sequence[type[Rule]]) -> dict[str, Any]:
    """``EvaluateResponse``: its ``matchedRuleType`` is one of the registered rule types."""
    return {
        "EvaluateResponse": {
            "type": "object",
            "required": ["value", "matchedRuleType", "error", "evaluationId"],
            "properties": {
                "value": {"type": "boolean"},
                "matchedRuleType": {"enum": [*(str(t.type) for t in rule_types), None]},
                "error": {"oneOf": [{"type": "null"}, _ref("EvaluationError")]},
                "evaluationId": EVALUATION_ID,
            },
        },
    }


_API_KEY = [{"ApiKey": []}]


def _post(summary: str, request: str, responses: dict[str, Any], tag: str) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "tags": [tag],
            "security": _API_KEY,
            "requestBody": {"required": True, **_json(_ref(request))},
            "responses": responses,
        }
    }


_FEEDBACK_ERRORS = {
    **_COMMON_ERRORS,
    "204": {"description": "Stored in the event log"},
    "403": error_response("Insights is not enabled for the key's environment"),
    "503": error_response("The event log cannot take writes; retry"),
}

_TRACK_SOURCE = {
    "name": TRACK_SOURCE_HEADER,
    "in": "header",
    "required": False,
    "description": "Who sends the events, stored as their `source`: the SDK (`sdk`) or its"
    " OpenFeature provider (`provider`); absent: `http`",
    "schema": {"enum": list(TRACK_SOURCES)},
}


def _track_path() -> dict[str, Any]:
    path = _post(
        f"Track up to {TRACK_MAX_EVENTS} events users did, for metrics",
        "TrackRequest",
        {**_FEEDBACK_ERRORS, "204": {"description": "Every event is in the event log"}},
        "metrics",
    )
    path["post"]["parameters"] = [_TRACK_SOURCE]
    return path


PUBLIC_PATHS: dict[str, Any] = {
    "/v1/evaluate": _post(
        "Evaluate one flag for one user",
        "EvaluateRequest",
        {
            "200": {
                "description": "The evaluation",
                "headers": QUOTA_HEADERS,
                **_json(_ref("EvaluateResponse")),
            },
            **_COMMON_ERRORS,
        },
        "evaluation",
    ),
    "/v1/evaluate/bulk": _post(
        f"Evaluate one flag for many users (at most {BULK_MAX_USERS:,})",
        "BulkEvaluateRequest",
        {
            "200": {
                "description": "One entry per distinct user",
                "headers": QUOTA_HEADERS,
                **_json(_ref("BulkEvaluateResponse")),
            },
            **_COMMON_ERRORS,
        },
        "evaluation",
    ),
    "/v1/feedback/report": _post(
        "Report the outcome of one evaluation (beta)", "FeedbackEvent", _FEEDBACK_ERRORS, "feedback"
    ),
    "/v1/feedback/bulk": _post(
        f"Report up to {BULK_MAX_FEEDBACKS} outcomes at once (beta)",
        "BulkFeedbackRequest",
        _FEEDBACK_ERRORS,
        "feedback",
    ),
    "/v1/track": _track_path(),
    "/v1/usage": {
        "get": {
            "summary": "The key's organization's evaluations this UTC month, against its limit",
            "description": "The same body as `GET /admin/v1/organizations/{orgId}/usage`.",
            "tags": ["usage"],
            "security": _API_KEY,
            "responses": {
                "200": {"description": "This month's usage", **_json(_ref("Usage"))},
                "401": _UNAUTHORIZED,
                "503": error_response(
                    "The count cannot be read now (the meter's database is unreachable); retry"
                ),
            },
        }
    },
    "/healthz": {
        "get": {
            "summary": "Liveness",
            "tags": ["operations"],
            "responses": {"200": {"description": "Alive", **_json({"type": "object"})}},
        }
    },
    "/readyz": {
        "get": {
            "summary": "Readiness",
            "tags": ["operations"],
            "responses": {
                "200": {"description": "Ready", **_json({"type": "object"})},
                "503": {"description": "Not ready", **_json({"type": "object"})},
            },
        }
    },
    "/openapi.json": {
        "get": {
            "summary": "This document",
            "tags": ["operations"],
            "responses": {"200": {"description": "OpenAPI 3.1", **_json({"type": "object"})}},
        }
    },
    "/metrics": {
        "get": {
            "summary": "Prometheus metrics",
            "tags": ["operations"],
            "responses": {
                "200": {
                    "description": "Exposition text",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    },
}

SECURITY_SCHEMES: dict[str, Any] = {
    "ApiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`Authorization: ApiKey <key>`; keys are scoped to one environment.",
    },
}
