"""The EvaluateResponse wire format, pre-encoded per distinct result.

There are only a handful of distinct results (each rule type x value, four errors, no match),
so each one's JSON up to the evaluation id is encoded once and reused.
"""

from __future__ import annotations

from functools import cache

import msgspec

from api.evaluation import ERROR_MESSAGES, Result

_encode = msgspec.json.encode


def response_object(result: Result, evaluation_id: str) -> dict[str, object]:
    """The EvaluateResponse as a plain object (for the OpenAPI examples and tests)."""
    error = None
    if result.error_type is not None:
        error = {"type": str(result.error_type), "message": ERROR_MESSAGES[result.error_type]}
    return {
        "value": result.value,
        "matchedRuleType": None
        if result.matched_rule_type is None
        else str(result.matched_rule_type),
        "error": error,
        "evaluationId": evaluation_id,
    }


@cache
def _prefix(result: Result) -> bytes:
    """Everything up to the evaluation id's value; ids are URL-safe, so need no escaping."""
    whole = _encode(response_object(result, ""))
    return whole[: -len(b'""}')] + b'"'


def encode_response(result: Result, evaluation_id: str) -> bytes:
    return b"".join((_prefix(result), evaluation_id.encode("ascii"), b'"}'))


def encode_bulk_response(users: list[str], results: list[Result], ids: list[str]) -> bytes:
    """The BulkEvaluateResponse map: user identifier -> EvaluateResponse."""
    parts = [
        b"".join((_encode(user), b":", _prefix(result), evaluation_id.encode("ascii"), b'"}'))
        for user, result, evaluation_id in zip(users, results, ids, strict=True)
    ]
    return b"{" + b",".join(parts) + b"}"
