"""Explain (contract 12): what each rule of a flag made of one user, in order, up to the
deciding one, and the answer evaluation gives that user.

Each rule explains itself (``Rule.explain``: whether it matched, and whether each condition
it asks held, its segments' included), so a rule type that reads more of the user says so in
its own class and nothing here changes. The walk is ``engine.deciding_rule``'s: the first rule
that matches decides, and the flag's state (missing, archived, disabled) decides before any
rule, with no rule explained. Pure, like the engine: the caller passes the context (its time
included) and the segments; nothing is metered or logged here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from flagsight_core.context import EvaluationContext
from flagsight_core.engine import flag_state_result
from flagsight_core.model import NO_RULE, RESULTS, Flag, Result, Segments


class Explanation(NamedTuple):
    """The answer for one user and how the rules reached it."""

    result: Result
    """What evaluation answers the user (value, matched rule type, error)."""
    rules: tuple[dict[str, Any], ...]
    """Each rule reached, in order: ``{"index", "type", "matched", "conditions"?}`` (the last
    one decided when it matched); empty when the flag's state decided."""


def explain(flag: Flag | None, ctx: EvaluationContext, segments: Segments) -> Explanation:
    """``evaluate``'s answer for the user of ``ctx``, with each rule's explanation up to the
    deciding one."""
    state = flag_state_result(flag)
    if state is not None:
        return Explanation(state, ())
    assert flag is not None
    reached: list[dict[str, Any]] = []
    for index, rule in enumerate(flag.rules):
        explained = {
            "index": index,
            "type": str(rule.type),
            **rule.explain(flag.key, ctx, segments),
        }
        reached.append(explained)
        if explained["matched"]:
            return Explanation(RESULTS[flag.code_table[index]], tuple(reached))
    return Explanation(RESULTS[flag.code_table[NO_RULE]], tuple(reached))
