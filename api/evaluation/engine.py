"""Evaluation order (contract section 2), as a pipeline of small functions.

Plan blocking is decided by the caller (it needs the meter); everything about the flag is
decided here. Evaluation never raises: every outcome is a ``Result``.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping

from api.evaluation.hashing import bucket
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
    flag: Flag | None, users: Iterable[str], segments: Mapping[str, Container[str]]
) -> list[Result]:
    """Results for many users of one flag, in order; the flag's state is checked once."""
    state = flag_state_result(flag)
    if state is not None:
        return [state for _ in users]
    assert flag is not None
    return [evaluate_rules(flag, user, segments) for user in users]
