"""Evaluation order (contract section 2), as a pipeline of small functions.

Plan blocking is decided by the caller (it needs the meter); everything about the flag is
decided here. Evaluation never raises: every outcome is a ``Result``.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

from api.evaluation.hashing import bucket, buckets
from api.evaluation.model import (
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
    for rule in flag.rules:
        if rule_matches(rule, flag.key, user, segments):
            return _MATCHED[(rule.type, rule.value)]
    return NO_MATCH


def evaluate(flag: Flag | None, user: str, segments: Mapping[str, Container[str]]) -> Result:
    """The result for one user: flag state first, then the first matching rule."""
    return flag_state_result(flag) or evaluate_rules(flag, user, segments)  # type: ignore[arg-type]


def evaluate_many(
    flag: Flag | None, users: Sequence[str], segments: Mapping[str, Container[str]]
) -> list[Result]:
    """Results for many users of one flag, in order: the same answers as ``evaluate``.

    Works rule by rule over the users no earlier rule matched, so the per-user work is one
    membership test or one hash per rule, with no dispatch on the rule's type per user.
    """
    state = flag_state_result(flag)
    if state is not None:
        return [state] * len(users)
    assert flag is not None
    if len(users) == 1:
        return [evaluate_rules(flag, users[0], segments)]
    results = [NO_MATCH] * len(users)
    pending = range(len(users))
    for rule in flag.rules:
        if not pending:
            break
        pending = _apply_rule(rule, flag.key, users, pending, segments, results)
    return results


def _apply_rule(
    rule: Rule,
    flag_key: str,
    users: Sequence[str],
    pending: Sequence[int],
    segments: Mapping[str, Container[str]],
    results: list[Result],
) -> list[int]:
    """Set ``results`` for the pending users the rule matches; return those it does not."""
    matched = _MATCHED[(rule.type, rule.value)]
    if isinstance(rule, StaticRule):
        for index in pending:
            results[index] = matched
        return []
    if isinstance(rule, SegmentRule):
        members = segments.get(rule.segment, _EMPTY)
        hits = [users[index] in members for index in pending]
    else:
        assert isinstance(rule, PercentageRule)
        hits = [
            bucket < rule.threshold for bucket in buckets(flag_key, [users[i] for i in pending])
        ]
    remaining = []
    for index, hit in zip(pending, hits, strict=True):
        if hit:
            results[index] = matched
        else:
            remaining.append(index)
    return remaining
