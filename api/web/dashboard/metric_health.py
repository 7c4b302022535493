"""The health view's rows for an organization's metrics (contract section 13): one per metric
the health answer compares, beside failure rate, p95 latency and coverage.

Each row reads the answer's ``metrics`` entry in the metric's own unit: the arms' means (a
conversion's as a percentage of users), treatment minus control with its interval, the
decision, and how much the pre-exposure data narrowed the interval. An answer without
``metrics`` (a warehouse published before metrics) shows no row. A metric deleted since the
answer was computed is shown by its key, its figures without a unit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flagsight_core.contract import Decision
from flagsight_core.words import counted

from api.controlplane.changes import metric_guardrail
from api.controlplane.model import Metric, MetricKind
from api.web.dashboard.format import MISSING
from api.web.dashboard.rollout_view import Metrics, amount, label_and_unit

WITHHELD_WORDS = {
    "sample_ratio_mismatch": "the sample ratio does not match the split",
    "below_minimum_sample": "too few exposed users, or users with its events, in an arm yet",
    "no_percentage_rule": "the flag has no percentage rule",
}
"""Why a metric's decision is withheld, for people (its ``withheldReason``)."""


def mean_text(value: float | None, metric: Metric | None) -> str:
    """An arm's mean: a conversion's as a percentage of users, a count's in events per user,
    a sum's and a mean's as the values are."""
    if value is None:
        return MISSING
    kind = metric.kind if metric is not None else None
    if kind is MetricKind.CONVERSION:
        return f"{value:.1f} %"
    if kind is MetricKind.COUNT:
        return f"{value:,.2f} events"
    return f"{value:,.2f}"


def counted_users(users: int | None) -> str:
    """``1,200 users``, ``1 user``; a dash when the answer has none."""
    return MISSING if users is None else counted(int(users), "user")


def interval_words(ci: Sequence[float | None] | None, unit: str) -> str:
    """The interval of the difference, or a dash before it is bounded."""
    if not ci or ci[0] is None or ci[1] is None:
        return MISSING
    return f"{amount(ci[0], unit)} to {amount(ci[1], unit)}"


def reduction_words(reduction: float | None) -> str:
    """How much the pre-exposure data narrowed the interval (``varianceReduction``): ``interval
    31 % narrower from pre-exposure data``; none when it carried nothing (0); a dash when the
    comparison had no adjustment to make (withheld, or a conversion's proportions)."""
    if reduction is None:
        return MISSING
    if round(reduction * 100) <= 0:
        return "interval no narrower: the pre-exposure data carried nothing"
    return f"interval {reduction * 100:.0f} % narrower from pre-exposure data"


@dataclass(frozen=True)
class MetricRow:
    """One metric of the health view, every figure as text."""

    key: str
    name: str
    unit: str
    treatment: str
    control: str
    treatment_users: str
    control_users: str
    difference: str
    interval: str
    decision: str
    decision_words: str
    reduction: str


NO_CONTROL = "no control arm any more, the rule serves every user who reaches it"


def _no_control(entry: Mapping[str, Any]) -> bool:
    """Users in treatment and none in control (a split at 100 %)."""
    treatment, control = (
        (entry.get(arm) or {}).get("users") or 0 for arm in ("treatment", "control")
    )
    return treatment > 0 and control == 0


def decision_words(entry: Mapping[str, Any], better: str | None) -> str:
    """The decision in words, naming the direction that is better; a withheld one says why."""
    decision = entry.get("decision")
    if decision == Decision.WITHHELD:
        if _no_control(entry):
            return f"Withheld: {NO_CONTROL}."
        why = WITHHELD_WORDS.get(entry.get("withheldReason") or "", "not enough users yet")
        return f"Withheld: {why}."
    if decision == Decision.REGRESSION:
        return f"Regression: treatment is worse ({better or '?'} is better)."
    if decision == Decision.IMPROVEMENT:
        return f"Improvement: treatment is better ({better or '?'} is better)."
    return "Inconclusive: no difference shown yet."


def metric_rows(health: Mapping[str, Any], metrics: Metrics) -> list[MetricRow]:
    """A row per metric of the answer, in the answer's order (``metrics``: the organization's
    metrics by key, for their names and units)."""
    rows = []
    for key, entry in (health.get("metrics") or {}).items():
        metric = metrics.get(key)
        name, unit = label_and_unit(metric_guardrail(key), metrics)
        difference = entry.get("difference")
        treatment, control = entry.get("treatment") or {}, entry.get("control") or {}
        better = str(metric.better) if metric is not None else None
        rows.append(
            MetricRow(
                key=key,
                name=name,
                unit=unit,
                treatment=mean_text(treatment.get("mean"), metric),
                control=mean_text(control.get("mean"), metric),
                treatment_users=counted_users(treatment.get("users")),
                control_users=counted_users(control.get("users")),
                difference=MISSING if difference is None else amount(difference, unit),
                interval=interval_words(entry.get("ci"), unit),
                decision=str(entry.get("decision") or Decision.WITHHELD),
                decision_words=decision_words(entry, better),
                reduction=reduction_words(entry.get("varianceReduction")),
            )
        )
    return rows
