"""OpenAPI description of local evaluation's endpoints (contract section 11): the ruleset, the
two event streams, and the quota and report calls of ``api.web.public.local``."""

from __future__ import annotations

from typing import Any

from flagsight_core.conditions import condition_schema
from flagsight_core.contract import (
    FLAG_KEY_MAX,
    LOCAL_GRANT_MAX,
    LOCAL_REPORT_MAX,
    SDK_MAX,
    USER_IDENTIFIER_MAX,
    ErrorType,
)
from flagsight_core.model import ARM_CONTROL, ARM_TREATMENT, NOT_EVALUATED
from flagsight_core.ruleset import FORMAT, TARGETING_FORMAT

from api.web.openapi.public import (
    _API_KEY,
    _COMMON_ERRORS,
    _UNAUTHORIZED,
    ENTITY_TAGS,
    _json,
    _post,
    _ref,
    error_response,
)

_EVENT_STREAM = {"text/event-stream": {"schema": {"type": "string"}}}

LOCAL_SCHEMAS: dict[str, Any] = {
    "Ruleset": {
        "type": "object",
        "required": ["format", "environmentId", "version", "segmentSalt", "flags", "segments"],
        "properties": {
            "format": {
                "enum": [FORMAT, TARGETING_FORMAT],
                "description": f"{FORMAT}; {TARGETING_FORMAT} when a segment has conditions or a"
                " percentage rule names a segment (contract 12), which a reader of format"
                f" {FORMAT} alone refuses",
            },
            "environmentId": {"type": "string"},
            "version": {"type": "integer"},
            "segmentSalt": {
                "type": "string",
                "description": "The environment's salt for its segment tables: base64 of 16 bytes",
            },
            "flags": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["key", "enabled", "archived", "rules"],
                    "properties": {
                        "key": {"type": "string"},
                        "enabled": {"type": "boolean"},
                        "archived": {"type": "boolean"},
                        "rules": {"type": "array", "items": _ref("Rule")},
                    },
                },
            },
            "segments": {
                "type": "object",
                "description": "Each segment a rule names, as its membership table: base64 of "
                "little-endian uint64 slots (open addressing, linear probing, 0 = empty) holding, "
                "for each identifier, h = the first 64 bits of MurmurHash3 x64-128 (seed 0) of its "
                "UTF-8 bytes (0 taken as 1), salted: the 8-byte BLAKE2b of h (little-endian) keyed "
                "with segmentSalt, read as a little-endian uint64 (0 taken as 1)",
                "additionalProperties": {
                    "type": "object",
                    "required": ["members", "table"],
                    "properties": {
                        "members": {"type": "integer"},
                        "table": {"type": "string"},
                        "excludedMembers": {
                            "type": "integer",
                            "description": "Format 3, a segment with conditions: its excluded"
                            " identifiers' count",
                        },
                        "excludedTable": {
                            "type": "string",
                            "description": "Format 3, a segment with conditions: its excluded"
                            " identifiers, as table is",
                        },
                        "conditions": {
                            "type": "array",
                            "items": condition_schema(),
                            "description": "Format 3: a user in neither table is in the segment"
                            " when every condition holds",
                        },
                    },
                },
            },
        },
    },
    "LocalQuotaRequest": {
        "type": "object",
        "required": ["want"],
        "properties": {"want": {"type": "integer", "minimum": 1, "maximum": LOCAL_GRANT_MAX}},
    },
    "LocalQuotaGrant": {
        "type": "object",
        "required": ["granted", "idPrefix"],
        "properties": {
            "granted": {"type": "integer", "minimum": 0, "maximum": LOCAL_GRANT_MAX},
            "idPrefix": {
                "type": ["string", "null"],
                "description": "The signed prefix of the granted evaluation ids: the i-th is "
                "the prefix and i as four lower-case hex digits; null when nothing is granted",
            },
        },
    },
    "LocalQuotaReturn": {
        "type": "object",
        "required": ["idPrefix", "unused"],
        "properties": {
            "idPrefix": {"type": "string", "minLength": 1, "maxLength": 64},
            "unused": {"type": "integer", "minimum": 0, "maximum": LOCAL_GRANT_MAX},
        },
    },
    "LocalReport": {
        "type": "object",
        "required": ["evaluations"],
        "properties": {
            "sdk": {"type": ["string", "null"], "maxLength": SDK_MAX},
            "evaluations": {
                "type": "array",
                "maxItems": LOCAL_REPORT_MAX,
                "items": {
                    "type": "array",
                    "description": "evaluationId, evaluatedAt (Unix ms), flagKey, "
                    "userIdentifier, value, matchedRuleType, errorType, ruleIndex, arm, "
                    "rolloutPercentage",
                    "prefixItems": [
                        {"type": "string", "minLength": 1, "maxLength": 64},
                        {"type": "integer"},
                        {"type": "string", "minLength": 1, "maxLength": FLAG_KEY_MAX},
                        {"type": "string", "minLength": 1, "maxLength": USER_IDENTIFIER_MAX},
                        {"type": "boolean"},
                        {"type": ["string", "null"]},
                        {"enum": [*(str(error) for error in ErrorType), None]},
                        {"type": ["integer", "null"], "minimum": 0, "maximum": NOT_EVALUATED - 1},
                        {"enum": [ARM_TREATMENT, ARM_CONTROL, None]},
                        {"type": ["number", "null"], "minimum": 0, "maximum": 100},
                    ],
                    "minItems": 10,
                    "maxItems": 10,
                },
            },
        },
    },
}

_TOO_MANY_STREAMS: dict[str, Any] = {
    **error_response("The key holds its most event streams on this host (500 by default)"),
    "headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 1}}},
}
_STREAM_DESCRIPTION = (
    "Server-sent events; a comment line every 5 s; ends within a second of the key's "
    "revocation (a new request then gets 401)."
)

LOCAL_PATHS: dict[str, Any] = {
    "/v1/ruleset": {
        "get": {
            "summary": "The key's environment as a local SDK decides from it (not metered)",
            "tags": ["local evaluation"],
            "security": _API_KEY,
            "parameters": [{"name": "If-None-Match", "in": "header", "schema": ENTITY_TAGS}],
            "responses": {
                "200": {
                    "description": "The ruleset, with a strong ETag",
                    "headers": {"ETag": {"schema": {"type": "string"}}},
                    **_json(_ref("Ruleset")),
                },
                "304": {"description": "Unchanged since the ETag sent in If-None-Match"},
                "401": _UNAUTHORIZED,
            },
        }
    },
    "/v1/stream": {
        "get": {
            "summary": "Ruleset versions as server-sent events",
            "description": "`event: ruleset` with `data: {'version': N}` (JSON) at once and within a"
            " second of any change to the environment's ruleset. " + _STREAM_DESCRIPTION,
            "tags": ["local evaluation"],
            "security": _API_KEY,
            "responses": {
                "200": {"description": "The stream", "content": _EVENT_STREAM},
                "401": _UNAUTHORIZED,
                "429": _TOO_MANY_STREAMS,
            },
        }
    },
    "/ofrep/v1/stream": {
        "get": {
            "summary": "OFREP event stream (ADR-0008), advertised by the bulk answer",
            "description": '`data: {"type": "refetchEvaluation", "etag": ..., "lastModified":'
            " <unix seconds>}` within a second of any change to the environment. "
            + _STREAM_DESCRIPTION,
            "tags": ["ofrep"],
            "security": _API_KEY,
            "responses": {
                "200": {"description": "The stream", "content": _EVENT_STREAM},
                "401": _UNAUTHORIZED,
                "429": _TOO_MANY_STREAMS,
            },
        }
    },
    "/v1/local/quota": _post(
        "Quota for a local SDK, with its block of evaluation ids",
        "LocalQuotaRequest",
        {"200": {"description": "The grant", **_json(_ref("LocalQuotaGrant"))}, **_COMMON_ERRORS},
        "local evaluation",
    ),
    "/v1/local/quota/return": _post(
        "Give back a grant's unspent quota",
        "LocalQuotaReturn",
        {
            "200": {
                "description": "Taken back",
                **_json(
                    {
                        "type": "object",
                        "required": ["returned"],
                        "properties": {"returned": {"type": "integer"}},
                    }
                ),
            },
            **_COMMON_ERRORS,
            "503": error_response(
                "The give-back cannot be recorded now; nothing was given back; retry"
            ),
        },
        "local evaluation",
    ),
    "/v1/local/report": _post(
        "Report local evaluations: each one evaluation event (source local)",
        "LocalReport",
        {
            "200": {
                "description": "Every evaluation is in the event log",
                **_json(
                    {
                        "type": "object",
                        "required": ["accepted"],
                        "properties": {"accepted": {"type": "integer"}},
                    }
                ),
            },
            **_COMMON_ERRORS,
            "503": error_response(
                "The event log or the grant ledger cannot take writes; nothing was stored; retry"
            ),
        },
        "local evaluation",
    ),
}
