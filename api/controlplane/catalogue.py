"""The catalogue of what release health compares (contract sections 9, 10 and 13): one entry per
comparison, built in or an organization's metric, and everything else derives from it.

An entry says what a user's value is, in which unit, which direction is worse, how the arms are
compared, and the tolerance a guarded rollout takes when its ``PUT`` names none. The health
answer's keys, the OpenAPI document's health fields, the rollout guardrails the admin API
accepts, the pipeline's comparisons (one ``health_comparisons`` row each), the guardian's
evidence and words, the dashboard's rows and the CLI's lines all iterate ``BUILT_IN`` (and
``metric_measure`` for a metric), so a built-in comparison on an existing method is one entry
here (docs/architecture.md, "a new guardrail").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from api.controlplane.model import Better, Metric, MetricKind


class Method(StrEnum):
    """How the arms are compared (``warehouse.statistics``; docs/statistics.md)."""

    PROPORTION = "proportion"
    """Users with an outcome among the users counted: percentage points."""
    QUANTILE = "quantile"
    """A quantile of the users' mean latencies (their histogram)."""
    MEAN = "mean"
    """The mean of a per-user value."""
    RATIO = "ratio"
    """A ratio of per-user sums (the delta method)."""


@dataclass(frozen=True)
class Measure:
    """One comparison of release health.

    ``events`` and ``among`` name, for a built-in proportion, the arm figures
    (``pipelines.health.ArmFigures``) it counts: users with the outcome, among which users.
    ``quantile`` is a quantile comparison's level. ``tolerance`` is None where no unit-free
    default exists (a metric's own unit): a rollout guarding on it must name one.
    ``guarded_by_default``: a rollout whose ``PUT`` names no guardrails watches it.
    """

    name: str
    label: str
    unit: str
    better: Better
    method: Method
    per_user: str
    tolerance: float | None
    events: str | None = None
    among: str | None = None
    quantile: float | None = None
    guarded_by_default: bool = True

    @property
    def higher_is_worse(self) -> bool:
        return self.better is Better.LOWER


BUILT_IN: tuple[Measure, ...] = (
    Measure(
        "failureRate", "Failure rate", "pp", Better.LOWER, Method.PROPORTION,
        "whether any of the user's feedback failed, among users with feedback", 1.0,
        events="failed_users", among="users_with_feedback",
    ),
    Measure(
        "latencyP95Ms", "p95 latency", "ms", Better.LOWER, Method.QUANTILE,
        "the user's mean reported latency; the arms' 95th percentiles compared", 50.0,
        quantile=0.95,
    ),
    Measure(
        "coverage", "Coverage", "pp", Better.HIGHER, Method.PROPORTION,
        "whether the user sent any feedback, among the arm's users", 5.0,
        events="users_with_feedback", among="users",
    ),
)  # fmt: skip
"""The built-in comparisons, in the order the health answer and the dashboard show them; each
is also a guardrail of the same name (contract section 10)."""

BUILT_IN_NAMES: tuple[str, ...] = tuple(m.name for m in BUILT_IN)

DEFAULT_GUARDRAILS: tuple[str, ...] = tuple(m.name for m in BUILT_IN if m.guarded_by_default)
"""What a guarded rollout watches when its ``PUT`` names no guardrails (contract section 10)."""

METRIC_PREFIX = "metric:"
"""A metric's comparison and guardrail: ``metric:<metricKey>`` (contract section 13)."""

METRIC_UNITS = {
    MetricKind.CONVERSION: "pp",
    MetricKind.COUNT: "events",
    MetricKind.SUM: "value",
    MetricKind.MEAN: "value",
}
"""A metric's unit: percentage points of users for a conversion, the events' own count or value
otherwise."""

_METRIC_METHODS = {
    MetricKind.CONVERSION: Method.PROPORTION,
    MetricKind.COUNT: Method.MEAN,
    MetricKind.SUM: Method.MEAN,
    MetricKind.MEAN: Method.RATIO,
}
_METRIC_PER_USER = {
    MetricKind.CONVERSION: "whether the user has any {event} event in its window",
    MetricKind.COUNT: "how many {event} events the user has in its window",
    MetricKind.SUM: "the sum of the values of the user's {event} events in its window",
    MetricKind.MEAN: "the values of {event} events per event, a ratio of per-user sums",
}
CONVERSION_TOLERANCE = 1.0
"""A conversion guardrail's default tolerance, percentage points (as ``failureRate``'s)."""


def metric_name(metric_key: str) -> str:
    """The comparison and guardrail that follow the metric ``metric_key``."""
    return METRIC_PREFIX + metric_key


def metric_key_of(name: str) -> str | None:
    """The metric a ``metric:<key>`` name follows; None for a built-in one."""
    return name[len(METRIC_PREFIX) :] if name.startswith(METRIC_PREFIX) else None


def metric_measure(metric: Metric) -> Measure:
    """A metric's entry: its name, unit and direction from its definition."""
    return Measure(
        metric_name(metric.key),
        metric.name,
        METRIC_UNITS[metric.kind],
        metric.better,
        _METRIC_METHODS[metric.kind],
        _METRIC_PER_USER[metric.kind].format(event=metric.event),
        CONVERSION_TOLERANCE if metric.kind is MetricKind.CONVERSION else None,
    )


def built_in(name: str) -> Measure | None:
    """The built-in entry of that name, if any."""
    return next((m for m in BUILT_IN if m.name == name), None)


def measures(metrics: Iterable[Metric] = ()) -> dict[str, Measure]:
    """Every comparison by name: the built-in ones, then the metrics'."""
    catalogue = {m.name: m for m in BUILT_IN}
    catalogue.update((metric_name(m.key), metric_measure(m)) for m in metrics)
    return catalogue
