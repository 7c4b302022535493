"""Typed flag configuration: a flag, its rules, and what the fast paths read of it.

The rule types and the table of results live in ``flagsight_core.registry`` (the registry)
and ``flagsight_core.rules`` (the built-in types); every layer derives its names from them:
the event log's outcome codes (``OUTCOMES``), OFREP's reasons (``RULE_TYPES[...].ofrep_reason``),
the admin API's rule JSON and schema, the dashboard's editor, and the SDK's known rule types
(checked against the registry by ``tests/sdk``). They are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from flagsight_core.contract import ERROR_MESSAGES, ErrorType
from flagsight_core.registry import (
    OUTCOMES,
    RESULT_CODES,
    RESULTS,
    RULE_TYPES,
    Result,
    Rule,
    RuleError,
    RuleField,
    Segments,
    rule_from_json,
    rule_to_json,
)
from flagsight_core.rules import PercentageRule, RuleType, SegmentRule, StaticRule

__all__ = [
    "ARM_CONTROL",
    "ARM_TREATMENT",
    "ERROR_MESSAGES",
    "NOT_EVALUATED",
    "NO_MATCH_CODE",
    "NO_RULE",
    "OUTCOMES",
    "RESULTS",
    "RESULT_CODES",
    "RULE_TYPES",
    "ErrorType",
    "Flag",
    "PercentageRule",
    "Result",
    "Rule",
    "RuleError",
    "RuleField",
    "RuleType",
    "SegmentRule",
    "Segments",
    "StaticRule",
    "arm_of",
    "first_split",
    "rule_from_json",
    "rule_to_json",
]

NO_MATCH_CODE = RESULT_CODES[Result(False)]

NO_RULE = 255
"""A user's rule byte when no rule matched."""
NOT_EVALUATED = 254
"""A user's rule byte when the flag's state or the plan decided (an error outcome)."""

# Release-health arms (contract section 9): users who reached the flag's first percentage rule.
ARM_TREATMENT = "treatment"
ARM_CONTROL = "control"


def arm_of(rule: int, split_rule: int) -> str | None:
    """The arm of a user whose deciding rule byte is ``rule``, for a flag whose first
    percentage rule is ``split_rule`` (-1: none). Treatment: that rule matched. Control: it
    was reached and did not match (a later rule decided, or none did). Neither: an earlier
    rule decided, or the flag's state or the plan did (``NOT_EVALUATED``).

    A split rule that names a segment does not apply to the users outside it, who are in
    neither arm: the rule byte cannot tell them from the control arm, so where the flag has
    ``split_segment`` the arm is ``engine.arm``'s, which asks the segment."""
    if split_rule < 0 or rule == NOT_EVALUATED or rule < split_rule:
        return None
    return ARM_TREATMENT if rule == split_rule else ARM_CONTROL


@dataclass(frozen=True, slots=True)
class Flag:
    key: str
    enabled: bool
    archived: bool = False
    rules: tuple[Rule, ...] = ()
    code_table: bytes = field(init=False, repr=False, compare=False)
    """``bytes.translate`` table from a user's rule byte (rule index or ``NO_RULE``) to its
    result code: the rules decide an index, the table names the outcome, in C."""
    split_rule: int = field(init=False, repr=False, compare=False)
    """The index of the first percentage rule (the randomized split), or -1."""
    split_percentage: float | None = field(init=False, repr=False, compare=False)
    """That rule's percentage: the share of reaching users in treatment (None without one)."""
    split_segment: str | None = field(init=False, repr=False, compare=False)
    """The segment that rule applies within (contract 12), or None: every user reaching it."""
    plan: int | tuple[tuple[int, object], ...] | None = field(init=False, repr=False, compare=False)
    """The flag as ``api.native`` reads it: the result code when its state decides (archived,
    disabled), else each rule as ``(rule.native_kind, rule.native_parameter())``; None when a
    rule's type has no native kind, or a percentage rule names a segment (the Python path
    serves the flag: the arms of such a rule need each user's membership, which the native
    path's event frame does not carry)."""

    def __post_init__(self) -> None:
        if len(self.rules) >= NOT_EVALUATED:
            raise ValueError(f"a flag holds at most {NOT_EVALUATED - 1} rules")
        table = bytearray([NO_MATCH_CODE]) * 256
        for index, rule in enumerate(self.rules):
            table[index] = RESULT_CODES[Result(rule.value, rule.type)]
        object.__setattr__(self, "code_table", bytes(table))
        split = first_split(self.rules)
        object.__setattr__(self, "split_rule", split)
        percentage = self.rules[split].percentage if split >= 0 else None  # type: ignore[union-attr]
        object.__setattr__(self, "split_percentage", percentage)
        segment = self.rules[split].segment if split >= 0 else None  # type: ignore[union-attr]
        object.__setattr__(self, "split_segment", segment)
        object.__setattr__(self, "plan", _plan(self))


def first_split(rules: Sequence[Rule]) -> int:
    """The index of the first percentage rule, or -1: the randomized split that release
    health compares and a guarded rollout moves."""
    return next((i for i, rule in enumerate(rules) if isinstance(rule, PercentageRule)), -1)


def _plan(flag: Flag) -> int | tuple[tuple[int, object], ...] | None:
    if flag.archived:
        return RESULT_CODES[Result(False, None, ErrorType.FLAG_ARCHIVED)]
    if not flag.enabled:
        return RESULT_CODES[Result(False, None, ErrorType.FLAG_DISABLED)]
    if any(rule.native_kind is None or _within_segment(rule) for rule in flag.rules):
        return None
    return tuple((rule.native_kind, rule.native_parameter()) for rule in flag.rules)


def _within_segment(rule: Rule) -> bool:
    """A percentage rule that applies within a segment (``Flag.plan`` hands it on)."""
    return isinstance(rule, PercentageRule) and rule.segment is not None
