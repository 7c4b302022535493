"""What an evaluation gives the application: a value that is always safe to gate on."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

RULE_REASONS = {"STATIC": "STATIC", "SEGMENT": "TARGETING_MATCH", "PERCENTAGE": "SPLIT"}
"""The rule types this SDK version knows, each with its OpenFeature reason (the service's
registry, checked by its tests: the one place of the SDK a new rule type is added to). A newer
service may answer another: the answer is taken as it is (its ``value`` still decides), and
the OpenFeature provider gives it reason ``UNKNOWN``, so a new rule type never turns a flag off."""
RULE_TYPES = frozenset(RULE_REASONS)
ERROR_TYPES = frozenset({"FLAG_NOT_FOUND", "FLAG_ARCHIVED", "FLAG_DISABLED", "PLAN_LIMIT_EXCEEDED"})
EVALUATION_ID_MAX = 64

# Why the SDK itself could not get an answer (``Evaluation.failure``); the value is then False.
FAILURE_TIMEOUT = "TIMEOUT"
FAILURE_CONNECTION = "CONNECTION_ERROR"
FAILURE_SERVER = "SERVER_ERROR"
FAILURE_REFUSED = "REQUEST_REFUSED"
FAILURE_UNEXPECTED = "UNEXPECTED_RESPONSE"
FAILURE_INTERNAL = "SDK_ERROR"
FAILURE_CLOSED = "CLIENT_CLOSED"
"""A local client evaluated after ``close()``: its quota went back, nothing is decided."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One flag's answer for one user. Truthy exactly when the flag is on.

    ``error_type`` is the service's own outcome (flag not found, disabled, ...), ``failure``
    the SDK's when it got no usable answer (timeout, 5xx, ...). Either way ``value`` is False
    and, for ``failure``, ``evaluation_id`` is None: there is nothing to report feedback on.
    """

    flag_key: str
    user: str
    value: bool
    evaluation_id: str | None
    matched_rule_type: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    failure: str | None = None
    evaluated_at: float = field(default_factory=time.monotonic, compare=False)
    """``time.monotonic()`` when the answer arrived: the start of the latency to an outcome."""

    def __bool__(self) -> bool:
        return self.value

    @classmethod
    def failed(cls, flag_key: str, user: str, failure: str, message: str) -> Evaluation:
        return cls(flag_key, user, False, None, error_message=message, failure=failure)


class UnexpectedResponse(ValueError):
    """The body is not the EvaluateResponse the spec describes; the message says how."""


def parse_evaluation(flag_key: str, user: str, body: Any, evaluated_at: float) -> Evaluation:
    """An EvaluateResponse, checked field by field (an unexpected body must not turn a flag on)."""
    if not isinstance(body, dict):
        raise UnexpectedResponse("the answer is not a JSON object")
    value = body.get("value")
    rule = body.get("matchedRuleType")
    error = body.get("error")
    evaluation_id = body.get("evaluationId")
    if not isinstance(value, bool):
        raise UnexpectedResponse("'value' is not a boolean")
    if rule is not None and not isinstance(rule, str):
        raise UnexpectedResponse(f"'matchedRuleType' is {rule!r}")
    if not isinstance(evaluation_id, str) or not 1 <= len(evaluation_id) <= EVALUATION_ID_MAX:
        raise UnexpectedResponse("'evaluationId' is not a string of 1 to 64 characters")
    if error is None:
        return Evaluation(flag_key, user, value, evaluation_id, rule, evaluated_at=evaluated_at)
    if not isinstance(error, dict) or error.get("type") not in ERROR_TYPES or value:
        raise UnexpectedResponse("'error' is not an EvaluationError with value false")
    message = error.get("message") if isinstance(error.get("message"), str) else None
    return Evaluation(
        flag_key,
        user,
        False,
        evaluation_id,
        None,
        error["type"],
        message,
        evaluated_at=evaluated_at,
    )
