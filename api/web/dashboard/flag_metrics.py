"""The metrics a flag follows in an environment (contract 13), as the flag's page offers them:
one checkbox per metric of the organization (``FIELD``), ticked when the flag follows it.
Saving (``flags.FlagMetricsAction``) sets the whole list through the store, as the admin API's
``PUT .../flags/{flagKey}/metrics`` does: audited, and no config version moves (evaluation does
not change). A metric the flag's running rollout guards on is compared whether or not it is
ticked; the page says so beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from api.controlplane.changes import Rollout, guarded_metrics
from api.controlplane.model import Metric

FIELD = "metric"
"""The checkboxes' name: one value per metric followed."""


@dataclass(frozen=True)
class MetricChoice:
    """A metric as the flag page offers it: ticked when the flag follows it, guarded when the
    flag's running rollout guards on it."""

    metric: Metric
    followed: bool
    guarded: bool


def choices(
    metrics: Sequence[Metric], followed: Sequence[str], rollout: Rollout | None
) -> list[MetricChoice]:
    """Every metric of the organization, by key, with what the flag does with it."""
    guarded = set(guarded_metrics(rollout.plan.guardrails)) if rollout else set()
    return [MetricChoice(m, m.key in followed, m.key in guarded) for m in metrics]
