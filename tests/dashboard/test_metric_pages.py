"""Metrics in the dashboard, in process (contract 13, issue 42): the metrics pages (list,
create, edit, delete and its refusal while a rollout guards on the metric), the flag page's
followed metrics, the rollout form's metric guardrails with their tolerances, and the health
view's row per metric. What a person reads, from the pages' text; what was written, from the
store."""

from __future__ import annotations

import re
from typing import Any

import pytest

from api.controlplane.changes import GUARDRAILS, RolloutPlan, metric_guardrail
from api.controlplane.model import Better, MetricKind
from api.serving.services import Services
from api.web.dashboard.forms import Form
from api.web.dashboard.insights import health_view
from api.web.dashboard.rollouts import plan_body
from tests.dashboard.conftest import DashClient
from tests.dashboard.test_rollouts import COVERAGE_GAP, part, publish_health
from tests.support.admin import Admin, Tenant

FLAG = "checkout"


@pytest.fixture
def tenant(dash_admin: Admin) -> Tenant:
    return dash_admin.split_tenant(FLAG)


def metrics_page(tenant: Tenant) -> str:
    return f"/dashboard/organizations/{tenant.organization_id}/metrics"


def flag_page(tenant: Tenant) -> str:
    return f"/dashboard/environments/{tenant.environment_id}/flags/{FLAG}"


def metric_fields(key: str = "purchase", **fields: str) -> dict[str, str]:
    return {"key": key, "name": "Purchases", "event": "purchase", "kind": "conversion",
            "window_hours": "72", "better": "higher", **fields}  # fmt: skip


def put_metric(services: Services, tenant: Tenant, key: str, kind: MetricKind, name: str) -> None:
    services.store.put_metric(
        tenant.organization_id, key, name=name, event=key, kind=kind, window_hours=48,
        better=Better.HIGHER,
    )  # fmt: skip


def invalid_field(page: Any) -> list[str]:
    """The ids of the form's inputs marked invalid."""
    return re.findall(r'<(?:input|select)[^>]*id="([^"]+)"[^>]*aria-invalid="true"', page.text)


# --- the metrics pages ------------------------------------------------------------------------


def test_a_metric_is_created_listed_and_audited_as_the_dashboards(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    person.get(metrics_page(tenant))
    result = person.post(metrics_page(tenant), metric_fields(name="Checkout conversion"))
    assert result.status_code == 303, result.text
    metric = services.store.get_metric(tenant.organization_id, "purchase")
    assert (metric.name, metric.event, metric.kind, metric.window_hours, metric.better) == (
        "Checkout conversion", "purchase", MetricKind.CONVERSION, 72, Better.HIGHER,
    )  # fmt: skip
    page = person.get(result.headers["location"])
    assert "Metric purchase saved." in part(page, "data-metric-saved")
    assert part(page, 'data-metric="purchase"').startswith(
        "Checkout conversion purchase purchase conversion 72 h higher None"
    )
    record = services.store.list_audit(tenant.organization_id)[0]
    assert (record.action, record.actor) == ("metric.put", "dashboard")


@pytest.mark.parametrize(
    ("fields", "invalid", "said"),
    [
        ({"key": "has space"}, "metric-key", "Use "),
        ({"window_hours": "0"}, "metric-window", "Field 'windowHours'"),
        ({"window_hours": "a week"}, "metric-window", "Field 'windowHours'"),
        ({"window_hours": "721"}, "metric-window", "Field 'windowHours'"),
        ({"name": " "}, "metric-name", "Field 'name'"),
        ({"event": "not an event"}, "metric-event", "Field 'event'"),
        ({"kind": "median"}, "metric-kind", "Field 'kind'"),
    ],
)  # fmt: skip
def test_a_refused_field_is_marked_with_the_admin_apis_words(
    person: DashClient, tenant: Tenant, services: Services, fields: dict[str, str],
    invalid: str, said: str,
) -> None:  # fmt: skip
    person.get(metrics_page(tenant))
    result = person.post(metrics_page(tenant), metric_fields(**fields))
    assert result.status_code == 400
    assert invalid_field(result) == [invalid]
    assert said in part(result, f'id="{invalid}-error"')
    assert services.store.list_metrics(tenant.organization_id) == []
    typed = next(iter(fields.values()))
    if invalid != "metric-kind":
        assert f'value="{typed}"' in result.text  # the input is kept


def test_a_key_the_organization_has_is_not_created_again(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "purchase", MetricKind.CONVERSION, "Purchases")
    person.get(metrics_page(tenant))
    result = person.post(metrics_page(tenant), metric_fields(name="Another"))
    assert result.status_code == 400
    assert "already has a metric 'purchase': edit it" in part(result, 'id="metric-key-error"')
    assert services.store.get_metric(tenant.organization_id, "purchase").name == "Purchases"


def test_a_metric_is_edited_on_its_page(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "revenue", MetricKind.SUM, "Revenue")
    page = person.get(f"{metrics_page(tenant)}/revenue")
    assert 'name="window_hours" value="48"' in page.text
    assert '<option value="sum" selected>' in page.text
    assert 'name="key"' not in page.text  # a key does not change
    result = person.post(
        f"{metrics_page(tenant)}/revenue",
        metric_fields(key="ignored", name="Revenue per user", event="order", kind="sum",
                      window_hours="24", better="higher"),
    )  # fmt: skip
    assert result.status_code == 303, result.text
    metric = services.store.get_metric(tenant.organization_id, "revenue")
    assert (metric.name, metric.event, metric.window_hours) == ("Revenue per user", "order", 24)
    assert services.store.get_metric(tenant.organization_id, "ignored") is None
    refused = person.post(f"{metrics_page(tenant)}/revenue", metric_fields(window_hours="-1"))
    assert refused.status_code == 400 and invalid_field(refused) == ["metric-window"]
    assert person.get(f"{metrics_page(tenant)}/nothing").status_code == 404


def test_a_guarded_metrics_kind_does_not_change(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "revenue", MetricKind.SUM, "Revenue")
    plan = RolloutPlan((10.0, 100.0), 10.0, (metric_guardrail("revenue"),),
                       ((metric_guardrail("revenue"), 5.0),))  # fmt: skip
    services.store.start_rollout(tenant.environment_id, FLAG, plan)
    person.get(f"{metrics_page(tenant)}/revenue")
    result = person.post(
        f"{metrics_page(tenant)}/revenue",
        metric_fields(name="Revenue", event="revenue", kind="mean"),
    )
    assert result.status_code == 400
    said = part(result, "data-metric-errors")
    assert said.startswith("Not saved. Metric 'revenue' cannot become a mean metric")
    assert '<option value="mean" selected>' in result.text  # the input is kept
    assert services.store.get_metric(tenant.organization_id, "revenue").kind is MetricKind.SUM


def test_a_metric_is_deleted_after_a_question(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "purchase", MetricKind.CONVERSION, "Purchases")
    page = person.get(metrics_page(tenant))
    assert 'data-confirm="Delete the metric Purchases (purchase)?' in page.text
    result = person.post(f"{metrics_page(tenant)}/purchase/delete", {})
    assert result.status_code == 303
    assert services.store.list_metrics(tenant.organization_id) == []
    assert "Metric purchase deleted." in part(
        person.get(result.headers["location"]), "data-metric-deleted"
    )
    again = person.post(f"{metrics_page(tenant)}/purchase/delete", {})
    assert again.status_code == 303  # already gone: the outcome asked for


def test_a_metric_a_running_rollout_guards_on_is_not_deleted(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "purchase", MetricKind.CONVERSION, "Purchases")
    plan = RolloutPlan((10.0, 100.0), 10.0, ("failureRate", metric_guardrail("purchase")))
    services.store.start_rollout(tenant.environment_id, FLAG, plan)
    person.get(metrics_page(tenant))
    result = person.post(f"{metrics_page(tenant)}/purchase/delete", {})
    assert result.status_code == 409
    problem = part(result, "data-metric-problem")
    assert problem.startswith("Not deleted.") and FLAG in problem and "purchase" in problem
    assert services.store.get_metric(tenant.organization_id, "purchase") is not None
    followers = part(result, 'data-metric="purchase"')
    assert f"{FLAG} in production" in followers  # a guardrail's metric is followed too


def test_the_organizations_pages_link_to_the_metrics(person: DashClient, tenant: Tenant) -> None:
    page = person.get(f"/dashboard/organizations/{tenant.organization_id}")
    assert f'href="{metrics_page(tenant)}">Metrics</a>' in page.text
    assert "No metrics yet." in person.get(metrics_page(tenant)).text


# --- the flag's followed metrics --------------------------------------------------------------


def test_the_flag_page_sets_the_metrics_the_flag_follows(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "purchase", MetricKind.CONVERSION, "Purchases")
    put_metric(services, tenant, "revenue", MetricKind.SUM, "Revenue")
    page = person.get(flag_page(tenant))
    section = part(page, "data-flag-metrics")
    assert "Purchases (conversion of purchase, higher is better)" in section
    assert "checked" not in re.search(r'data-metric-choice="revenue">(.*?)</div>', page.text)[1]
    result = person.post(
        f"{flag_page(tenant)}/metrics", [("metric", "revenue"), ("metric", "purchase")]
    )
    assert result.status_code == 303, result.text
    assert services.store.flag_metrics(tenant.environment_id, FLAG) == ["revenue", "purchase"]
    location = result.headers["location"]
    assert location.endswith("?metrics_saved=1#metrics")
    page = person.get(location.partition("#")[0])  # a browser keeps the fragment to itself
    assert "Saved" in part(page, "data-metrics-saved")
    assert len(re.findall(r'name="metric" value="\w+" checked', page.text)) == 2
    listed = part(person.get(metrics_page(tenant)), 'data-metric="revenue"')
    assert f"{FLAG} in production" in listed
    assert person.post(f"{flag_page(tenant)}/metrics", []).status_code == 303
    assert services.store.flag_metrics(tenant.environment_id, FLAG) == []


def test_an_unknown_metric_is_refused_on_the_flag_page(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "purchase", MetricKind.CONVERSION, "Purchases")
    person.get(flag_page(tenant))
    result = person.post(
        f"{flag_page(tenant)}/metrics", [("metric", "purchase"), ("metric", "gone")]
    )
    assert result.status_code == 400
    problem = part(result, "data-metrics-problem")
    assert "metrics" in problem and "gone" in problem
    assert 'name="metric" value="purchase" checked' in result.text  # as ticked
    assert services.store.flag_metrics(tenant.environment_id, FLAG) == []


def test_a_flag_page_without_metrics_says_where_to_define_them(
    person: DashClient, tenant: Tenant
) -> None:
    said = part(person.get(flag_page(tenant)), "data-no-metrics")
    assert said.endswith("has no metrics yet: define them on the Metrics page.")


# --- the rollout form's metric guardrails -----------------------------------------------------


def test_the_form_sends_the_metric_guardrails_ticked_with_their_tolerances() -> None:
    offered = [*GUARDRAILS, "metric:purchase", "metric:revenue"]
    form = Form([("steps", "5, 100"), ("step_minutes", "10"), ("guardrail_failureRate", "on"),
                 ("guardrail_metric:revenue", "on"), ("tolerance_metric:revenue", "2.5"),
                 ("tolerance_metric:purchase", "3")])  # fmt: skip
    body = plan_body(form, offered)
    assert body["guardrails"] == ["failureRate", "metric:revenue"]
    assert body["tolerances"] == {"metric:revenue": 2.5}
    assert plan_body(form)["guardrails"] == ["failureRate"]  # only what is offered


def test_a_rollout_guards_on_a_metric_by_its_name_and_tolerance(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "purchase", MetricKind.CONVERSION, "Purchases")
    put_metric(services, tenant, "revenue", MetricKind.SUM, "Revenue")
    insights = f"{flag_page(tenant)}/insights"
    form = part(person.get(insights), 'aria-label="Start a guarded rollout"')
    assert "Purchases Purchases tolerance in percentage points pp" in form
    assert "Revenue Revenue tolerance in the events' own values in its values" in form
    assert "metric:" not in form
    result = person.post(
        f"{flag_page(tenant)}/rollout",
        {"steps": "5, 100", "step_minutes": "10", "guardrail_metric:purchase": "on",
         "tolerance_metric:purchase": "0.5", "guardrail_metric:revenue": "on",
         "tolerance_metric:revenue": "4"},
    )  # fmt: skip
    assert result.status_code == 303, result.text
    rollout = services.store.get_rollout(tenant.environment_id, FLAG)
    assert rollout.plan.tolerances == {"metric:purchase": 0.5, "metric:revenue": 4.0}
    page = person.get(insights)
    assert "guardrails: Purchases, Revenue." in part(page, "data-rollout-state")
    assert part(page, 'data-guardrail="metric:purchase"').startswith(
        "Purchases 0.5 pp Not judged yet"
    )
    assert part(page, 'data-guardrail="metric:revenue"').startswith("Revenue 4 Not judged yet")


def test_a_metric_guardrails_evidence_reads_in_the_metrics_unit(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "errors", MetricKind.COUNT, "Client errors")
    guardrail = metric_guardrail("errors")
    plan = RolloutPlan((10.0, 25.0, 100.0), 10.0, (guardrail,), ((guardrail, 0.5),))
    services.store.start_rollout(tenant.environment_id, FLAG, plan)
    evidence = {
        "tolerance": 0.5, "difference": 0.12, "ci": [None, 0.61], "status": "undecided",
        "users": {"treatment": 1200, "control": 3600}, "usersNeeded": 900,
    }  # fmt: skip
    guard = {"step": 0, "percentage": 10.0, "confidence": {"rollback": 0.95, "safety": 0.95},
             "guardrails": {guardrail: evidence}}  # fmt: skip
    assert services.store.note_rollout(tenant.environment_id, FLAG, 0, guard, None)
    row = part(person.get(f"{flag_page(tenant)}/insights"), 'data-guardrail="metric:errors"')
    assert row == (
        "Client errors 0.5 events Not yet shown +0.12 events up to +0.61 events (lower end not"
        " bounded yet) 1,200 treatment, 3,600 control about 900 more users at 10 %"
    )


def test_a_count_metric_guardrail_needs_its_tolerance(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "errors", MetricKind.COUNT, "Client errors")
    page = person.get(f"{flag_page(tenant)}/insights")
    assert (
        'name="tolerance_metric:errors" value="" inputmode="decimal" size="6" placeholder="required"'
        in page.text
    )
    result = person.post(
        f"{flag_page(tenant)}/rollout",
        {"steps": "5, 100", "step_minutes": "10", "guardrail_metric:errors": "on"},
    )
    assert result.status_code == 400
    assert "tolerances" in part(result, "data-rollout-error")
    assert 'name="guardrail_metric:errors" checked' in result.text  # the input is kept
    assert services.store.get_rollout(tenant.environment_id, FLAG) is None


# --- the health view's metrics ----------------------------------------------------------------


def health_answer(**extra: Any) -> dict[str, Any]:
    """A health answer as ``health_document`` shapes it, every built-in comparison withheld."""
    withheld = {"difference": None, "ci": None, "confidence": 0.95, "decision": "withheld"}
    return {
        "computedAt": "2026-01-01T00:00:00Z", "percentage": 50.0,
        "arms": {arm: {"users": 900, "usersWithFeedback": 900, "coverage": 100.0,
                       "failureRate": 1.0, "latencyP50Ms": 1.0, "latencyP95Ms": 2.0,
                       "latencyP99Ms": 3.0} for arm in ("treatment", "control")},
        "sampleRatio": {"expected": 0.5, "observed": 0.5, "pValue": 1.0, "mismatch": False},
        **{name: withheld for name in GUARDRAILS}, "withheldReason": None, **extra,
    }  # fmt: skip


METRICS_ANSWER = {
    "purchase": {
        "treatment": {"users": 1200, "mean": 12.5}, "control": {"users": 1180, "mean": 10.25},
        "difference": 2.25, "ci": [0.75, 3.75], "confidence": 0.95, "decision": "improvement",
        "varianceReduction": 0.31,
    },
    "revenue": {
        "treatment": {"users": 1200, "mean": 40.0}, "control": {"users": 1180, "mean": 42.5},
        "difference": -2.5, "ci": [-4.0, -1.0], "confidence": 0.95, "decision": "regression",
        "varianceReduction": None,
    },
    "deleted-since": {
        "treatment": {"users": 1, "mean": 3.0}, "control": {"users": 2, "mean": None},
        "difference": None, "ci": None, "confidence": 0.95, "decision": "withheld",
        "varianceReduction": None, "withheldReason": "below_minimum_sample",
    },
}  # fmt: skip


def test_each_metric_of_the_answer_reads_in_its_unit(services: Services, tenant: Tenant) -> None:
    put_metric(services, tenant, "purchase", MetricKind.CONVERSION, "Purchases")
    put_metric(services, tenant, "revenue", MetricKind.SUM, "Revenue")
    metrics = {m.key: m for m in services.store.list_metrics(tenant.organization_id)}
    rows = health_view(health_answer(metrics=METRICS_ANSWER), metrics)["metrics"]
    purchase, revenue, gone = rows
    assert (purchase.name, purchase.treatment, purchase.control) == (
        "Purchases",
        "12.5 %",
        "10.2 %",
    )
    assert (purchase.treatment_users, purchase.control_users) == ("1,200 users", "1,180 users")
    assert (purchase.difference, purchase.interval) == ("+2.25 pp", "+0.75 pp to +3.75 pp")
    assert purchase.decision == "improvement"
    assert purchase.reduction == "interval 31 % narrower from pre-exposure data"
    assert (revenue.treatment, revenue.difference, revenue.interval) == (
        "40.00",
        "-2.50",
        "-4.00 to -1.00",
    )
    assert revenue.decision_words == "Regression: treatment is worse (higher is better)."
    assert revenue.reduction == "—"
    assert (gone.name, gone.control, gone.difference, gone.control_users) == (
        "deleted-since",
        "—",
        "—",
        "2 users",
    )
    assert gone.decision_words == (
        "Withheld: too few exposed users, or users with its events, in an arm yet."
    )


def test_a_metric_withheld_at_100_percent_says_there_is_no_control_arm(
    services: Services, tenant: Tenant
) -> None:
    put_metric(services, tenant, "purchase", MetricKind.CONVERSION, "Purchases")
    metrics = {m.key: m for m in services.store.list_metrics(tenant.organization_id)}
    entry = {**METRICS_ANSWER["deleted-since"], "control": {"users": 0, "mean": None},
             "treatment": {"users": 800, "mean": 9.0}}  # fmt: skip
    (row,) = health_view(health_answer(metrics={"purchase": entry}), metrics)["metrics"]
    assert row.decision_words.startswith("Withheld: no control arm any more")
    assert (row.treatment, row.control, row.control_users) == ("9.0 %", "—", "0 users")


def test_an_answer_without_metrics_shows_no_metric_row(services: Services) -> None:
    assert health_view(health_answer(), {})["metrics"] == []
    assert health_view(health_answer(metrics={}), {})["metrics"] == []


METRIC_COMPARISONS = {
    "metric:purchase": {
        "treatment_users": 1200, "treatment_mean": 12.5, "control_users": 1180,
        "control_mean": 10.25, "difference": 2.25, "ci_low": 0.75, "ci_high": 3.75,
        "decision": "improvement", "variance_reduction": 0.31,
    },
    "metric:revenue": {
        "treatment_users": 1200, "treatment_mean": 40.0, "control_users": 1180,
        "control_mean": 42.5, "difference": -2.5, "ci_low": -4.0, "ci_high": -1.0,
        "decision": "regression", "variance_reduction": 0.0,
    },
}  # fmt: skip
"""Two metrics' ``health_comparisons`` rows, as ``pipelines/health.py`` writes them."""


def test_the_health_view_shows_a_row_per_metric_from_the_warehouse(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "purchase", MetricKind.CONVERSION, "Purchases")
    put_metric(services, tenant, "revenue", MetricKind.SUM, "Revenue")
    comparisons = {**COVERAGE_GAP["comparisons"], **METRIC_COMPARISONS}
    publish_health(services.settings.warehouse_path, tenant.environment_id,
                   [{**COVERAGE_GAP, "comparisons": comparisons}])  # fmt: skip
    page = person.get(f"{flag_page(tenant)}/insights")
    assert re.findall(r'data-metric-row="([\w-]+)"', page.text) == ["purchase", "revenue"]
    assert part(page, 'data-metric-row="purchase"') == (
        "Purchases 12.5 % 1,200 users 10.2 % 1,180 users +2.25 pp +0.75 pp to +3.75 pp"
        " improvement Improvement: treatment is better (higher is better)."
        " interval 31 % narrower from pre-exposure data"
    )
    assert part(page, 'data-metric-row="revenue"') == (
        "Revenue 40.00 1,200 users 42.50 1,180 users -2.50 -4.00 to -1.00 regression"
        " Regression: treatment is worse (higher is better)."
        " interval no narrower: the pre-exposure data carried nothing"
    )
    assert "metric:" not in part(page, "data-metric-health")


def test_a_health_answer_without_metrics_shows_no_metric_table(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    put_metric(services, tenant, "purchase", MetricKind.CONVERSION, "Purchases")
    publish_health(services.settings.warehouse_path, tenant.environment_id, [COVERAGE_GAP])
    page = person.get(f"{flag_page(tenant)}/insights")
    assert 'data-comparison="coverage"' in page.text
    assert "data-metric-health" not in page.text and "data-metric-row" not in page.text
