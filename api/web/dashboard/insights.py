"""A flag's insights page: the latest aggregation from the warehouse, its warnings, daily
charts, and the flag's release health (contract section 9) with its per-arm charts.

Figures come from ``warehouse.read`` (read-only; the pipeline publishes by atomic rename, so a
page view never waits on it). Warnings follow the spec's guidance (coverage under 80 % means
the rates rest on a small share of evaluations) and the health's own: a sample-ratio
mismatch withholds every decision, and a treatment whose users report outcomes less often
than control's is flagged (a crash that sends no feedback must not look healthy).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import falcon
import falcon.asgi
from flagsight_core.contract import Decision, WithheldReason
from markupsafe import Markup

from api.controlplane.changes import GUARDRAIL_LABELS, GUARDRAIL_UNITS, GUARDRAILS, AuditRecord
from api.controlplane.health_document import health_answer
from api.controlplane.model import Environment
from api.controlplane.store import ControlPlaneStore
from api.web.admin.flags import read_flag_metrics
from api.web.admin.health import read_flag_health
from api.web.admin.warehouse_rows import camel_row, daily_row
from api.web.dashboard.base import environment_crumbs, signed_in
from api.web.dashboard.charts import Point, column_chart, full_time, interval_chart, line_chart
from api.web.dashboard.flags import FlagPage, flag_path, flags_path
from api.web.dashboard.forms import Form
from api.web.dashboard.metric_health import metric_rows
from api.web.dashboard.rollout_view import (
    UNIT_NAMES,
    Metrics,
    confidence_text,
    default_rollout_form,
    guardrail_choices,
    guardrail_labels,
    guardrail_rows,
)
from warehouse.read import arm_windows, daily_series
from warehouse.statistics import MIN_USERS_WITH_FEEDBACK

COVERAGE_ADVISED = 80.0

RANGES = {
    "24h": ("minute", timedelta(hours=24), "Last 24 hours, per minute"),
    "30d": ("hour", timedelta(days=30), "Last 30 days, per hour"),
    "all": ("day", None, "All days"),
}
"""The health charts' ranges: their grain, how far back, and their caption."""

WITHHELD_TEXT = {
    WithheldReason.SAMPLE_RATIO_MISMATCH: "the sample ratio does not match the split",
    WithheldReason.BELOW_MINIMUM_SAMPLE: "too few users with feedback yet",
    WithheldReason.QUANTILE_UNBOUNDED: "too few users reported a latency to bound the p95 yet",
    WithheldReason.NO_PERCENTAGE_RULE: "the flag has no percentage rule",
}
"""What each ``withheldReason`` code means, for people."""

DECISION_TEXT = {
    Decision.REGRESSION: "Regression: treatment is worse than control.",
    Decision.IMPROVEMENT: "Improvement: treatment is better than control.",
    Decision.INCONCLUSIVE: "Inconclusive: no difference shown yet.",
    Decision.WITHHELD: "Withheld",
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
    return found


def health_warnings(health: dict[str, Any]) -> list[Notice]:
    """The sample-ratio and coverage warnings of a health answer."""
    found = []
    ratio = health["sampleRatio"]
    if ratio["mismatch"]:
        found.append(Notice("sample-ratio", (
            f"Sample ratio mismatch: {ratio['observed']:.1%} of users are in treatment where"
            f" the rule splits {ratio['expected']:.1%} (p = {ratio['pValue']:.2g}). Users are"
            " being lost or duplicated on one side, so every decision is withheld until it is"
            " fixed.")))  # fmt: skip
    coverage = health.get("coverage") or {}
    if coverage.get("decision") == Decision.REGRESSION:
        found.append(Notice("arm-coverage", (
            "Treatment's users report outcomes markedly less often than control's"
            f" ({coverage['difference']:+.1f} points): failures that send no feedback (a"
            " crash) would not show in its failure rate.")))  # fmt: skip
    return found


NO_CONTROL_TEXT = (
    "No control arm any more: the rule serves every user who reaches it, so there is no one"
    " left to compare treatment with."
)
"""Said in place of a withheld decision's reason at 100 % (a completed rollout, say)."""


def no_control(health: dict[str, Any]) -> bool:
    """Whether the split has no control left: at 100 %, or users in treatment and none in
    control."""
    arms = health["arms"] or {}
    treatment, control = (arms.get(arm, {}).get("users") or 0 for arm in ("treatment", "control"))
    return (health["percentage"] or 0) >= 100 or (treatment > 0 and control == 0)


def decision_text(health: dict[str, Any], comparison: dict[str, Any]) -> str:
    """A comparison's decision in words; a withheld one says why."""
    if comparison["decision"] != Decision.WITHHELD:
        return DECISION_TEXT.get(comparison["decision"], comparison["decision"])
    if no_control(health):
        return NO_CONTROL_TEXT
    why = WITHHELD_TEXT.get(health["withheldReason"] or "", "not enough users yet")
    return (
        f"{why[:1].upper()}{why[1:]} (a decision needs at least {MIN_USERS_WITH_FEEDBACK:,}"
        " users with feedback per arm)."
    )


@dataclass(frozen=True)
class ComparisonView:
    """One comparison of the health view: a guardrail's name, label and unit, the answer's
    comparison, its decision in words and its interval drawn."""

    name: str
    label: str
    unit: str
    comparison: dict[str, Any]
    text: str
    chart: Markup


def health_view(health: dict[str, Any] | None, metrics: Metrics) -> dict[str, Any] | None:
    """What the template shows of a health answer: it, its warnings, a comparison per
    guardrail (failure rate, p95 latency, coverage) with its interval chart, and a row per
    metric it compares (``metric_health``; ``metrics``: the organization's, by key)."""
    if health is None:
        return None
    comparisons = []
    for name in GUARDRAILS:
        comparison, label, unit = health[name], GUARDRAIL_LABELS[name], GUARDRAIL_UNITS[name]
        chart = interval_chart(
            comparison["difference"], comparison["ci"], title=f"{label} difference",
            unit=f" {unit}", decision=comparison["decision"],
        )  # fmt: skip
        comparisons.append(
            ComparisonView(name, label, unit, comparison, decision_text(health, comparison), chart)
        )
    return {"answer": health, "warnings": health_warnings(health), "comparisons": comparisons,
            "metrics": metric_rows(health, metrics)}  # fmt: skip


GRAINS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
"""Each range's grain as the length of its windows."""


def arm_charts(
    windows: list[dict[str, Any]],
    caption: str,
    grain: str,
    changes: dict[datetime, str] | None = None,
) -> dict[str, Any] | None:
    """Per-arm failure rate and evaluations over the range's windows (the charts and, for the
    table beside them, a row per window), with the flag's changes marked where they fall."""
    if not windows:
        return None
    length = GRAINS[grain]

    def series(name: str) -> dict[str, list[Point]]:
        by_arm: dict[str, list[Point]] = {"treatment": [], "control": []}
        for row in windows:
            by_arm.setdefault(row["arm"], []).append(Point(_utc(row["window_start"]), row[name]))
        return by_arm

    rows: dict[datetime, dict[str, Any]] = {}
    for row in windows:
        at = _utc(row["window_start"])
        empty = {"at": full_time(at, length), "treatment": {}, "control": {}}
        rows.setdefault(at, empty)[row["arm"]] = row
    return {
        "caption": caption,
        "failure": line_chart(
            series("failure_rate"),
            title="Failure rate by arm, per evaluation with feedback",
            grain=length,
            unit=" %",
            markers=changes,
        ),
        "evaluations": line_chart(
            series("evaluations"), title="Evaluations by arm", grain=length, markers=changes
        ),
        "rows": [rows[at] for at in sorted(rows)],
    }


def _utc(iso: str) -> datetime:
    """An ISO time (``...Z``) as an aware datetime in UTC."""
    return datetime.fromisoformat(iso).astimezone(UTC)


def charts(series: list[dict[str, Any]]) -> dict[str, Any]:
    def points(name: str) -> list[Point]:
        return [Point(_utc(f"{row['date']}T00:00:00Z"), row[name]) for row in series]

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


class InsightsView(FlagPage):
    """What renders a flag's insights page: the page itself and the rollout actions that show
    it again with their error."""

    async def show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        env_id: str,
        flag_key: str,
        *,
        status: int = 200,
        rollout_error: str | None = None,
        rollout_form: Form | dict[str, str] | None = None,
    ) -> None:
        flag, environment, organization = await self.flag(env_id, flag_key)
        warehouse = self.services.settings.warehouse_path
        row = await self.read(read_flag_metrics, warehouse, env_id, flag_key)
        metrics = camel_row(row) if row else None
        days = await self.read(daily_series, warehouse, env_id, flag_key)
        series = [daily_row(day) for day in days]
        row = await self.read(read_flag_health, warehouse, env_id, flag_key)
        chosen = req.get_param("range") if req.get_param("range") in RANGES else "24h"
        grain, span, caption = RANGES[chosen]
        since = datetime.now(UTC) - span if span else datetime(1970, 1, 1, tzinfo=UTC)
        windows = await self.read(arm_windows, warehouse, env_id, flag_key, grain, since)
        rollout = await self.read(self.store.get_rollout, env_id, flag_key)
        changes = await self.read(flag_changes, self.store, environment, flag_key)
        defined = await self.read(self.store.list_metrics, organization.id)
        by_key = {metric.key: metric for metric in defined}
        choices = guardrail_choices(defined)
        self.render(
            req, resp, "insights.html", status=status, flag=flag, environment=environment,
            organization=organization, metrics=metrics, series=series,
            warnings=warnings_for(metrics) if metrics else [],
            charts=charts(series) if series else None,
            health=health_view(health_answer(row) if row else None, by_key),
            arm_charts=arm_charts(windows, caption, grain, markers(changes, grain)), ranges=RANGES,
            chosen_range=chosen, rollout=rollout, rollout_error=rollout_error,
            rollout_form=rollout_form or default_rollout_form(choices), guardrails=choices,
            guard_rows=guardrail_rows(rollout, by_key) if rollout else [],
            guard_labels=guardrail_labels(rollout, by_key) if rollout else "",
            guard_confidence=confidence_text(rollout) if rollout else "",
            unit_names=UNIT_NAMES,
            changes=changes[:10], section="flags",
            crumbs=[*environment_crumbs(environment, organization),
                    ("Flags", flags_path(env_id)), (flag.key, flag_path(env_id, flag.key)),
                    ("Insights", req.path)],
        )  # fmt: skip


@falcon.before(signed_in)
class InsightsPage(InsightsView):
    """``/dashboard/environments/{env_id}/flags/{flag_key}/insights``."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await self.show(req, resp, env_id, flag_key)


def insights_path(env_id: str, flag_key: str) -> str:
    return f"{flag_path(env_id, flag_key)}/insights"


def flag_changes(
    store: ControlPlaneStore, environment: Environment, flag_key: str
) -> list[AuditRecord]:
    """The audit records of this flag (newest first): the health charts' change markers."""
    target = f"flag:{environment.id}/{flag_key}"
    return [r for r in store.list_audit(environment.organization_id) if r.target == target]


def markers(changes: list[AuditRecord], grain: str) -> dict[datetime, str]:
    """The starts of the windows (UTC) in which the flag changed, and what changed."""
    found: dict[datetime, str] = {}
    for record in changes:
        at = _utc(record.at).replace(second=0, microsecond=0)
        if grain == "hour":
            at = at.replace(minute=0)
        elif grain == "day":
            at = at.replace(hour=0, minute=0)
        found[at] = f"{found[at]}; {record.action}" if at in found else record.action
    return found
