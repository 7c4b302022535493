"""The rule-type registry and the table of results it extends.

A rule type is one ``Rule`` subclass that owns everything about it, as plain data the other
layers read: its matching (one user and many, each given as its evaluation context: the
identifier, the attributes and the time, ``flagsight_core.context``), its validation of the
rule's JSON (``from_json``, raising ``RuleError`` that names the field), the JSON Schema of
its fields (``RuleField.schema``, for the OpenAPI document), how the dashboard's editor shows
its fields (``RuleField``'s label, prompt and input), its OFREP reason, its kind in the
native fast path (``native_kind``, None to be served by the Python path), and what it made of
one user for explain (``Rule.explain``: by default whether it matched, and whether each
condition it asks held, its segments' included).
``register_rule_type`` makes it known to the whole service; the built-in types are
registered in ``flagsight_core.rules``.

Every result an evaluation can have is a *result code*, an index into ``RESULTS``: bulk
answers and the event log carry one byte per user. Registering a rule type appends its two
results (matched with ``value`` true, with ``value`` false), so the codes of the types before
it never change and an event logged before an upgrade reads the same after it. Tables derived
from ``RESULTS`` in other layers follow it through ``on_results_changed``.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np

from flagsight_core.context import EvaluationContext, EvaluationContexts
from flagsight_core.contract import ErrorType

Segments = Mapping[str, Container[str]]
"""An organization's segments: key -> its members."""


class RuleError(ValueError):
    """A rule's JSON is not one of the rule shapes; the message is ``<where>.<field> <what
    is wrong>`` (e.g. ``rules[2].percentage must be a number from 0 to 100``)."""


@dataclass(frozen=True)
class RuleField:
    """One field of a rule type's JSON besides ``type`` and ``value`` (both common to all).

    Plain data for the layers above the core: the admin API's OpenAPI schema reads
    ``schema``; the dashboard's editor reads the rest.
    """

    name: str
    """The field's JSON name (``segment``)."""
    schema: dict[str, Any]
    """Its JSON Schema (a fragment of the OpenAPI document)."""
    label: str
    """Its name for people, starting the editor's error messages (``Percentage must be ...``)."""
    prompt: str = ""
    """The editor's label of its input (the ``label`` when empty)."""
    input: str = "text"
    """The editor's input: ``text``, ``number`` (a decimal, sent as a JSON number) or
    ``segment`` (a key of the organization's segments, which must exist)."""
    default: str = ""
    """What the editor's input holds in a rule just added."""
    required: bool = True
    """Whether the rule's JSON must have it."""


class Rule:
    """The base of every rule type. Subclasses are frozen dataclasses with a ``value``."""

    __slots__ = ()

    type: ClassVar[str]
    """The rule type's name in JSON and in ``matchedRuleType`` (``STATIC``)."""
    ofrep_reason: ClassVar[str]
    """The OpenFeature reason of an answer this rule decided (``flagsight_core.contract.OfrepReason``)."""
    description: ClassVar[str] = ""
    """What it matches, in a few words for people (the dashboard's editor)."""
    fields: ClassVar[tuple[RuleField, ...]] = ()
    """Its JSON fields besides ``type`` and ``value``, in order."""
    native_kind: ClassVar[int | None] = None
    """Its kind number in ``Flag.plan`` when ``api/native/fastpath.c`` implements it; None
    leaves flags that use it to the Python path (same answers, one C call fewer)."""

    value: bool

    def matches(self, flag_key: str, ctx: EvaluationContext, segments: Segments) -> bool:
        """Whether the rule matches the user of ``ctx`` (its identifier ``ctx.user``, its
        ``ctx.attributes``, the evaluation's time ``ctx.at``) for the flag ``flag_key``."""
        raise NotImplementedError

    def matches_many(
        self, flag_key: str, contexts: EvaluationContexts, segments: Segments
    ) -> np.ndarray:
        """``matches`` for each user, as a numpy bool array. Override to do it in one call:
        ``contexts.users`` are the identifiers as given, with no object made per user."""
        return np.fromiter(
            (self.matches(flag_key, ctx, segments) for ctx in contexts),
            dtype=bool,
            count=len(contexts),
        )

    def native_parameter(self) -> object:
        """The parameter ``api/native/fastpath.c`` reads with ``native_kind``."""
        return None

    def segments_consulted(self) -> tuple[str, ...]:
        """The keys of the segments this rule consults: the values of its fields whose
        editor input is a segment (``RuleField.input``), those it has."""
        return tuple(
            key
            for f in self.fields
            if f.input == "segment" and isinstance(key := getattr(self, f.name, None), str)
        )

    def conditions_asked(self, segments: Segments) -> tuple[Any, ...]:
        """The conditions on the user's attributes this rule's decision asks, in order: by
        default those of each segment it consults (a segment's ``conditions``, when it has
        any). Each has ``attribute``, ``operator`` and ``holds(attributes, user)``
        (``flagsight_core.conditions.Condition``). A rule that asks conditions of its own
        overrides this; explain reports whether each held."""
        asked: list[Any] = []
        for key in self.segments_consulted():
            asked.extend(getattr(segments.get(key), "conditions", None) or ())
        return tuple(asked)

    def explain(self, flag_key: str, ctx: EvaluationContext, segments: Segments) -> dict[str, Any]:
        """What this rule made of the user of ``ctx``, as explain answers it (contract 12):
        ``{"matched": ...}`` (what ``matches`` says), with ``"conditions": [{"attribute",
        "operator", "held"}, ...]`` when the rule asks any (``conditions_asked``). A rule
        that has more to say overrides this; ``matched`` stays what ``matches`` says."""
        explained: dict[str, Any] = {"matched": self.matches(flag_key, ctx, segments)}
        asked = self.conditions_asked(segments)
        if asked:
            attributes, user = ctx.attributes, ctx.user
            explained["conditions"] = [
                {"attribute": c.attribute, "operator": str(c.operator),
                 "held": bool(c.holds(attributes, user))}
                for c in asked
            ]  # fmt: skip
        return explained

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> Rule:
        """The rule of a JSON object whose ``type`` is this one; ``RuleError`` naming the field
        (``where`` is the rule's place, e.g. ``rules[2]``) when it is not valid."""
        raise NotImplementedError


def rule_value(raw: dict[str, Any], where: str) -> bool:
    """A rule's ``value``: a boolean, true when left out."""
    value = raw.get("value", True)
    if not isinstance(value, bool):
        raise RuleError(f"{where}.value must be a boolean")
    return value


class Result(NamedTuple):
    """One evaluation's outcome. ``error_type`` set means ``value`` is false.

    A tuple, so that hashing and comparing one (done per user in bulk answers) is C code.
    """

    value: bool
    matched_rule_type: str | None = None
    error_type: ErrorType | None = None


RULE_TYPES: dict[str, type[Rule]] = {}
"""Every registered rule type by name, in the order registered."""

RESULTS: list[Result] = []
"""Every result an evaluation can have; its index is the result code. Append only (but for
``unregister_rule_type``, which takes back a test's type)."""
RESULT_CODES: dict[Result, int] = {}
"""Each result's code."""
OUTCOMES: list[tuple[bool, str | None, str | None]] = []
"""``RESULTS`` as plain (value, matched_rule_type, error_type) strings, as events and metrics
carry them. An event batch stores one byte per user, its index here: append only."""

_listeners: list[Callable[[], None]] = []


def add_results(*results: Result) -> None:
    """Append results not in ``RESULTS`` yet, then tell the tables that follow it."""
    for result in results:
        if result not in RESULT_CODES:
            RESULT_CODES[result] = len(RESULTS)
            RESULTS.append(result)
            value, rule, error = result
            OUTCOMES.append(
                (value, None if rule is None else str(rule), None if error is None else str(error))
            )
    _changed()


def _changed() -> None:
    for listener in list(_listeners):
        listener()


def on_results_changed(listener: Callable[[], None]) -> Callable[[], None]:
    """Call ``listener`` now and whenever ``RESULTS`` changes: a table indexed by result code
    (pre-encoded answers, metric labels) builds itself again from it. Usable as a decorator."""
    _listeners.append(listener)
    listener()
    return listener


R = TypeVar("R", bound=type[Rule])


def register_rule_type(cls: R) -> R:
    """Make a rule type known: parsed from JSON, evaluated, answered, validated by the admin
    API, described by the OpenAPI document, editable in the dashboard. Usable as a decorator.
    Its two results get the next result codes.
    """
    name = cls.type
    if not isinstance(name, str) or not name or name in RULE_TYPES:
        raise ValueError(f"rule type {name!r} is not a new name")
    if any(f.name in ("type", "value") for f in cls.fields):
        raise ValueError(f"rule type {name}: 'type' and 'value' are every rule's fields")
    RULE_TYPES[name] = cls
    add_results(Result(True, name), Result(False, name))
    return cls


def unregister_rule_type(name: str) -> None:
    """Forget the rule type registered last (a test's throwaway one), its result codes with
    it, as if it had never been registered. A type whose answers were logged must never be:
    the event log holds its codes."""
    last = [Result(True, name), Result(False, name)]
    if list(RULE_TYPES)[-1:] != [name] or RESULTS[-2:] != last:
        raise ValueError(f"{name!r} is not the rule type registered last")
    del RULE_TYPES[name]
    for result in last:
        del RESULT_CODES[result]
    del RESULTS[-2:], OUTCOMES[-2:]
    _changed()


def rule_from_json(raw: Any, where: str = "rule") -> Rule:
    """Parse one rule of the contract's JSON shape; raise ``RuleError`` naming the field."""
    if not isinstance(raw, dict):
        raise RuleError(f"{where} must be an object")
    kind = raw.get("type")
    cls = RULE_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise RuleError(f"{where}.type must be one of {', '.join(RULE_TYPES)}")
    return cls.from_json(raw, where)


def rule_to_json(rule: Rule) -> dict[str, Any]:
    return rule.to_json()
