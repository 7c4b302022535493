"""The control plane of the metrics benchmark: the synthetic lake's split flags follow ten metrics.

``tests/pipelines/synthetic_lake.py`` puts the users of ``flag-0`` to ``flag-24`` in the arms
of a 50 % split, in two environments; the pipeline computes a followed metric's users only
where the control plane says a flag follows it. So the scenario writes one organization with
two environments (insights on) in the data directory's SQLite control plane, those flags with
their 50 % rule, and ``METRICS`` (every kind, over the lake's tracked event names, windows of
one to fourteen days), each followed by every split flag; the lake is then written with the
environments' ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from flagsight_core import PercentageRule

from api.backends import store_for
from api.controlplane.model import Better, MetricKind, Plan
from api.settings import Settings

SPLIT_FLAGS = tuple(f"flag-{n}" for n in range(25))
"""The synthetic lake's flags whose users are in arms (``synthetic_lake.write_lake``)."""


class BenchMetric(NamedTuple):
    key: str
    event: str
    kind: MetricKind
    window_hours: int
    better: Better


METRICS = (
    BenchMetric("purchasers", "purchase", MetricKind.CONVERSION, 72, Better.HIGHER),
    BenchMetric("purchases", "purchase", MetricKind.COUNT, 72, Better.HIGHER),
    BenchMetric("revenue", "purchase", MetricKind.SUM, 168, Better.HIGHER),
    BenchMetric("order-value", "purchase", MetricKind.MEAN, 168, Better.HIGHER),
    BenchMetric("signups", "signup", MetricKind.CONVERSION, 24, Better.HIGHER),
    BenchMetric("page-views", "page-view", MetricKind.COUNT, 72, Better.HIGHER),
    BenchMetric("time-on-page", "page-view", MetricKind.MEAN, 72, Better.HIGHER),
    BenchMetric("errors", "app-error", MetricKind.COUNT, 24, Better.LOWER),
    BenchMetric("users-with-errors", "app-error", MetricKind.CONVERSION, 168, Better.LOWER),
    BenchMetric("error-cost", "app-error", MetricKind.SUM, 336, Better.LOWER),
)
"""Ten metrics of mixed kinds (three conversions, three counts, two sums, two means)."""


class MetricWorld(NamedTuple):
    organization_id: str
    environment_ids: tuple[str, str]


def create_metric_world(data_dir: Path) -> MetricWorld:
    """The organization, its two environments, the split flags and their followed metrics, in
    the control plane of ``data_dir`` (created)."""
    settings = Settings.from_env({"FLAGSIGHT_DATA_DIR": str(data_dir)})
    data_dir.mkdir(parents=True, exist_ok=True)
    store = store_for(None, settings.control_plane_path)
    try:
        organization = store.create_organization("Bench metrics", Plan.PRO)
        for metric in METRICS:
            store.put_metric(organization.id, metric.key, name=metric.key, event=metric.event,
                             kind=metric.kind, window_hours=metric.window_hours,
                             better=metric.better)  # fmt: skip
        environments = tuple(
            store.create_environment(organization.id, key, insights_enabled=True).id
            for key in ("production", "staging")
        )
        for environment_id in environments:
            for flag in SPLIT_FLAGS:
                store.put_flag(environment_id, flag, True, False, [PercentageRule(50.0)])
                store.set_flag_metrics(environment_id, flag, [m.key for m in METRICS])
    finally:
        store.close()
    return MetricWorld(organization.id, (environments[0], environments[1]))
