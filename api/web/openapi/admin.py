"""OpenAPI 3.1 description of the admin API (``/admin/v1``, contract section 5).

``ADMIN_PATHS`` and ``ADMIN_SCHEMAS`` are merged into the one document ``/openapi.json``
serves. ``Error`` is defined exactly as the public description defines it, so either copy
may win the merge. The admin tests validate every answer they get against these schemas.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flagsight_core import Rule
from flagsight_core.contract import (
    FLAG_KEY_MAX,
    KEY_SCHEMA_PATTERN,
    MAX_NAME_LENGTH,
    MAX_RULES,
    MAX_SEGMENT_SIZE,
    USER_IDENTIFIER_MAX,
    Decision,
)

from api.controlplane.model import OWNER_MAX, PLAN_MONTHLY_LIMITS, FlagKind, Plan

TIMESTAMP = {"type": "string", "format": "date-time"}

ADMIN_SECURITY_SCHEMES: dict[str, Any] = {"AdminToken": {"type": "http", "scheme": "bearer"}}
_SECURITY = [{"AdminToken": []}]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _ok(description: str, schema: str) -> dict[str, Any]:
    return {"description": description, **_json(_ref(schema))}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, **_json(_ref("Error"))}


def _body(schema: str, required: bool = True) -> dict[str, Any]:
    return {"required": required, **_json(_ref(schema))}


_NO_CONTENT = {"description": "Done; no body"}
_E400 = _error("Malformed JSON, or a missing, mistyped or invalid field (the message names it)")
_E401 = _error("Missing or invalid admin token")
_E404 = _error("No such resource")
_E409 = _error("The key is taken, or the change would break another record")
_E413 = _error("Body over the admin size limit")
_E415 = _error("Body is not application/json")
_BODY_ERRORS = {"400": _E400, "401": _E401, "413": _E413, "415": _E415}


def _param(name: str, description: str, pattern: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if pattern:
        schema["pattern"] = pattern
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema,
    }


ORG_ID = _param("orgId", "Organization id", "^org_[0-9a-f]{16}$")
ENV_ID = _param("envId", "Environment id", "^env_[0-9a-f]{16}$")
KEY_ID = _param("keyId", "API key id", "^key_[0-9a-f]{16}$")
SEGMENT_KEY = _param("segmentKey", "Segment key (case-sensitive)", KEY_SCHEMA_PATTERN)
FLAG_KEY = _param("flagKey", "Flag key (case-sensitive)", KEY_SCHEMA_PATTERN)
METRICS_FLAG_KEY = _param("flagKey", f"Flag key as evaluated (1 to {FLAG_KEY_MAX} characters)")


def _op(
    summary: str, responses: dict[str, Any], body: str | None = None, body_required: bool = True
) -> dict[str, Any]:
    """One operation; ``body_required=False`` where every field of the body is optional and
    the body may be left out (the resource reads it with ``optional_body``)."""
    operation: dict[str, Any] = {
        "tags": ["admin"],
        "summary": summary,
        "security": _SECURITY,
        "responses": {
            **responses,
            "503": _error("The control plane stayed locked or unreadable; nothing changed, retry"),
        },
    }
    if body:
        operation["requestBody"] = _body(body, body_required)
    return operation


_PLAN = {"enum": [plan.value for plan in Plan]}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": 10**15}
_NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_VALUE = {"type": "boolean", "default": True}


_FLAG_META: dict[str, Any] = {
    "kind": {
        "enum": [kind.value for kind in FlagKind],
        "default": FlagKind.TEMPORARY.value,
        "description": "Whether the flag is meant to be removed one day; never changes"
        " evaluation. A PUT without it makes the flag temporary.",
    },
    "owner": {"type": ["string", "null"], "maxLength": OWNER_MAX},
    "expiresAt": {
        **TIMESTAMP,
        "type": ["string", "null"],
        "description": "When the flag should be gone (RFC 3339, with its offset); a temporary"
        " flag past it is stale. Answered in UTC.",
    },
}


def _list_of(schema: str) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["items"],
        "properties": {"items": {"type": "array", "items": _ref(schema)}},
    }


ADMIN_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["status", "error", "message"],
        "properties": {
            "status": {"type": "integer"},
            "error": {"type": "string"},
            "message": {"type": "string"},
        },
    },
    "Organization": {
        "type": "object",
        "required": ["id", "name", "plan", "monthlyEvaluationLimit"],
        "properties": {
            "id": {"type": "string", "pattern": "^org_[0-9a-f]{16}$"},
            "name": {"type": "string"},
            "plan": _PLAN,
            "monthlyEvaluationLimit": _LIMIT,
        },
    },
    "OrganizationCreate": {
        "type": "object",
        "required": ["name", "plan"],
        "description": "monthlyEvaluationLimit is required for enterprise; other plans take"
        " their plan's limit ("
        + ", ".join(f"{p} {n}" for p, n in PLAN_MONTHLY_LIMITS.items() if n is not None)
        + ").",
        "properties": {
            "name": _NAME,
            "plan": _PLAN,
            "monthlyEvaluationLimit": {"oneOf": [_LIMIT, {"type": "null"}]},
        },
        "if": {"required": ["plan"], "properties": {"plan": {"const": "enterprise"}}},
        "then": {
            "required": ["monthlyEvaluationLimit"],
            "properties": {"monthlyEvaluationLimit": _LIMIT},
        },
        "else": {"properties": {"monthlyEvaluationLimit": {"type": "null"}}},
    },
    "OrganizationUpdate": {
        "type": "object",
        "description": "A field left out or null is left unchanged. A limit can be chosen only on"
        " the enterprise plan: moving to free, pro or team takes that plan's limit (sending"
        " exactly it is accepted); moving to enterprise without a limit keeps the limit the"
        " organization has until one is chosen; a limit alone applies to an enterprise"
        " organization only (400 otherwise).",
        "properties": {
            "plan": {"oneOf": [_PLAN, {"type": "null"}]},
            "monthlyEvaluationLimit": {"oneOf": [_LIMIT, {"type": "null"}]},
        },
        "allOf": [
            {
                "if": {"required": ["plan"], "properties": {"plan": {"const": plan}}},
                "then": {"properties": {"monthlyEvaluationLimit": {"enum": [None, limit]}}},
            }
            for plan, limit in ((p.value, n) for p, n in PLAN_MONTHLY_LIMITS.items() if n)
        ],
    },
    "OrganizationList": _list_of("Organization"),
    "Usage": {
        "type": "object",
        "required": ["month", "evaluations", "limit", "hardLimit", "overage", "blocked"],
        "properties": {
            "month": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"},
            "evaluations": {"type": "integer", "minimum": 0},
            "limit": _LIMIT,
            "hardLimit": {"type": "integer", "minimum": 1},
            "overage": {"type": "boolean", "description": "evaluations > limit"},
            "blocked": {"type": "boolean", "description": "evaluations >= hardLimit"},
        },
    },
    "Environment": {
        "type": "object",
        "required": ["id", "key", "name", "insightsEnabled"],
        "properties": {
            "id": {"type": "string", "pattern": "^env_[0-9a-f]{16}$"},
            "key": {"type": "string", "pattern": KEY_SCHEMA_PATTERN},
            "name": {"type": "string"},
            "insightsEnabled": {"type": "boolean"},
        },
    },
    "EnvironmentCreate": {
        "type": "object",
        "required": ["key"],
        "properties": {
            "key": {"type": "string", "pattern": KEY_SCHEMA_PATTERN},
            "name": {"oneOf": [_NAME, {"type": "null"}], "description": "Defaults to the key"},
            "insightsEnabled": {"type": ["boolean", "null"], "default": False},
        },
    },
    "EnvironmentUpdate": {
        "type": "object",
        "properties": {
            "name": {"oneOf": [_NAME, {"type": "null"}]},
            "insightsEnabled": {"type": ["boolean", "null"]},
        },
    },
    "EnvironmentList": _list_of("Environment"),
    "ApiKey": {
        "type": "object",
        "required": ["id", "name", "createdAt"],
        "properties": {
            "id": {"type": "string", "pattern": "^key_[0-9a-f]{16}$"},
            "name": {"type": "string"},
            "createdAt": TIMESTAMP,
        },
    },
    "NewApiKey": {
        "type": "object",
        "required": ["id", "name", "key", "createdAt"],
        "properties": {
            "id": {"type": "string", "pattern": "^key_[0-9a-f]{16}$"},
            "name": {"type": "string"},
            "key": {
                "type": "string",
                "pattern": "^fsk_[A-Za-z0-9_-]{43}$",
                "description": "The secret. Shown only in this answer; only its hash is kept.",
            },
            "createdAt": TIMESTAMP,
        },
    },
    "ApiKeyCreate": {
        "type": "object",
        "properties": {"name": {"type": ["string", "null"], "maxLength": MAX_NAME_LENGTH}},
    },
    "ApiKeyList": _list_of("ApiKey"),
    "Flag": {
        "type": "object",
        "required": ["key", "enabled", "archived", "rules", "updatedAt"],
        "properties": {
            "key": {"type": "string", "pattern": KEY_SCHEMA_PATTERN},
            "enabled": {"type": "boolean"},
            "archived": {"type": "boolean"},
            "rules": {"type": "array", "items": _ref("Rule")},
            "updatedAt": TIMESTAMP,
            **_FLAG_META,
        },
    },
    "FlagPut": {
        "type": "object",
        "required": ["enabled", "rules"],
        "properties": {
            "enabled": {"type": "boolean"},
            "archived": {"type": ["boolean", "null"], "default": False},
            "rules": {
                "type": "array",
                "maxItems": MAX_RULES,
                "items": _ref("Rule"),
                "description": "Ordered; the first matching rule decides. A SEGMENT rule must"
                " name a segment of the organization.",
            },
            **_FLAG_META,
        },
    },
    "FlagList": _list_of("Flag"),
    "Segment": {
        "type": "object",
        "required": ["key", "size", "updatedAt"],
        "properties": {
            "key": {"type": "string", "pattern": KEY_SCHEMA_PATTERN},
            "size": {"type": "integer", "minimum": 0, "description": "Distinct identifiers"},
            "updatedAt": TIMESTAMP,
            "userIdentifiers": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Only in GET of one segment: the distinct identifiers, in the"
                " order first given.",
            },
        },
    },
    "SegmentPut": {
        "type": "object",
        "required": ["userIdentifiers"],
        "properties": {
            "userIdentifiers": {
                "type": "array",
                "maxItems": MAX_SEGMENT_SIZE,
                "items": {"type": "string", "minLength": 1, "maxLength": USER_IDENTIFIER_MAX},
            }
        },
    },
    "SegmentList": _list_of("Segment"),
    "HealthArm": {
        "type": "object",
        "description": "One arm, counted in users: coverage = usersWithFeedback / users x 100; "
        "failureRate = users with any failed feedback / usersWithFeedback x 100; latency "
        "percentiles over the users that reported one, each weighing once (its mean).",
        "required": [
            "users",
            "usersWithFeedback",
            "coverage",
            "failureRate",
            "latencyP50Ms",
            "latencyP95Ms",
            "latencyP99Ms",
        ],
        "properties": {
            "users": {"type": "integer", "minimum": 0},
            "usersWithFeedback": {"type": "integer", "minimum": 0},
            "coverage": _NUMBER_OR_NULL,
            "failureRate": _NUMBER_OR_NULL,
            "latencyP50Ms": _NUMBER_OR_NULL,
            "latencyP95Ms": _NUMBER_OR_NULL,
            "latencyP99Ms": _NUMBER_OR_NULL,
        },
    },
    "HealthComparison": {
        "type": "object",
        "description": "Treatment minus control in the metric's unit, with an always-valid "
        "confidence sequence (docs/statistics.md).",
        "required": ["difference", "ci", "confidence", "decision"],
        "properties": {
            "difference": _NUMBER_OR_NULL,
            "ci": {
                "oneOf": [
                    {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
                    {"type": "null"},
                ]
            },
            "confidence": {"type": "number"},
            "decision": {"enum": [str(decision) for decision in Decision]},
        },
    },
    "FlagHealth": {
        "type": "object",
        "required": [
            "computedAt",
            "percentage",
            "arms",
            "sampleRatio",
            "failureRate",
            "latencyP95Ms",
        ],
        "properties": {
            "computedAt": TIMESTAMP,
            "percentage": _NUMBER_OR_NULL,
            "arms": {
                "oneOf": [
                    {
                        "type": "object",
                        "required": ["treatment", "control"],
                        "properties": {
                            "treatment": _ref("HealthArm"),
                            "control": _ref("HealthArm"),
                        },
                    },
                    {"type": "null"},
                ]
            },
            "sampleRatio": {
                "type": "object",
                "required": ["expected", "observed", "pValue", "mismatch"],
                "properties": {
                    "expected": _NUMBER_OR_NULL,
                    "observed": _NUMBER_OR_NULL,
                    "pValue": _NUMBER_OR_NULL,
                    "mismatch": {"type": "boolean"},
                },
            },
            "failureRate": _ref("HealthComparison"),
            "latencyP95Ms": _ref("HealthComparison"),
            "coverage": _ref("HealthComparison"),
            "withheldReason": {"type": ["string", "null"]},
        },
    },
    "FlagMetrics": {
        "type": "object",
        "description": "The warehouse's flag_environment_metrics row, camelCase. Rates are"
        " percentages 0..100; a rate with a zero denominator is null.",
        "required": [
            "organizationId",
            "environmentId",
            "environmentKey",
            "flagKey",
            "evaluations",
            "feedbackCount",
            "feedbackCoverage",
            "successCount",
            "failureCount",
            "successRate",
            "failureRate",
            "avgLatencyMs",
            "computedAt",
        ],
        "properties": {
            "organizationId": {"type": "string"},
            "environmentId": {"type": "string"},
            "environmentKey": {"type": "string"},
            "flagKey": {"type": "string"},
            "evaluations": {"type": "integer", "minimum": 0},
            "feedbackCount": {"type": "integer", "minimum": 0},
            "feedbackCoverage": {"type": ["number", "null"]},
            "successCount": {"type": "integer", "minimum": 0},
            "failureCount": {"type": "integer", "minimum": 0},
            "successRate": {"type": ["number", "null"]},
            "failureRate": {"type": ["number", "null"]},
            "avgLatencyMs": {"type": ["number", "null"]},
            "computedAt": TIMESTAMP,
        },
    },
}


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
        "oneOf": [_ref(name) for name in names.values()],
        "discriminator": {
            "propertyName": "type",
            "mapping": {kind: f"#/components/schemas/{name}" for kind, name in names.items()},
        },
    }
    return schemas


ADMIN_PATHS: dict[str, Any] = {
    "/admin/v1/organizations": {
        "get": _op(
            "List organizations",
            {"200": _ok("Every organization", "OrganizationList"), "401": _E401},
        ),
        "post": _op(
            "Create an organization",
            {"201": _ok("Created", "Organization"), **_BODY_ERRORS},
            "OrganizationCreate",
        ),
    },
    "/admin/v1/organizations/{orgId}": {
        "parameters": [ORG_ID],
        "get": _op(
            "Read an organization",
            {"200": _ok("The organization", "Organization"), "401": _E401, "404": _E404},
        ),
        "patch": _op(
            "Change an organization's plan or custom limit",
            {"200": _ok("Updated", "Organization"), **_BODY_ERRORS, "404": _E404},
            "OrganizationUpdate",
        ),
    },
    "/admin/v1/organizations/{orgId}/usage": {
        "parameters": [ORG_ID],
        "get": _op(
            "Evaluations metered this UTC month",
            {"200": _ok("Usage", "Usage"), "401": _E401, "404": _E404},
        ),
    },
    "/admin/v1/organizations/{orgId}/environments": {
        "parameters": [ORG_ID],
        "get": _op(
            "List an organization's environments",
            {"200": _ok("Environments", "EnvironmentList"), "401": _E401, "404": _E404},
        ),
        "post": _op(
            "Create an environment",
            {"201": _ok("Created", "Environment"), **_BODY_ERRORS, "404": _E404, "409": _E409},
            "EnvironmentCreate",
        ),
    },
    "/admin/v1/organizations/{orgId}/segments": {
        "parameters": [ORG_ID],
        "get": _op(
            "List an organization's segments (without identifiers)",
            {"200": _ok("Segments", "SegmentList"), "401": _E401, "404": _E404},
        ),
    },
    "/admin/v1/organizations/{orgId}/segments/{segmentKey}": {
        "parameters": [ORG_ID, SEGMENT_KEY],
        "get": _op(
            "Read a segment with its identifiers",
            {"200": _ok("The segment", "Segment"), "401": _E401, "404": _E404},
        ),
        "put": _op(
            "Create or replace a segment",
            {"200": _ok("Stored (without identifiers)", "Segment"), **_BODY_ERRORS, "404": _E404},
            "SegmentPut",
        ),
        "delete": _op(
            "Delete a segment",
            {"204": _NO_CONTENT, "401": _E401, "404": _E404, "409": _E409},
        ),
    },
    "/admin/v1/environments/{envId}": {
        "parameters": [ENV_ID],
        "get": _op(
            "Read an environment",
            {"200": _ok("The environment", "Environment"), "401": _E401, "404": _E404},
        ),
        "patch": _op(
            "Rename an environment or switch insights",
            {"200": _ok("Updated", "Environment"), **_BODY_ERRORS, "404": _E404},
            "EnvironmentUpdate",
        ),
    },
    "/admin/v1/environments/{envId}/api-keys": {
        "parameters": [ENV_ID],
        "get": _op(
            "List an environment's keys (not revoked, without secrets)",
            {"200": _ok("Keys", "ApiKeyList"), "401": _E401, "404": _E404},
        ),
        "post": _op(
            "Create an API key; the secret is in this answer only",
            {"201": _ok("Created", "NewApiKey"), **_BODY_ERRORS, "404": _E404},
            "ApiKeyCreate",
            body_required=False,
        ),
    },
    "/admin/v1/api-keys/{keyId}": {
        "parameters": [KEY_ID],
        "delete": _op(
            "Revoke an API key (401 for it within one second)",
            {"204": _NO_CONTENT, "401": _E401, "404": _E404},
        ),
    },
    "/admin/v1/environments/{envId}/flags": {
        "parameters": [ENV_ID],
        "get": _op(
            "List an environment's flags",
            {"200": _ok("Flags", "FlagList"), "401": _E401, "404": _E404},
        ),
    },
    "/admin/v1/environments/{envId}/flags/{flagKey}": {
        "parameters": [ENV_ID, FLAG_KEY],
        "get": _op("Read a flag", {"200": _ok("The flag", "Flag"), "401": _E401, "404": _E404}),
        "put": _op(
            "Create or replace a flag",
            {
                "200": _ok("Replaced", "Flag"),
                "201": _ok("Created", "Flag"),
                **_BODY_ERRORS,
                "404": _E404,
            },
            "FlagPut",
        ),
        "delete": _op("Delete a flag", {"204": _NO_CONTENT, "401": _E401, "404": _E404}),
    },
    "/admin/v1/environments/{envId}/flags/{flagKey}/health": {
        "parameters": [ENV_ID, METRICS_FLAG_KEY],
        "get": _op(
            "The flag environment's release health (contract section 9)",
            {
                "200": _ok("Arms, sample ratio and always-valid comparisons", "FlagHealth"),
                "400": _E400,
                "401": _E401,
                "404": _error("No such environment, or not aggregated yet"),
            },
        ),
    },
    "/admin/v1/environments/{envId}/flags/{flagKey}/metrics": {
        "parameters": [ENV_ID, METRICS_FLAG_KEY],
        "get": _op(
            "The flag environment's latest aggregated metrics",
            {
                "200": _ok("The warehouse row", "FlagMetrics"),
                "400": _E400,
                "401": _E401,
                "404": _error("No such environment, or not aggregated yet"),
            },
        ),
    },
}

# -- contract section 10: rollouts, schedules, audit log, webhooks --------------------------

SCHEDULE_ID = _param("scheduleId", "Schedule id", "^sch_[0-9a-f]{16}$")
AUDIT_ID = _param("auditId", "Audit record id", "^aud_[0-9a-f]{16}$")
WEBHOOK_ID = _param("webhookId", "Webhook id", "^whk_[0-9a-f]{16}$")
_JSON_OR_NULL = {"type": ["object", "null"]}
_STEP = {"type": "number", "exclusiveMinimum": 0, "maximum": 100, "multipleOf": 0.01}
_GUARDRAIL = {"enum": ["failureRate", "latencyP95Ms", "coverage"]}
_EVENT = {
    "enum": [
        "flag.changed",
        "rollout.advanced",
        "rollout.rolledBack",
        "rollout.held",
        "usage.threshold",
    ]
}

ADMIN_SCHEMAS.update(
    {
        "RolloutPut": {
            "type": "object",
            "description": "Every field is optional: steps [10, 25, 50, 100], 10 minutes per"
            " step, all three guardrails and their default tolerances (failureRate 1 pp,"
            " latencyP95Ms 50 ms, coverage 5 pp) by default.",
            "properties": {
                "steps": {
                    "type": "array",
                    "items": _STEP,
                    "minItems": 1,
                    "maxItems": 20,
                    "description": "Increasing percentages of the first PERCENTAGE rule, last 100",
                },
                "stepMinutes": {"type": "number", "exclusiveMinimum": 0, "maximum": 10080},
                "guardrails": {"type": "array", "items": _GUARDRAIL, "uniqueItems": True},
                "tolerances": {
                    "type": "object",
                    "description": "The largest regression accepted per watched guardrail:"
                    " percentage points for failureRate and coverage, milliseconds for"
                    " latencyP95Ms. A step advances only once each regression is shown below"
                    " its tolerance (contract section 10).",
                    "propertyNames": _GUARDRAIL,
                    "additionalProperties": {"type": "number", "exclusiveMinimum": 0},
                },
            },
        },
        "RolloutGuard": {
            "type": "object",
            "required": ["step", "percentage", "confidence", "guardrails"],
            "properties": {
                "step": {"type": "integer", "minimum": 0},
                "percentage": {"type": "number"},
                "confidence": {
                    "type": "object",
                    "required": ["rollback", "safety"],
                    "properties": {
                        "rollback": {"type": "number", "description": "Of a regression's end"},
                        "safety": {"type": "number", "description": "Of the tolerance's end"},
                    },
                },
                "guardrails": {
                    "type": "object",
                    "propertyNames": _GUARDRAIL,
                    "additionalProperties": _ref("GuardrailEvidence"),
                },
            },
        },
        "GuardrailEvidence": {
            "type": "object",
            "required": ["tolerance", "difference", "ci", "status", "users", "usersNeeded"],
            "properties": {
                "tolerance": {"type": "number"},
                "difference": {
                    **_NUMBER_OR_NULL,
                    "description": "Treatment minus control over the rollout's steps",
                },
                "ci": {
                    "type": "array",
                    "items": _NUMBER_OR_NULL,
                    "minItems": 2,
                    "maxItems": 2,
                    "description": "Each end at its own level: the worse side at the safety"
                    " level, the better side at the rollback level; null while unbounded",
                },
                "status": {"enum": ["regression", "safe", "undecided"]},
                "users": {
                    "type": "object",
                    "required": ["treatment", "control"],
                    "properties": {
                        "treatment": {"type": "integer", "minimum": 0},
                        "control": {"type": "integer", "minimum": 0},
                    },
                },
                "usersNeeded": {
                    "type": ["integer", "null"],
                    "description": "Estimated more users at the current split before the"
                    " guardrail could be shown within its tolerance",
                },
            },
        },
        "RolloutDecision": {
            "type": "object",
            "required": ["at", "step", "percentage", "action", "reason", "statistics"],
            "properties": {
                "at": TIMESTAMP,
                "step": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The step judged: its index in the rollout's steps, from 0",
                },
                "percentage": {"type": "number", "description": "The flag's split afterwards"},
                "action": {"enum": ["advanced", "completed", "rolledBack", "held"]},
                "reason": {"type": "string"},
                "statistics": {
                    **_JSON_OR_NULL,
                    "description": "The release-health figures the decision rests on",
                },
            },
        },
        "Rollout": {
            "type": "object",
            "required": ["state", "step", "percentage", "decisions"],
            "properties": {
                "state": {"enum": ["running", "completed", "rolledBack", "held"]},
                "step": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The current step's index in steps, from 0 (steps[step] is"
                    " its percentage; the dashboard and the CLI say step 1 of N for 0)",
                },
                "percentage": {"type": "number"},
                "steps": {"type": "array", "items": _STEP},
                "stepMinutes": {"type": "number"},
                "guardrails": {"type": "array", "items": _GUARDRAIL},
                "tolerances": {
                    "type": "object",
                    "description": "Each watched guardrail's tolerance, defaults filled in",
                    "additionalProperties": {"type": "number"},
                },
                "stepStartedAt": TIMESTAMP,
                "decisions": {"type": "array", "items": _ref("RolloutDecision")},
                "guard": {
                    "description": "The guardian's latest evidence, one one-sided sequence per"
                    " guardrail over the whole rollout (docs/rollouts.md); null before its"
                    " first judgement.",
                    "oneOf": [_ref("RolloutGuard"), {"type": "null"}],
                },
                "waiting": {
                    "description": "A step whose time has passed, waiting until every "
                    "guardrail is shown within its tolerance (held four weeks after its time);"
                    " null otherwise.",
                    "oneOf": [
                        {
                            "type": "object",
                            "required": ["since", "reason"],
                            "properties": {"since": TIMESTAMP, "reason": {"type": "string"}},
                        },
                        {"type": "null"},
                    ],
                },
            },
        },
        "ScheduleCreate": {
            "type": "object",
            "required": ["at", "flag"],
            "properties": {
                "at": {
                    "type": "string",
                    "format": "date-time",
                    "pattern": "^(19[7-9][0-9]|[2-9][0-9]{3})-",
                    "description": "With offset; a year from 1970 to 9999",
                },
                "flag": _ref("FlagPut"),
            },
        },
        "Schedule": {
            "type": "object",
            "required": ["id", "flagKey", "at", "flag", "state", "createdAt"],
            "properties": {
                "id": {"type": "string", "pattern": "^sch_[0-9a-f]{16}$"},
                "flagKey": {"type": "string", "pattern": KEY_SCHEMA_PATTERN},
                "at": TIMESTAMP,
                "flag": _ref("FlagPut"),
                "state": {"enum": ["pending", "applied", "cancelled", "failed"]},
                "createdAt": TIMESTAMP,
                "appliedAt": {"oneOf": [TIMESTAMP, {"type": "null"}]},
                "error": {"type": ["string", "null"]},
            },
        },
        "ScheduleList": _list_of("Schedule"),
        "AuditRecord": {
            "type": "object",
            "required": ["id", "at", "actor", "action", "target", "before", "after"],
            "properties": {
                "id": {"type": "string", "pattern": "^aud_[0-9a-f]{16}$"},
                "at": TIMESTAMP,
                "actor": {"enum": ["admin-api", "dashboard", "rollout", "schedule", "system"]},
                "action": {"type": "string", "description": "e.g. flag.updated, restore"},
                "target": {"type": "string", "description": "kind:id, e.g. flag:env_…/checkout"},
                "before": {**_JSON_OR_NULL, "description": "null when it did not exist"},
                "after": {**_JSON_OR_NULL, "description": "null when it no longer exists"},
                "restoredFrom": {"type": ["string", "null"]},
            },
        },
        "AuditList": _list_of("AuditRecord"),
        "WebhookCreate": {
            "type": "object",
            "required": ["url", "events"],
            "properties": {
                "url": {
                    "type": "string",
                    "maxLength": 2048,
                    "pattern": "^https?://(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9._~%-]+)"
                    "(:0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}"
                    "|655[0-2][0-9]|6553[0-5]))?([/?#][^\\s\\x00-\\x1f\\x7f]*)?$",
                    "description": "http:// or https:// with a host; no user information,"
                    " port 0, white space or control characters. The host is judged as the HTTP"
                    " client uses it (percent-decoded, IDNA; labels of at most 63 characters)."
                    " Unless the operator allows it (FLAGSIGHT_WEBHOOK_ALLOW_PRIVATE=1), a host"
                    " that is or resolves to a loopback or private address is refused (400);"
                    " link-local, multicast and reserved addresses always are, IPv6 forms"
                    " judged by the IPv4 address they embed",
                },
                "events": {"type": "array", "items": _EVENT, "minItems": 1, "uniqueItems": True},
            },
        },
        "Webhook": {
            "type": "object",
            "required": ["id", "url", "events", "createdAt"],
            "properties": {
                "id": {"type": "string", "pattern": "^whk_[0-9a-f]{16}$"},
                "url": {"type": "string"},
                "events": {"type": "array", "items": _EVENT},
                "createdAt": TIMESTAMP,
            },
        },
        "NewWebhook": {
            "allOf": [
                _ref("Webhook"),
                {
                    "type": "object",
                    "required": ["secret"],
                    "properties": {
                        "secret": {
                            "type": "string",
                            "pattern": "^whsec_",
                            "description": "Signs every delivery; shown only in this answer",
                        }
                    },
                },
            ]
        },
        "WebhookList": _list_of("Webhook"),
    }
)

ADMIN_PATHS.update(
    {
        "/admin/v1/environments/{envId}/flags/{flagKey}/rollout": {
            "parameters": [ENV_ID, FLAG_KEY],
            "get": _op(
                "A guarded rollout's state, step, percentage and decisions",
                {"200": _ok("The rollout", "Rollout"), "401": _E401, "404": _E404},
            ),
            "put": _op(
                "Start (or restart) a guarded rollout of the flag's first percentage rule",
                {
                    "200": _ok("Started at its first step", "Rollout"),
                    **_BODY_ERRORS,
                    "404": _E404,
                    "409": _error("The flag has no PERCENTAGE rule"),
                },
                "RolloutPut",
                body_required=False,
            ),
            "delete": _op(
                "Stop the rollout, leaving the percentage where it is",
                {"204": _NO_CONTENT, "401": _E401, "404": _E404},
            ),
        },
        "/admin/v1/environments/{envId}/flags/{flagKey}/schedules": {
            "parameters": [ENV_ID, FLAG_KEY],
            "get": _op(
                "The flag's scheduled changes, by time (every state)",
                {
                    "200": _ok("Schedules", "ScheduleList"),
                    "400": _error("The flag key does not match its pattern"),
                    "401": _E401,
                    "404": _E404,
                },
            ),
            "post": _op(
                "Schedule a flag body to be applied at a time",
                {"201": _ok("Scheduled", "Schedule"), **_BODY_ERRORS, "404": _E404},
                "ScheduleCreate",
            ),
        },
        "/admin/v1/environments/{envId}/flags/{flagKey}/schedules/{scheduleId}": {
            "parameters": [ENV_ID, FLAG_KEY, SCHEDULE_ID],
            "delete": _op(
                "Cancel a pending schedule",
                {"204": _NO_CONTENT, "401": _E401, "404": _E404},
            ),
        },
        "/admin/v1/organizations/{orgId}/audit": {
            "parameters": [
                ORG_ID,
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1000},
                },
            ],
            "get": _op(
                "The organization's audit log, newest first",
                {"200": _ok("Records", "AuditList"), "400": _E400, "401": _E401, "404": _E404},
            ),
        },
        "/admin/v1/audit/{auditId}/restore": {
            "parameters": [AUDIT_ID],
            "post": _op(
                "Put the record's target back as it was before that change",
                {
                    "201": _ok("The restore's own audit record", "AuditRecord"),
                    "401": _E401,
                    "404": _E404,
                    "409": _error("That target cannot be restored (see docs/admin-api.md)"),
                },
            ),
        },
        "/admin/v1/organizations/{orgId}/webhooks": {
            "parameters": [ORG_ID],
            "get": _op(
                "The organization's webhooks (without secrets)",
                {"200": _ok("Webhooks", "WebhookList"), "401": _E401, "404": _E404},
            ),
            "post": _op(
                "Subscribe a URL to events; the signing secret is in this answer only",
                {"201": _ok("Created", "NewWebhook"), **_BODY_ERRORS, "404": _E404},
                "WebhookCreate",
            ),
        },
        "/admin/v1/webhooks/{webhookId}": {
            "parameters": [WEBHOOK_ID],
            "delete": _op(
                "Delete a webhook; what is still queued for it is dropped",
                {"204": _NO_CONTENT, "401": _E401, "404": _E404},
            ),
        },
    }
)
