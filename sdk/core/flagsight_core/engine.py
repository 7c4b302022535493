"""Evaluation order (contract section 2), as a pipeline of small functions.

Plan blocking is decided by the caller (it needs the meter); everything about the flag is
decided here. Evaluation never raises: every outcome is a ``Result``. Each rule type owns how
it matches one user and many (``flagsight_core.rules``); this module only walks the rules.

The rules decide, per user, the index of the first rule that matches (its *rule byte*,
``NO_RULE`` when none does); the flag's ``code_table`` turns rule bytes into result codes.
The event log keeps both: the result for the metrics, the rule for the arms of release health.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from flagsight_core.model import (
    NO_RULE,
    NOT_EVALUATED,
    RESULT_CODES,
    RESULTS,
    ErrorType,
    Flag,
    Result,
    Segments,
)

NOT_FOUND = Result(False, None, ErrorType.FLAG_NOT_FOUND)
ARCHIVED = Result(False, None, ErrorType.FLAG_ARCHIVED)
DISABLED = Result(False, None, ErrorType.FLAG_DISABLED)
PLAN_LIMIT_EXCEEDED = Result(False, None, ErrorType.PLAN_LIMIT_EXCEEDED)
NO_MATCH = Result(False, None, None)

BYTES = [bytes((value,)) for value in range(256)]
"""Each byte value as a one-byte ``bytes``: a single user's code and rule without a call."""
_NOT_EVALUATED = BYTES[NOT_EVALUATED]

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


def deciding_rule(flag: Flag, user: str, segments: Segments) -> int:
    """The index of the first rule that matches the user, ``NO_RULE`` if none does."""
    for index, rule in enumerate(flag.rules):
        if rule.matches(flag.key, user, segments):
            return index
    return NO_RULE


def evaluate_rules(flag: Flag, user: str, segments: Segments) -> Result:
    return RESULTS[flag.code_table[deciding_rule(flag, user, segments)]]


def evaluate(flag: Flag | None, user: str, segments: Segments) -> Result:
    """The result for one user: flag state first, then the first matching rule."""
    return flag_state_result(flag) or evaluate_rules(flag, user, segments)  # type: ignore[arg-type]


SMALL_BATCH = 8
"""Below this many users, evaluating one at a time is cheaper than the array work."""


def decide(flag: Flag | None, users: Sequence[str], segments: Segments) -> Decisions:
    """Result codes and rule bytes for many users of one flag, in order: the same answers
    as ``evaluate``, one byte each.

    Works rule by rule over the users no earlier rule matched, each rule over all of them at
    once (one membership probe or one murmur3 hash per user, in C), so a bulk request makes
    no Python object per user.
    """
    state = flag_state_result(flag)
    if state is not None:
        return BYTES[RESULT_CODES[state]] * len(users), _NOT_EVALUATED * len(users)
    assert flag is not None
    if len(users) == 1:  # a single evaluate: the common case
        rule = deciding_rule(flag, users[0], segments)
        return BYTES[flag.code_table[rule]], BYTES[rule]
    if len(users) < SMALL_BATCH:
        rules = bytes([deciding_rule(flag, user, segments) for user in users])
    else:
        rules = _decide_many(flag, users, segments)
    return rules.translate(flag.code_table), rules


_NOT_FOUND_CODE = BYTES[RESULT_CODES[NOT_FOUND]]
_ARCHIVED_CODE = BYTES[RESULT_CODES[ARCHIVED]]
_DISABLED_CODE = BYTES[RESULT_CODES[DISABLED]]


def decide_one(flag: Flag | None, user: str, segments: Segments) -> Decisions:
    """``decide(flag, [user], segments)``: one user's result code and rule byte."""
    if flag is None:
        return _NOT_FOUND_CODE, _NOT_EVALUATED
    if flag.archived:
        return _ARCHIVED_CODE, _NOT_EVALUATED
    if not flag.enabled:
        return _DISABLED_CODE, _NOT_EVALUATED
    key = flag.key
    for index, rule in enumerate(flag.rules):  # ``deciding_rule``, written out
        if rule.matches(key, user, segments):
            return BYTES[flag.code_table[index]], BYTES[index]
    return BYTES[flag.code_table[NO_RULE]], BYTES[NO_RULE]


def _decide_many(flag: Flag, users: Sequence[str], segments: Segments) -> bytes:
    decided = np.full(len(users), NO_RULE, dtype=np.uint8)
    pending = np.arange(len(users))
    for index, rule in enumerate(flag.rules):
        if not pending.size:
            break
        asked = users if pending.size == len(users) else [users[i] for i in pending.tolist()]
        hits = rule.matches_many(flag.key, asked, segments)
        decided[pending[hits]] = index
        pending = pending[~hits]
    return decided.tobytes()


def evaluate_codes(flag: Flag | None, users: Sequence[str], segments: Segments) -> bytes:
    """Result codes (indices into ``RESULTS``) for many users of one flag, in order."""
    return decide(flag, users, segments)[0]


def evaluate_many(flag: Flag | None, users: Sequence[str], segments: Segments) -> list[Result]:
    """``evaluate`` for each user, in order (``evaluate_codes`` as ``Result`` objects)."""
    return [RESULTS[code] for code in evaluate_codes(flag, users, segments)]
