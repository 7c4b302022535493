"""A throwaway rule type that reads one attribute, for the tests of the doors that carry
attributes (``/v1/evaluate``, bulk, OFREP) while no built-in rule reads any yet.

Registered by a test's fixture (``registered``), as ``tests/evaluation/test_rule_registry.py``
registers its own: the registry must hold it before the services compile any flag, and forget it
after they are gone (list the fixture first among a test's fixtures).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

from flagsight_core import EvaluationContext, Rule, RuleError, RuleField
from flagsight_core.conditions import Condition, Operator
from flagsight_core.contract import OfrepReason
from flagsight_core.registry import Segments, register_rule_type, rule_value, unregister_rule_type


@dataclass(frozen=True, slots=True)
class AttributeIsRule(Rule):
    """Matches users whose attribute ``attribute`` is the string ``equals``; it says which
    condition it asks, so explain reports it."""

    attribute: str
    equals: str
    value: bool = True
    type: ClassVar[str] = "ATTRIBUTE_IS"
    ofrep_reason: ClassVar[str] = OfrepReason.TARGETING_MATCH
    description: ClassVar[str] = "matches users whose attribute has a value"
    fields: ClassVar[tuple[RuleField, ...]] = (
        RuleField("attribute", {"type": "string", "minLength": 1, "maxLength": 64}, "Attribute"),
        RuleField("equals", {"type": "string"}, "Value"),
    )

    def matches(self, flag_key: str, ctx: EvaluationContext, segments: Segments) -> bool:
        return ctx.attributes.get(self.attribute) == self.equals

    def conditions_asked(self, segments: Segments) -> tuple[Condition, ...]:
        """The condition it asks, so explain reports it (``Rule.conditions_asked``)."""
        return (Condition(self.attribute, Operator.EQUALS, (self.equals,)),)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "attribute": self.attribute, "equals": self.equals,
                "value": self.value}  # fmt: skip

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> AttributeIsRule:
        attribute, equals = raw.get("attribute"), raw.get("equals")
        if not isinstance(attribute, str) or not 1 <= len(attribute) <= 64:
            raise RuleError(f"{where}.attribute must be a string of 1 to 64 characters")
        if not isinstance(equals, str):
            raise RuleError(f"{where}.equals must be a string")
        return cls(attribute, equals, rule_value(raw, where))


PLAN_IS_PRO = [
    {"type": "ATTRIBUTE_IS", "attribute": "plan", "equals": "pro", "value": True},
    {"type": "STATIC", "value": False},
]
"""A flag's rules: on for users whose ``plan`` is ``"pro"``, off for everyone else."""


def plan_is_pro(attributes: dict[str, Any] | None) -> tuple[bool, str]:
    """What ``PLAN_IS_PRO`` answers (``value``, ``matchedRuleType``) for these attributes."""
    if (attributes or {}).get("plan") == "pro":
        return True, "ATTRIBUTE_IS"
    return False, "STATIC"


@contextmanager
def registered() -> Iterator[type[AttributeIsRule]]:
    """``AttributeIsRule`` in the registry for the block's duration."""
    register_rule_type(AttributeIsRule)
    try:
        yield AttributeIsRule
    finally:
        unregister_rule_type(AttributeIsRule.type)
