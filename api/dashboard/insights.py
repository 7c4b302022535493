"""A flag's insights page: the latest aggregation from the warehouse, its warnings, daily
charts and the on-versus-off comparison.

Figures come from ``warehouse.read`` (read-only; the pipeline publishes by atomic rename, so a
page view never waits on it). Warnings follow the spec's guidance: coverage under 80 % means
the rates rest on a small share of evaluations; under ``MIN_FEEDBACK_PER_SIDE`` feedback
events (the same bound below which the comparison gives no verdict) the sample is small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import falcon
import falcon.asgi

from api.admin.flags import read_flag_metrics
from api.dashboard.base import environment_crumbs, signed_in
from api.dashboard.charts import Point, column_chart
from api.dashboard.flags import FlagPage, flag_path, flags_path
from pipelines.constants import MIN_FEEDBACK_PER_SIDE
from warehouse.read import daily_series, value_comparison

COVERAGE_ADVISED = 80.0

VERDICTS = {
    "on_better": "Users served ON succeeded more often than users served OFF.",
    "off_better": "Users served OFF succeeded more often than users served ON.",
    "no_significant_difference": "No significant difference between ON and OFF.",
}


@dataclass(frozen=True)
class Notice:
    kind: str
    text: str


def warnings_for(metrics: dict[str, Any]) -> list[Notice]:
    found = []
    coverage = metrics.get("feedbackCoverage")
    if coverage is not None and coverage < COVERAGE_ADVISED:
        found.append(Notice("coverage", (
            f"Feedback coverage is {coverage:.1f} %, under the {COVERAGE_ADVISED:.0f} % advised:"
            " success and failure rates describe only the evaluations that reported an outcome."
            " Send feedback for more evaluations.")))  # fmt: skip
    feedback = metrics.get("feedbackCount") or 0
    if feedback < MIN_FEEDBACK_PER_SIDE:
        found.append(Notice("sample", (
            f"Only {feedback:,} feedback events. Rates from fewer than"
            f" {MIN_FEEDBACK_PER_SIDE} are unreliable, and the on/off comparison needs"
            f" {MIN_FEEDBACK_PER_SIDE} on each side.")))  # fmt: skip
    return found


def charts(series: list[dict[str, Any]]) -> dict[str, Any]:
    def points(name: str) -> list[Point]:
        return [Point(row["date"], row[name]) for row in series]

    return {
        "evaluations": column_chart(points("evaluations"), title="Evaluations per day"),
        "coverage": column_chart(
            points("feedbackCoverage"),
            title="Feedback coverage per day",
            unit=" %",
            y_max=100.0,
            guide=COVERAGE_ADVISED,
            guide_label="80 % advised",
        ),  # fmt: skip
        "success": column_chart(
            points("successRate"), title="Success rate per day", unit=" %", y_max=100.0
        ),
    }


def verdict_text(comparison: dict[str, Any] | None) -> str | None:
    if comparison is None:
        return None
    verdict = comparison.get("verdict")
    if verdict is None:
        return f"No verdict yet: {comparison.get('noVerdictReason') or 'not enough feedback'}."
    text = VERDICTS.get(verdict, verdict)
    p_value = comparison.get("pValue")
    return text if p_value is None else f"{text} (p = {p_value:.3g}, α = {comparison['alpha']})"


@falcon.before(signed_in)
class InsightsPage(FlagPage):
    """``/dashboard/environments/{env_id}/flags/{flag_key}/insights``."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        flag, environment, organization = await self.flag(env_id, flag_key)
        warehouse = self.services.settings.warehouse_path
        metrics = await self.read(read_flag_metrics, warehouse, env_id, flag_key)
        series = await self.read(daily_series, warehouse, env_id, flag_key)
        comparison = await self.read(value_comparison, warehouse, env_id, flag_key)
        self.render(
            req, resp, "insights.html", flag=flag, environment=environment,
            organization=organization, metrics=metrics, series=series,
            warnings=warnings_for(metrics) if metrics else [],
            charts=charts(series) if series else None, comparison=comparison,
            verdict=verdict_text(comparison), section="flags",
            crumbs=[*environment_crumbs(environment, organization),
                    ("Flags", flags_path(env_id)), (flag.key, flag_path(env_id, flag.key)),
                    ("Insights", req.path)],
        )  # fmt: skip
