"""The pure evaluation core: flag configuration and a user (its evaluation context: identifier,
attributes, time) in, a result with its reason out.

No I/O, clock, logging or environment in here. Callers (the HTTP resources, OFREP, tests,
any other implementation checked against ``tests/cases``) supply everything.
"""

from flagsight_core.context import (
    NO_ATTRIBUTES,
    Attributes,
    AttributeValue,
    EvaluationContext,
    EvaluationContexts,
)
from flagsight_core.engine import (
    Decisions,
    decide,
    decide_one,
    evaluate,
    evaluate_codes,
    evaluate_many,
)
from flagsight_core.model import (
    ERROR_MESSAGES,
    NO_RULE,
    NOT_EVALUATED,
    RESULT_CODES,
    RESULTS,
    RULE_TYPES,
    ErrorType,
    Flag,
    PercentageRule,
    Result,
    Rule,
    RuleType,
    SegmentRule,
    StaticRule,
    first_split,
    rule_from_json,
    rule_to_json,
)
from flagsight_core.registry import (
    RuleError,
    RuleField,
    on_results_changed,
    register_rule_type,
    unregister_rule_type,
)

__all__ = [
    "ERROR_MESSAGES",
    "NO_ATTRIBUTES",
    "NOT_EVALUATED",
    "NO_RULE",
    "RULE_TYPES",
    "AttributeValue",
    "Attributes",
    "Decisions",
    "EvaluationContext",
    "EvaluationContexts",
    "decide",
    "decide_one",
    "RESULTS",
    "RESULT_CODES",
    "ErrorType",
    "Flag",
    "PercentageRule",
    "Result",
    "Rule",
    "RuleError",
    "RuleField",
    "RuleType",
    "SegmentRule",
    "StaticRule",
    "evaluate",
    "evaluate_codes",
    "evaluate_many",
    "first_split",
    "on_results_changed",
    "register_rule_type",
    "unregister_rule_type",
    "rule_from_json",
    "rule_to_json",
]
