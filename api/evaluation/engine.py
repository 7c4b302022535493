"""Evaluation order (contract section 2), as a pipeline of small functions.

Plan blocking is decided by the caller (it needs the meter); everything about the flag is
decided here. Evaluation never raises: every outcome is a ``Result``.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

import numpy as np

from api.evaluation.hashing import bucket, buckets
from api.evaluation.model import (
    RESULT_CODES,
    RESULTS,
    ErrorType,
    Flag,
    PercentageRule,
    Result,
    Rule,
    RuleType,
    SegmentRule,
    StaticRule,
)

NOT_FOUND = Result(False, None, ErrorType.FLAG_NOT_FOUND)
ARCHIVED = Result(False, None, ErrorType.FLAG_ARCHIVED)
DISABLED = Result(False, None, ErrorType.FLAG_DISABLED)
PLAN_LIMIT_EXCEEDED = Result(False, None, ErrorType.PLAN_LIMIT_EXCEEDED)
NO_MATCH = Result(False, None, None)

_MATCHED = {
    (kind, value): Result(value, kind, None) for kind in RuleType for value in (False, True)
}

_MATCHED_CODES = {key: RESULT_CODES[result] for key, result in _MATCHED.items()}
_NO_MATCH_CODE = RESULT_CODES[NO_MATCH]
_CODE_BYTES = [bytes((code,)) for code in range(len(RESULTS))]

_EMPTY: frozenset[str] = frozenset()


def flag_state_result(flag: Flag | None) -> Result | None:
    """The error result for a flag that cannot be evaluated, or None when rules decide."""
    if flag is None:
        return NOT_FOUND
    if flag.archived:
        return ARCHIVED
    if not flag.enabled:
        return DISABLED
    return None


def rule_matches(
    rule: Rule, flag_key: str, user: str, segments: Mapping[str, Container[str]]
) -> bool:
    if isinstance(rule, StaticRule):
        return True
    if isinstance(rule, SegmentRule):
        return user in segments.get(rule.segment, _EMPTY)
    assert isinstance(rule, PercentageRule)
    return bucket(flag_key, user) < rule.threshold


def evaluate_rules(flag: Flag, user: str, segments: Mapping[str, Container[str]]) -> Result:
    return RESULTS[_rules_code(flag, user, segments)]


def _rules_code(flag: Flag, user: str, segments: Mapping[str, Container[str]]) -> int:
    """The result code of the first rule that matches the user (``NO_MATCH``'s if none)."""
    for rule in flag.rules:
        if rule_matches(rule, flag.key, user, segments):
            return _MATCHED_CODES[(rule.type, rule.value)]
    return _NO_MATCH_CODE


def evaluate(flag: Flag | None, user: str, segments: Mapping[str, Container[str]]) -> Result:
    """The result for one user: flag state first, then the first matching rule."""
    return flag_state_result(flag) or evaluate_rules(flag, user, segments)  # type: ignore[arg-type]


SMALL_BATCH = 8
"""Below this many users, evaluating one at a time is cheaper than the array work."""


def evaluate_codes(
    flag: Flag | None, users: Sequence[str], segments: Mapping[str, Container[str]]
) -> bytes:
    """Result codes (indices into ``RESULTS``) for many users of one flag, in order: the
    same answers as ``evaluate``, one byte each.

    Works rule by rule over the users no earlier rule matched, each rule over all of them at
    once (one membership probe or one murmur3 hash per user, in C), so a bulk request makes
    no Python object per user.
    """
    state = flag_state_result(flag)
    if state is not None:
        return bytes((RESULT_CODES[state],)) * len(users)
    assert flag is not None
    if len(users) == 1:  # a single evaluate: the common case
        return _CODE_BYTES[_rules_code(flag, users[0], segments)]
    if len(users) < SMALL_BATCH:
        return bytes([_rules_code(flag, user, segments) for user in users])
    codes = np.full(len(users), _NO_MATCH_CODE, dtype=np.uint8)
    pending = np.arange(len(users))
    for rule in flag.rules:
        if not pending.size:
            break
        asked = users if pending.size == len(users) else [users[i] for i in pending.tolist()]
        hits = _rule_hits(rule, flag.key, asked, segments)
        codes[pending[hits]] = _MATCHED_CODES[(rule.type, rule.value)]
        pending = pending[~hits]
    return codes.tobytes()


def evaluate_many(
    flag: Flag | None, users: Sequence[str], segments: Mapping[str, Container[str]]
) -> list[Result]:
    """``evaluate`` for each user, in order (``evaluate_codes`` as ``Result`` objects)."""
    return [RESULTS[code] for code in evaluate_codes(flag, users, segments)]


def _rule_hits(
    rule: Rule, flag_key: str, users: Sequence[str], segments: Mapping[str, Container[str]]
) -> np.ndarray:
    """Whether the rule matches each user, as a boolean array."""
    if isinstance(rule, StaticRule):
        return np.ones(len(users), dtype=bool)
    if isinstance(rule, SegmentRule):
        return _membership(segments.get(rule.segment, _EMPTY), users)
    assert isinstance(rule, PercentageRule)
    return buckets(flag_key, users) < rule.threshold


def _membership(members: Container[str], users: Sequence[str]) -> np.ndarray:
    """``user in members`` for each user; in one call where the container offers one
    (``SegmentMembership.contains_many``)."""
    contains_many = getattr(members, "contains_many", None)
    if contains_many is not None:
        return contains_many(users)
    return np.fromiter((user in members for user in users), dtype=bool, count=len(users))
