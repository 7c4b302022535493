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


MAX_BULK_ENTRIES = 10_000
_ENTRY_TAILS = [b'%04x"}' % index for index in range(MAX_BULK_ENTRIES)]
"""Each entry's id index (``api.evaluation_id.bulk_ids``) and the end of its object."""


def encode_bulk_response(
    users: list[str], results: list[Result], evaluation_id_prefix: str
) -> bytes:
    """The BulkEvaluateResponse map: user identifier -> EvaluateResponse.

    Entries differ only in the user, the result (a handful of distinct ones) and the id's
    index, so each is three pre-encoded pieces joined: no Python call per entry.
    """
    if len(users) > MAX_BULK_ENTRIES:
        raise ValueError(f"at most {MAX_BULK_ENTRIES} entries")
    id_prefix = evaluation_id_prefix.encode("ascii")
    heads = {result: b":" + _prefix(result) + id_prefix for result in set(results)}
    parts = list(
        map(
            bytes.__add__,
            map(bytes.__add__, map(_encode, users), map(heads.__getitem__, results)),
            _ENTRY_TAILS,
        )
    )
    return b"{" + b",".join(parts) + b"}"
