"""Evaluation order (contract section 2), as a pipeline of small functions.

Plan blocking is decided by the caller (it needs the meter); everything about the flag is
decided here. Evaluation never raises: every outcome is a ``Result``. Each rule type owns how
it matches one user and many (``flagsight_core.rules``); this module only walks the rules,
giving each the user's evaluation context (``flagsight_core.context``): every entry point
takes a user's attributes (None: none) and the evaluation's time (``at``, Unix seconds; None:
a rule that reads the time does not match), both optional.

The rules decide, per user, the index of the first rule that matches (its *rule byte*,
``NO_RULE`` when none does); the flag's ``code_table`` turns rule bytes into result codes.
The event log keeps both: the result for the metrics, the rule for the arms of release health.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from flagsight_core.context import (
    NO_ATTRIBUTES,
    NO_USER_ATTRIBUTES,
    Attributes,
    EvaluationContext,
    EvaluationContexts,
)
from flagsight_core.model import (
    ARM_CONTROL,
    NO_RULE,
    NOT_EVALUATED,
    RESULT_CODES,
    RESULTS,
    ErrorType,
    Flag,
    PercentageRule,
    Result,
    Segments,
    arm_of,
)

NOT_FOUND = Result(False, None, ErrorType.FLAG_NOT_FOUND)
ARCHIVED = Result(False, None, ErrorType.FLAG_ARCHIVED)
DISABLED = Result(False, None, ErrorType.FLAG_DISABLED)
PLAN_LIMIT_EXCEEDED = Result(False, None, ErrorType.PLAN_LIMIT_EXCEEDED)
NO_MATCH = Result(False, None, None)

BYTES = [bytes((value,)) for value in range(256)]
"""Each byte value as a one-byte ``bytes``: a single user's code and rule without a call."""
_NOT_EVALUATED = BYTES[NOT_EVALUATED]
_new_context = tuple.__new__
"""``_new_context(EvaluationContext, (user, attributes, at))`` makes a context in C, without
the named tuple's Python ``__new__`` (``flagsight_core.context.context_of``, written out)."""

Decisions = tuple[bytes, bytes]
"""Per user, in order: the result codes (indices into ``RESULTS``) and the rule bytes. A
plain tuple: building a NamedTuple per request cost more than the rule walk it reports."""


def flag_state_result(flag: Flag | None) -> Result | None:
    """The error result for a flag that cannot be evaluated, or None when rules decide."""
    if flag is None:
        return NOT_FOUND
    if flag.archived:
        return ARCHIVED
    if not flag.enabled:
        return DISABLED
    return None


def deciding_rule(flag: Flag, ctx: EvaluationContext, segments: Segments) -> int:
    """The index of the first rule that matches the user, ``NO_RULE`` if none does."""
    for index, rule in enumerate(flag.rules):
        if rule.matches(flag.key, ctx, segments):
            return index
    return NO_RULE


def evaluate_rules(flag: Flag, ctx: EvaluationContext, segments: Segments) -> Result:
    return RESULTS[flag.code_table[deciding_rule(flag, ctx, segments)]]


def evaluate(
    flag: Flag | None,
    user: str,
    segments: Segments,
    attributes: Attributes | None = None,
    *,
    at: float | None = None,
) -> Result:
    """The result for one user: flag state first, then the first matching rule."""
    state = flag_state_result(flag)
    if state is not None:
        return state
    ctx = _new_context(EvaluationContext, (user, attributes or NO_ATTRIBUTES, at))
    return evaluate_rules(flag, ctx, segments)  # type: ignore[arg-type]


SMALL_BATCH = 8
"""Below this many users, evaluating one at a time is cheaper than the array work."""


def decide(
    flag: Flag | None,
    users: Sequence[str],
    segments: Segments,
    attributes: Mapping[str, Attributes] | None = None,
    *,
    at: float | None = None,
) -> Decisions:
    """Result codes and rule bytes for many users of one flag, in order: the same answers
    as ``evaluate``, one byte each. ``attributes`` holds, by identifier, the attributes of
    the users that have any; ``at`` is the evaluation's time (Unix seconds).

    Works rule by rule over the users no earlier rule matched, each rule over all of them at
    once (one membership probe or one murmur3 hash per user, in C), so a bulk request makes
    no Python object per user.
    """
    state = flag_state_result(flag)
    if state is not None:
        return BYTES[RESULT_CODES[state]] * len(users), _NOT_EVALUATED * len(users)
    assert flag is not None
    attributes = attributes or NO_USER_ATTRIBUTES
    if len(users) == 1:  # a single evaluate: the common case
        user = users[0]
        ctx = _new_context(EvaluationContext, (user, attributes.get(user) or NO_ATTRIBUTES, at))
        rule = deciding_rule(flag, ctx, segments)
        return BYTES[flag.code_table[rule]], BYTES[rule]
    contexts = EvaluationContexts(users, attributes, at)
    if len(users) < SMALL_BATCH:
        rules = bytes([deciding_rule(flag, ctx, segments) for ctx in contexts])
    else:
        rules = _decide_many(flag, contexts, segments)
    return rules.translate(flag.code_table), rules


_NOT_FOUND_CODE = BYTES[RESULT_CODES[NOT_FOUND]]
_ARCHIVED_CODE = BYTES[RESULT_CODES[ARCHIVED]]
_DISABLED_CODE = BYTES[RESULT_CODES[DISABLED]]


def decide_one(
    flag: Flag | None,
    user: str,
    segments: Segments,
    attributes: Attributes | None = None,
    *,
    at: float | None = None,
) -> Decisions:
    """``decide(flag, [user], segments, {user: attributes}, at=at)``: one user's result code
    and rule byte."""
    if flag is None:
        return _NOT_FOUND_CODE, _NOT_EVALUATED
    if flag.archived:
        return _ARCHIVED_CODE, _NOT_EVALUATED
    if not flag.enabled:
        return _DISABLED_CODE, _NOT_EVALUATED
    key = flag.key
    ctx = _new_context(EvaluationContext, (user, attributes or NO_ATTRIBUTES, at))
    for index, rule in enumerate(flag.rules):  # ``deciding_rule``, written out
        if rule.matches(key, ctx, segments):
            return BYTES[flag.code_table[index]], BYTES[index]
    return BYTES[flag.code_table[NO_RULE]], BYTES[NO_RULE]


def _decide_many(flag: Flag, contexts: EvaluationContexts, segments: Segments) -> bytes:
    users = contexts.users
    decided = np.full(len(users), NO_RULE, dtype=np.uint8)
    pending = np.arange(len(users))
    for index, rule in enumerate(flag.rules):
        if not pending.size:
            break
        asked = (
            contexts
            if pending.size == len(users)
            else contexts.among([users[i] for i in pending.tolist()])
        )
        hits = rule.matches_many(flag.key, asked, segments)
        decided[pending[hits]] = index
        pending = pending[~hits]
    return decided.tobytes()


def evaluate_codes(
    flag: Flag | None,
    users: Sequence[str],
    segments: Segments,
    attributes: Mapping[str, Attributes] | None = None,
    *,
    at: float | None = None,
) -> bytes:
    """Result codes (indices into ``RESULTS``) for many users of one flag, in order."""
    return decide(flag, users, segments, attributes, at=at)[0]


def evaluate_many(
    flag: Flag | None,
    users: Sequence[str],
    segments: Segments,
    attributes: Mapping[str, Attributes] | None = None,
    *,
    at: float | None = None,
) -> list[Result]:
    """``evaluate`` for each user, in order (``evaluate_codes`` as ``Result`` objects)."""
    return [RESULTS[code] for code in evaluate_codes(flag, users, segments, attributes, at=at)]


# --- release-health arms (contract 9; a split within a segment, contract 12) -------------------


def arm(flag: Flag | None, rule: int, ctx: EvaluationContext, segments: Segments) -> str | None:
    """The arm of the user of ``ctx``, whose deciding rule byte is ``rule``: ``arm_of``, and
    neither arm for a user who reached the flag's split rule outside the segment it names
    (the rule did not apply to that user)."""
    if flag is None:
        return None
    found = arm_of(rule, flag.split_rule)
    if found == ARM_CONTROL and flag.split_segment is not None:
        split: PercentageRule = flag.rules[flag.split_rule]  # type: ignore[assignment]
        if not split.applies(ctx, segments):
            return None
    return found


def outside_split(
    flag: Flag | None,
    users: Sequence[str],
    rules: bytes,
    segments: Segments,
    attributes: Mapping[str, Attributes] | None = None,
) -> list[int]:
    """The indices of the users (``rules``: their rule bytes, as ``decide`` gives them) who
    reached the flag's split rule outside the segment it names: in neither arm, though
    ``arm_of`` reads their rule byte as control. Empty for a flag whose split names no
    segment (no user is asked)."""
    if flag is None or flag.split_segment is None:
        return []
    split = flag.split_rule
    decided = np.frombuffer(rules, dtype=np.uint8)
    reached = np.flatnonzero((decided > split) & (decided != NOT_EVALUATED))
    if not reached.size:
        return []
    asked = EvaluationContexts(
        [users[i] for i in reached.tolist()], attributes or NO_USER_ATTRIBUTES
    )
    rule: PercentageRule = flag.rules[split]  # type: ignore[assignment]
    return reached[~rule.applies_many(asked, segments)].tolist()
