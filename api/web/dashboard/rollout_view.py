"""What the dashboard shows of a guarded rollout: each watched guardrail by its label (a
metric's by its name, contract 13), with its tolerance and the guardian's latest evidence
(``Rollout.guard``) in words; the start form's guardrails, built in and the organization's
metrics, with their defaults; and whether a change of the flag's split moves what the rollout
sets.

The evidence is treatment minus control in the guardrail's unit (percentage points,
milliseconds, or a metric's events or values) over every step so far; an interval end the data
cannot bound yet is null. Names, labels, units and default tolerances come from
``api.controlplane.changes``, the default plan from the admin API's ``fields``: nothing about a
guardrail is written here but how its unit reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flagsight_core import PercentageRule, Rule, first_split
from flagsight_core.words import counted

from api.controlplane.catalogue import DEFAULT_GUARDRAILS
from api.controlplane.changes import (
    DEFAULT_METRIC_TOLERANCES,
    DEFAULT_TOLERANCES,
    GUARDRAILS,
    Rollout,
    RolloutState,
    guarded_metric,
    guardrail_label,
    guardrail_unit,
    metric_guardrail,
)
from api.controlplane.model import Metric
from api.web.admin.rollouts import DEFAULT_STEP_MINUTES, DEFAULT_STEPS
from api.web.dashboard.format import MISSING, number

STATUS_TEXT = {
    "safe": "Shown within tolerance",
    "regression": "Regression shown",
    "undecided": "Not yet shown",
}
"""What each guardrail status of the evidence means, for people."""

NO_EVIDENCE = "Not judged yet"

UNIT_NAMES = {
    "pp": "percentage points",
    "ms": "milliseconds",
    "events": "events per user",
    "value": "the events' own values",
}
"""Each unit of ``GUARDRAIL_UNITS`` and ``METRIC_UNITS`` in words (an abbreviation's title)."""

UNIT_SUFFIXES = {"pp": " pp", "ms": " ms", "events": " events", "value": ""}
"""How a unit follows a figure: a sum's or a mean's values carry their own unit, which the
service does not know, so they go bare."""

DECIMALS = {"pp": 2, "ms": 1, "events": 2, "value": 2}

Metrics = Mapping[str, Metric]
"""An organization's metrics by key: what names and measures a ``metric:<key>`` guardrail."""


@dataclass(frozen=True)
class GuardrailRow:
    """One watched guardrail as the rollout panel shows it, every figure as text."""

    name: str
    label: str
    tolerance: str
    status: str
    """``safe``, ``regression``, ``undecided``, or ``none`` before any evidence."""
    status_text: str
    difference: str
    interval: str
    users: str
    needed: str


def amount(value: float, unit: str) -> str:
    """A signed difference in its unit: ``+0.40 pp``, ``-12.5 ms``, ``+1.25`` (values)."""
    return f"{value:+,.{DECIMALS[unit]}f}{UNIT_SUFFIXES[unit]}"


def tolerance_text(tolerance: float, unit: str) -> str:
    """``1 pp``, ``50 ms``, ``0.5 events``."""
    return f"{tolerance:g}{UNIT_SUFFIXES[unit]}"


def label_and_unit(guardrail: str, metrics: Metrics) -> tuple[str, str]:
    """A guardrail's label and unit: a built-in's, a metric's name and its kind's unit; a
    metric deleted since the rollout (a stopped one) goes by its key, its figures bare."""
    key = guarded_metric(guardrail)
    if key is None:
        return guardrail_label(guardrail), guardrail_unit(guardrail)
    metric = metrics.get(key)
    if metric is None:
        return key, "value"
    return guardrail_label(guardrail, metric), guardrail_unit(guardrail, metric)


def guardrail_labels(rollout: Rollout, metrics: Metrics) -> str:
    """The rollout's guardrails as people read them, in its order: ``Failure rate, Checkout``."""
    return ", ".join(label_and_unit(g, metrics)[0] for g in rollout.plan.guardrails)


def interval_text(ci: Sequence[float | None] | None, unit: str) -> str:
    """An interval whose ends may not be bounded yet, in words."""
    low, high = ci if ci else (None, None)
    if low is None and high is None:
        return "not bounded yet"
    if low is None:
        return f"up to {amount(high, unit)} (lower end not bounded yet)"
    if high is None:
        return f"from {amount(low, unit)} (upper end not bounded yet)"
    return f"{amount(low, unit)} to {amount(high, unit)}"


def guardrail_rows(rollout: Rollout, metrics: Metrics | None = None) -> list[GuardrailRow]:
    """The watched guardrails in the plan's order, with the evidence of each, if any."""
    guard = rollout.guard or {}
    evidence = guard.get("guardrails") or {}
    percentage = guard.get("percentage", rollout.percentage)
    tolerances = rollout.plan.tolerances
    return [
        _row(
            name,
            *label_and_unit(name, metrics or {}),
            tolerances[name],
            evidence.get(name),
            percentage,
        )  # fmt: skip
        for name in rollout.plan.guardrails
    ]


def _row(
    name: str,
    label: str,
    unit: str,
    tolerance: float,
    bound: dict[str, Any] | None,
    percentage: float,
) -> GuardrailRow:
    if bound is None:
        return GuardrailRow(name, label, tolerance_text(tolerance, unit), "none", NO_EVIDENCE,
                            MISSING, MISSING, MISSING, MISSING)  # fmt: skip
    difference, needed = bound.get("difference"), bound.get("usersNeeded")
    users = bound.get("users") or {}
    return GuardrailRow(
        name=name,
        label=label,
        tolerance=tolerance_text(bound.get("tolerance", tolerance), unit),
        status=bound["status"],
        status_text=STATUS_TEXT.get(bound["status"], bound["status"]),
        difference=MISSING if difference is None else amount(difference, unit),
        interval=interval_text(bound.get("ci"), unit),
        users=f"{number(users.get('treatment'))} treatment, {number(users.get('control'))} control",
        needed=MISSING
        if needed is None
        else f"about {counted(int(needed), 'more user')} at {percentage:g} %",
    )


def confidence_text(rollout: Rollout) -> str:
    """The levels the evidence is read at, in words; empty before any evidence."""
    confidence = (rollout.guard or {}).get("confidence") or {}
    if not confidence:
        return ""
    return (
        f"a regression beyond a tolerance rolls back once shown at"
        f" {confidence['rollback'] * 100:.4g} % confidence; a step advances once every"
        f" guardrail is shown within its tolerance at {confidence['safety'] * 100:.4g} %"
    )


@dataclass(frozen=True)
class GuardrailChoice:
    """A guardrail the start form offers: a built-in one, or one on a metric."""

    name: str
    """As the admin API names it: ``failureRate``, ``metric:<metricKey>``."""
    label: str
    unit: str
    default: float | None
    """The tolerance the rollout takes when the form leaves it empty; None where it must be
    given (a count, sum or mean metric, whose unit the service cannot guess)."""

    @property
    def ident(self) -> str:
        """The name as an HTML id's part (``metric-checkout`` for ``metric:checkout``)."""
        return self.name.replace(":", "-")


def guardrail_choices(metrics: Sequence[Metric] = ()) -> list[GuardrailChoice]:
    """The built-in guardrails, then one per metric of the organization (by key)."""
    built_in = [
        GuardrailChoice(g, *label_and_unit(g, {}), DEFAULT_TOLERANCES[g]) for g in GUARDRAILS
    ]
    by_key = {m.key: m for m in metrics}
    return built_in + [
        GuardrailChoice(g, *label_and_unit(g, by_key), DEFAULT_METRIC_TOLERANCES.get(m.kind))
        for m in metrics
        if (g := metric_guardrail(m.key))
    ]


def default_rollout_form(choices: Sequence[GuardrailChoice] | None = None) -> dict[str, str]:
    """The start form's defaults: the admin API's plan (``api.web.admin.rollouts``) with its
    built-in guardrails watched and the default tolerances; a metric is offered unticked."""
    choices = guardrail_choices() if choices is None else choices
    return {
        "steps": ", ".join(f"{step:g}" for step in DEFAULT_STEPS),
        "step_minutes": f"{DEFAULT_STEP_MINUTES:g}",
        **{f"guardrail_{g}": "on" for g in DEFAULT_GUARDRAILS},
        **{f"tolerance_{c.name}": f"{c.default:g}" for c in choices if c.default is not None},
    }


def running(rollout: Rollout | None) -> Rollout | None:
    """The rollout when it is running (it moves the flag's split on its own), else None."""
    return rollout if rollout is not None and rollout.state is RolloutState.RUNNING else None


def split_percentage(rules: Sequence[Rule]) -> float | None:
    """The first percentage rule's percentage (the split a rollout moves), or None."""
    index = first_split(rules)
    rule = rules[index] if index >= 0 else None
    return float(rule.percentage) if isinstance(rule, PercentageRule) else None


@dataclass(frozen=True)
class SplitChange:
    """A save that moves a running rollout's split: from what the flag has to what it would."""

    before: float | None
    after: float | None


def split_change(stored: Sequence[Rule], draft: Sequence[Rule]) -> SplitChange | None:
    """What saving ``draft`` over ``stored`` does to the first percentage rule's percentage,
    or None when it keeps it."""
    before, after = split_percentage(stored), split_percentage(draft)
    return None if before == after else SplitChange(before, after)
