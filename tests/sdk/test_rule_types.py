"""The SDK knows the service's rule types, and a rule type it does not know keeps the flag on."""

from __future__ import annotations

from flagsight_core import RULE_TYPES as SERVICE_RULE_TYPES
from flagsight_sdk.model import RULE_TYPES, parse_evaluation
from flagsight_sdk.provider import _REASONS
from openfeature.flag_evaluation import Reason

ANSWER = {"value": True, "matchedRuleType": "GEOGRAPHY", "error": None, "evaluationId": "e-1"}


def test_the_sdk_knows_every_rule_type_of_the_service_with_its_ofrep_reason() -> None:
    assert {str(rule_type) for rule_type in SERVICE_RULE_TYPES} == RULE_TYPES
    for rule_type, cls in SERVICE_RULE_TYPES.items():
        assert _REASONS[str(rule_type)] == Reason(cls.ofrep_reason)


def test_an_unknown_rule_type_is_taken_as_answered() -> None:
    evaluation = parse_evaluation("f", "u", ANSWER, 0.0)
    assert evaluation.value is True
    assert evaluation.matched_rule_type == "GEOGRAPHY"
    assert evaluation.failure is None
