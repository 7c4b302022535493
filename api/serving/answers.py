"""The EvaluateResponse wire format, pre-encoded per distinct result.

There are only a handful of distinct results (each rule type x value, four errors, no match),
so each one's JSON up to the evaluation id is encoded once and reused.
"""

from __future__ import annotations

import msgspec
from flagsight_core import ERROR_MESSAGES, RESULTS, Result, on_results_changed
from flagsight_core.contract import BULK_MAX_USERS

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


def _head(result: Result) -> bytes:
    """Everything up to the evaluation id's value; ids are URL-safe, so need no escaping."""
    whole = _encode(response_object(result, ""))
    return whole[: -len(b'""}')] + b'"'


_HEADS: list[bytes] = []
"""The head of each result code's answer."""


@on_results_changed
def _build_heads() -> None:
    """Follow ``RESULTS`` as rule types are registered."""
    _HEADS[:] = map(_head, RESULTS)


def encode_response(outcome: int, evaluation_id: str) -> bytes:
    """The EvaluateResponse of a result code (an index into ``RESULTS``)."""
    return _HEADS[outcome] + evaluation_id.encode("ascii") + b'"}'


def encode_single_response(outcome: int, evaluation_id_prefix: str) -> bytes:
    """``encode_response(outcome, entry_id(evaluation_id_prefix, 0))``: a single evaluate's."""
    return _HEADS[outcome] + evaluation_id_prefix.encode("ascii") + b'0000"}'


_ENTRY_TAILS = [b'%04x"}' % index for index in range(BULK_MAX_USERS)]
"""Each entry's id index (``flagsight_core.ids.bulk_ids``) and the end of its object."""
_JOINED_TAILS = [f'{index:04x}"}},"' for index in range(BULK_MAX_USERS)]
"""As ``_ENTRY_TAILS``, followed by the opening quote of the next entry's key."""
_ESCAPED = bytes(range(0x20)) + b'"\\'
"""What JSON (and msgspec) escapes in a string; other characters are copied as they are."""


def encode_bulk_response(users: list[str], outcomes: bytes, evaluation_id_prefix: str) -> bytes:
    """The BulkEvaluateResponse map: user identifier -> EvaluateResponse.

    ``outcomes`` holds a result code per user (an index into ``RESULTS``). Entries differ
    only in the user, the result (a handful of distinct ones) and the id's index, so the
    answer is one ``str.join`` over pre-encoded pieces: no Python call per entry.
    """
    if len(users) > BULK_MAX_USERS:
        raise ValueError(f"at most {BULK_MAX_USERS} entries")
    if not users:
        return b"{}"
    if _need_escaping(users):
        return _encode_bulk_escaped(users, outcomes, evaluation_id_prefix)
    heads = [f'":{head.decode()}{evaluation_id_prefix}' for head in _HEADS]
    parts: list[str] = [""] * (3 * len(users))
    parts[0::3] = users
    parts[1::3] = map(heads.__getitem__, outcomes)
    parts[2::3] = _JOINED_TAILS[: len(users)]
    # The braces go into the first and last pieces: concatenating a megabyte-long answer
    # afterwards would copy it again.
    parts[0] = '{"' + parts[0]
    parts[-1] = parts[-1][: -len(',"')] + "}"
    return "".join(parts).encode("utf-8")


def _need_escaping(users: list[str]) -> bool:
    """Whether any identifier holds a character that JSON escapes (one pass, in C)."""
    joined = "".join(users).encode("utf-8", "surrogatepass")
    return len(joined.translate(None, _ESCAPED)) != len(joined)


def _encode_bulk_escaped(users: list[str], outcomes: bytes, evaluation_id_prefix: str) -> bytes:
    """``encode_bulk_response`` for identifiers that need escaping: each one encoded by msgspec."""
    id_prefix = evaluation_id_prefix.encode("ascii")
    heads = [b":" + head + id_prefix for head in _HEADS]
    parts = list(
        map(
            bytes.__add__,
            map(bytes.__add__, map(_encode, users), map(heads.__getitem__, outcomes)),
            _ENTRY_TAILS,
        )
    )
    return b"{" + b",".join(parts) + b"}"
