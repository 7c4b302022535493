"""Guarded rollouts in the dashboard, in process (issue 39): the start form's tolerances, the
guardian's evidence per guardrail on the insights page, the health view's three comparisons
and its answer at 100 %, the flags list's rollout badge, and the flag editor's banner and its
confirmation before a save moves the split a running rollout sets. What a person reads, from
the pages' text."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest

from api.controlplane.changes import (
    DEFAULT_TOLERANCES,
    GUARDRAILS,
    RolloutAction,
    RolloutPlan,
)
from api.serving.services import Services
from api.web.admin.rollouts import DEFAULT_STEP_MINUTES, DEFAULT_STEPS
from api.web.dashboard.forms import Form
from api.web.dashboard.rollouts import plan_body
from tests.dashboard.conftest import DashClient
from tests.support.admin import Admin, Tenant
from tests.support.health_rows import insert_health
from warehouse.migrations import migrate
from warehouse.sql import run_script

FLAG = "checkout"

GUARD = {
    "step": 1,
    "percentage": 25.0,
    "confidence": {"rollback": 0.9833, "safety": 0.95},
    "guardrails": {
        "failureRate": {
            "tolerance": 1.0, "difference": 0.12, "ci": [-0.41, 0.85], "status": "safe",
            "users": {"treatment": 1200, "control": 3600}, "usersNeeded": None,
        },
        "latencyP95Ms": {
            "tolerance": 50.0, "difference": 12.5, "ci": [None, 61.0], "status": "undecided",
            "users": {"treatment": 1200, "control": 3600}, "usersNeeded": 4300,
        },
        "coverage": {
            "tolerance": 5.0, "difference": None, "ci": [None, None], "status": "undecided",
            "users": {"treatment": 1200, "control": 3600}, "usersNeeded": None,
        },
    },
}  # fmt: skip
"""The guardian's evidence at the second step (25 %), as ``pipelines.guardian`` writes it."""

WAITING = (
    "p95 latency not yet shown within 50 ms (interval [-12 ms, +85 ms], 1,200 treatment and "
    "3,600 control users so far): about 4,300 more users at 25 %"
)
"""A waiting step's reason in the words ``pipelines.guardian`` writes (guardrails by label)."""


@pytest.fixture
def tenant(dash_admin: Admin) -> Tenant:
    tenant = dash_admin.split_tenant(FLAG)
    dash_admin.flag(tenant.environment_id, "dark-mode", [{"type": "STATIC"}])
    return tenant


BLOCKS = re.compile(r"</?(?:t[dhr]|p|div|li|h\d|section|label|legend|caption|table|ol|ul)\b[^>]*>")


def readable(markup: str) -> str:
    """Markup as a person reads it: blocks and cells apart, inline tags dropped, entities
    decoded, spaces folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", BLOCKS.sub(" ", markup))).split())


def part(result: Any, attribute: str) -> str:
    """What a person reads in the first element carrying ``attribute`` (``name`` or
    ``name="value"``)."""
    found = re.search(
        rf"<(\w+)[^>]*\s{re.escape(attribute)}(?=[\s>=])[^>]*>(.*?)</\1>", result.text, re.S
    )
    assert found, f"no element with {attribute}"
    return readable(found[2])


def insights(tenant: Tenant, flag: str = FLAG) -> str:
    return f"/dashboard/environments/{tenant.environment_id}/flags/{flag}/insights"


def editor(tenant: Tenant, flag: str = FLAG) -> str:
    return f"/dashboard/environments/{tenant.environment_id}/flags/{flag}"


WATCHED = ("failureRate", "latencyP95Ms", "coverage")
"""The guardrails ``guarded_rollout`` watches, those ``GUARD`` has evidence for."""


def guarded_rollout(services: Services, tenant: Tenant, flag: str = FLAG) -> None:
    """A rollout at its second step (25 %) with the guardian's evidence and a wait noted."""
    store, env = services.store, tenant.environment_id
    plan = RolloutPlan(DEFAULT_STEPS, 10.0, WATCHED, (("latencyP95Ms", 50.0),))
    store.start_rollout(env, flag, plan)
    store.decide_rollout(env, flag, 0, RolloutAction.ADVANCED, "the first step shown safe", None)
    assert store.note_rollout(env, flag, 1, GUARD, WAITING)


# --- the start form ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "tolerances"),
    [
        ({"guardrail_failureRate": "on", "tolerance_failureRate": "2.5"}, {"failureRate": 2.5}),
        ({"guardrail_failureRate": "on", "tolerance_failureRate": " "}, {}),
        ({"tolerance_failureRate": "2.5"}, {}),  # not watched: not sent
        ({"guardrail_coverage": "on", "tolerance_coverage": "a lot"}, {"coverage": "a lot"}),
        ({"guardrail_latencyP95Ms": "on", "tolerance_latencyP95Ms": "80"}, {"latencyP95Ms": 80.0}),
    ],
)  # fmt: skip
def test_the_form_sends_a_tolerance_for_each_watched_guardrail_filled_in(
    fields: dict[str, str], tolerances: dict[str, object]
) -> None:
    form = Form([("steps", "5, 25, 100"), ("step_minutes", "10"), *fields.items()])
    assert plan_body(form)["tolerances"] == tolerances


def test_the_form_starts_from_the_admin_apis_plan_and_the_default_tolerances(
    person: DashClient, tenant: Tenant
) -> None:
    page = person.get(insights(tenant))
    steps = ", ".join(f"{step:g}" for step in DEFAULT_STEPS)
    assert f'name="steps" value="{steps}"' in page.text
    assert f'name="step_minutes" value="{DEFAULT_STEP_MINUTES:g}"' in page.text
    for guardrail in GUARDRAILS:
        value = f"{DEFAULT_TOLERANCES[guardrail]:g}"
        assert f'name="tolerance_{guardrail}" value="{value}"' in page.text
    form = part(page, 'aria-label="Start a guarded rollout"')
    assert "Failure rate Failure rate tolerance in percentage points pp" in form
    assert "p95 latency p95 latency tolerance in milliseconds ms" in form
    assert "Coverage Coverage tolerance in percentage points pp" in form
    assert "latencyP95Ms" not in form and "failureRate" not in form


def test_a_rollout_started_with_tolerances_keeps_them(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    person.get(insights(tenant))
    result = person.post(
        f"{editor(tenant)}/rollout",
        {"steps": "5, 25, 100", "step_minutes": "10", "guardrail_failureRate": "on",
         "tolerance_failureRate": "0.5", "guardrail_latencyP95Ms": "on",
         "tolerance_latencyP95Ms": "", "tolerance_coverage": "9"},
    )  # fmt: skip
    assert result.status_code == 303, result.text
    rollout = services.store.get_rollout(tenant.environment_id, FLAG)
    assert rollout.plan.tolerances == {"failureRate": 0.5, "latencyP95Ms": 50.0}
    page = person.get(insights(tenant))
    rows = {g: part(page, f'data-guardrail="{g}"') for g in ("failureRate", "latencyP95Ms")}
    assert rows["failureRate"].startswith("Failure rate 0.5 pp Not judged yet")
    assert rows["latencyP95Ms"].startswith("p95 latency 50 ms Not judged yet")
    assert 'data-guardrail="coverage"' not in page.text
    assert "guardrails: Failure rate, p95 latency." in part(page, "data-rollout-state")


def test_a_tolerance_that_is_not_a_number_is_refused_in_the_admin_apis_words(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    person.get(insights(tenant))
    result = person.post(
        f"{editor(tenant)}/rollout",
        {"steps": "5, 100", "step_minutes": "10", "guardrail_coverage": "on",
         "tolerance_coverage": "a lot"},
    )  # fmt: skip
    assert result.status_code == 400
    assert "Field 'tolerances' must give coverage a number" in part(result, "data-rollout-error")
    assert 'name="tolerance_coverage" value="a lot"' in result.text  # the input is kept
    assert services.store.get_rollout(tenant.environment_id, FLAG) is None


# --- the rollout panel ------------------------------------------------------------------------


def test_the_panel_shows_each_guardrails_tolerance_and_evidence_in_words(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    guarded_rollout(services, tenant)
    page = person.get(insights(tenant))
    assert "running · step 2 of 4 (25 %), 10 min a step" in part(page, "data-rollout-state")
    assert "guardrails: Failure rate, p95 latency, Coverage." in part(page, "data-rollout-state")
    assert WAITING in part(page, "data-rollout-waiting")
    meta = part(page, "data-guard-meta")
    assert "at step 2 of 4 (25 %)" in meta
    assert "rolls back once shown at 98.33 % confidence" in meta and "at 95 %" in meta
    rows = {g: part(page, f'data-guardrail="{g}"') for g in WATCHED}
    assert rows["failureRate"] == (
        "Failure rate 1 pp Shown within tolerance +0.12 pp -0.41 pp to +0.85 pp"
        " 1,200 treatment, 3,600 control —"
    )
    assert rows["latencyP95Ms"] == (
        "p95 latency 50 ms Not yet shown +12.5 ms up to +61.0 ms (lower end not bounded yet)"
        " 1,200 treatment, 3,600 control about 4,300 more users at 25 %"
    )
    assert rows["coverage"] == (
        "Coverage 5 pp Not yet shown — not bounded yet 1,200 treatment, 3,600 control —"
    )
    table = part(page, "data-guardrails")
    assert "failureRate" not in table and "latencyP95Ms" not in table
    assert "rolloutGuard" not in page.text


def test_a_regression_shown_reads_as_one(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    guarded_rollout(services, tenant)
    regressed = {**GUARD["guardrails"]["failureRate"], "difference": 2.4, "ci": [1.3, 3.5],
                 "status": "regression"}  # fmt: skip
    guard = {**GUARD, "guardrails": {**GUARD["guardrails"], "failureRate": regressed}}
    assert services.store.note_rollout(tenant.environment_id, FLAG, 1, guard, None)
    page = person.get(insights(tenant))
    row = part(page, 'data-guardrail="failureRate"')
    assert row.startswith("Failure rate 1 pp Regression shown +2.40 pp +1.30 pp to +3.50 pp")
    assert 'data-status="regression"' in page.text


def test_the_page_counts_steps_from_1_where_the_api_indexes_them_from_0(
    person: DashClient, dash_admin: Admin, tenant: Tenant, services: Services
) -> None:
    """The API's ``"step": 1`` of ``[10, 25, 50, 100]`` is "step 2 of 4 (25 %)" on the page,
    its decisions' steps too, and a rolled-back rollout says where it stood and where it is."""
    guarded_rollout(services, tenant)
    api = dash_admin.request(
        "GET", f"/environments/{tenant.environment_id}/flags/{FLAG}/rollout", expect=200
    )
    assert (api["step"], api["steps"], api["decisions"][0]["step"]) == (1, [10, 25, 50, 100], 0)
    page = person.get(insights(tenant))
    assert "step 2 of 4 (25 %)" in part(page, "data-rollout-state")
    decision = part(page, "data-decision")
    assert decision.endswith(" UTC 1 of 4 (10 %) advanced 25 % the first step shown safe")

    services.store.decide_rollout(
        tenant.environment_id, FLAG, 1, RolloutAction.ROLLED_BACK, "a regression", None
    )
    state = part(person.get(insights(tenant)), "data-rollout-state")
    assert state.startswith("rolledBack · step 2 of 4 (25 %), now at 0 %, 10 min a step")


def test_one_more_user_needed_is_said_in_the_singular(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    guarded_rollout(services, tenant)
    almost = {**GUARD["guardrails"]["latencyP95Ms"], "usersNeeded": 1}
    guard = {**GUARD, "guardrails": {**GUARD["guardrails"], "latencyP95Ms": almost}}
    assert services.store.note_rollout(tenant.environment_id, FLAG, 1, guard, None)
    row = part(person.get(insights(tenant)), 'data-guardrail="latencyP95Ms"')
    assert row.endswith(" 1,200 treatment, 3,600 control about 1 more user at 25 %")


# --- the health view --------------------------------------------------------------------------


def publish_health(warehouse: Path, environment_id: str, rows: list[dict[str, Any]]) -> None:
    """``flag_health`` rows in a warehouse with the pipeline's schema, renamed into place as
    the pipeline publishes (columns not given are null; a row's ``comparisons`` are its
    ``health_comparisons`` rows by name, ``tests.support.health_rows``)."""
    scratch = warehouse.with_suffix(".test.duckdb")
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(scratch))
    try:
        migrate(con)
        for row in rows:
            health = {key: value for key, value in row.items() if key != "comparisons"}
            values = {"environment_id": environment_id, "organization_id": "org", **health}
            insert_health(con, values, row.get("comparisons"))
            con.execute(  # a day of figures: the page shows health beside its metrics
                "INSERT INTO flag_value_daily_stats VALUES (?, ?, current_date, true, 'org',"
                " 2000, 1800, 1700, 100, 2.0e5, 1800)",
                [environment_id, row["flag_key"]],
            )
        con.execute(
            "INSERT INTO environment_keys VALUES (?, 'production', now())", [environment_id]
        )
        run_script(con, "flag_environment_daily")
        run_script(con, "flag_environment_metrics")
        con.execute(  # what the published file says of itself (``warehouse/sql/publish.sql``)
            "CREATE TABLE warehouse_info AS SELECT current_timestamp AS published_at,"
            " 0 AS pending_feedback_count"
        )
    finally:
        con.close()
    scratch.replace(warehouse)


def split_health(flag: str, percentage: float, treatment: int, control: int) -> dict[str, Any]:
    """A flag's health at ``percentage``: every decision withheld for want of users."""
    return {
        "flag_key": flag, "rollout_percentage": percentage,
        "treatment_users": treatment, "treatment_users_with_feedback": treatment,
        "control_users": control, "control_users_with_feedback": control,
        "sample_ratio_expected": percentage / 100, "sample_ratio_observed": percentage / 100,
        "sample_ratio_p_value": 1.0, "sample_ratio_mismatch": False,
        "withheld_reason": "below_minimum_sample",
        "comparisons": {name: {"withheld_reason": "below_minimum_sample"} for name in GUARDRAILS},
    }  # fmt: skip


COVERAGE_GAP = {
    **split_health(FLAG, 50, 900, 900),
    "treatment_users_with_feedback": 698, "control_users_with_feedback": 810,
    "treatment_coverage": 77.5, "control_coverage": 90.0,
    "treatment_failure_rate": 2.4, "control_failure_rate": 2.0,
    "treatment_latency_p95_ms": 212.0, "control_latency_p95_ms": 208.0,
    "comparisons": {
        "failureRate": {"difference": 0.4, "ci_low": -1.1, "ci_high": 1.9,
                        "decision": "inconclusive"},
        "latencyP95Ms": {"difference": 4.0, "ci_low": -20.0, "ci_high": 28.0,
                         "decision": "inconclusive"},
        "coverage": {"difference": -12.5, "ci_low": -20.1, "ci_high": -4.9,
                     "decision": "regression"},
    },
    "withheld_reason": None,
}  # fmt: skip


def test_the_health_view_compares_coverage_beside_failure_rate_and_p95(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    warehouse = services.settings.warehouse_path
    publish_health(warehouse, tenant.environment_id, [COVERAGE_GAP])
    page = person.get(insights(tenant))
    assert re.findall(r'data-comparison="(\w+)"', page.text) == list(GUARDRAILS)
    coverage = part(page, 'data-comparison="coverage"')
    assert coverage.startswith("Coverage regression Regression: treatment is worse than control.")
    assert "Treatment minus control: -12.50 pp, interval -20.10 to -4.90 pp." in coverage
    drawn = re.search(
        r'<svg class="([^"]*)"[^>]*><title[^>]*>Coverage difference</title>', page.text
    )
    assert drawn, "no coverage interval drawn"
    assert "interval-regression" in drawn[1].split()  # a fall in coverage reads as a regression
    assert "p95 latency inconclusive" in part(page, 'data-comparison="latencyP95Ms"')


@pytest.mark.parametrize(
    ("percentage", "treatment", "control"), [(100, 800, 0), (99.5, 800, 0)]
)  # fmt: skip
def test_at_100_percent_the_health_view_says_there_is_no_control_arm(
    person: DashClient, tenant: Tenant, services: Services, percentage: float, treatment: int,
    control: int,
) -> None:  # fmt: skip
    warehouse = services.settings.warehouse_path
    publish_health(warehouse, tenant.environment_id,
                   [split_health(FLAG, percentage, treatment, control)])  # fmt: skip
    page = person.get(insights(tenant))
    for guardrail in GUARDRAILS:
        said = part(page, f'data-comparison="{guardrail}"')
        assert "No control arm any more" in said and "no one left to compare" in said
        assert "too few users" not in said.lower()


def test_with_few_users_in_both_arms_the_health_view_says_too_few(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    warehouse = services.settings.warehouse_path
    publish_health(warehouse, tenant.environment_id, [split_health(FLAG, 50, 40, 35)])
    said = part(person.get(insights(tenant)), 'data-comparison="failureRate"')
    assert "Too few users with feedback yet (a decision needs at least 200" in said
    assert "No control arm" not in said


# --- the flags list and the flag editor -------------------------------------------------------


def test_the_flags_list_shows_a_running_rollout_and_its_percentage(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    guarded_rollout(services, tenant)
    page = person.get(f"/dashboard/environments/{tenant.environment_id}/flags")
    badges = re.findall(r"<a [^>]*data-rollout-badge[^>]*>(.*?)</a>", page.text)
    assert [re.sub(r"<[^>]+>", "", b) for b in badges] == [
        "Rollout at 25 %: the guarded rollout of checkout"
    ]
    assert f'href="{insights(tenant)}#rollout" data-rollout-badge' in page.text
    services.store.stop_rollout(tenant.environment_id, FLAG)
    page = person.get(f"/dashboard/environments/{tenant.environment_id}/flags")
    assert "data-rollout-badge" not in page.text


def test_the_flags_list_shows_no_badge_for_another_environments_rollout(
    person: DashClient, tenant: Tenant, dash_admin: Admin, services: Services
) -> None:
    """A flag of the same key in another tenant, its guarded rollout running: this
    environment's list says nothing of it."""
    other = dash_admin.split_tenant(FLAG)
    guarded_rollout(services, other)
    page = person.get(f"/dashboard/environments/{tenant.environment_id}/flags")
    assert f"/flags/{FLAG}" in page.text
    assert "data-rollout-badge" not in page.text


def test_the_editor_says_a_rollout_is_running(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    assert "data-rollout-running" not in person.get(editor(tenant)).text
    guarded_rollout(services, tenant)
    banner = part(person.get(editor(tenant)), "data-rollout-running")
    assert banner.startswith("A guarded rollout is running: step 2 of 4 (25 %).")
    assert "stop the rollout first" in banner


def editor_form(percentage: str, *extra: tuple[str, str]) -> list[tuple[str, str]]:
    """The editor's draft of the tenant's flag with its split at ``percentage``."""
    return [
        ("enabled", "on"), ("op", "save"),
        ("rule_type", "PERCENTAGE"), ("rule_percentage", percentage), ("rule_value", "true"),
        ("rule_type", "STATIC"), ("rule_percentage", ""), ("rule_value", "false"), *extra,
    ]  # fmt: skip


def split_of(services: Services, tenant: Tenant) -> float:
    return services.store.get_flag(tenant.environment_id, FLAG).rules[0].percentage


def test_a_save_that_moves_a_running_rollouts_split_asks_first(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    guarded_rollout(services, tenant)
    person.get(editor(tenant))
    version = services.store.config_version()
    result = person.post(editor(tenant), editor_form("60"))
    assert result.status_code == 409
    assert services.store.config_version() == version and split_of(services, tenant) == 25
    warning = part(result, "data-split-warning")
    assert warning.startswith("Not saved: this changes the percentage a running rollout sets.")
    assert "would serve 60 %, where the rollout set 25 %" in warning
    assert "The guardian would then wait" in warning
    assert "at a percentage the rollout did not set" in warning
    assert "Stopping the rollout first is advised" in warning
    assert 'name="confirm_percentage_change" value="yes"' in result.text
    assert re.search(r'name="rule_percentage"[^>]*value="60"', result.text)  # the draft kept

    result = person.post(editor(tenant), editor_form("60", ("confirm_percentage_change", "yes")))
    assert result.status_code == 303 and split_of(services, tenant) == 60


def test_removing_a_running_rollouts_split_asks_first_too(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    guarded_rollout(services, tenant)
    person.get(editor(tenant))
    result = person.post(editor(tenant), [("enabled", "on"), ("op", "save")])
    assert result.status_code == 409
    assert "The first percentage rule would be removed, where the rollout set 25 %" in part(
        result, "data-split-warning"
    )


def test_a_save_that_keeps_the_split_or_has_no_running_rollout_is_not_asked_about(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    person.get(editor(tenant))
    result = person.post(editor(tenant), editor_form("30"))  # no rollout
    assert result.status_code == 303 and split_of(services, tenant) == 30
    guarded_rollout(services, tenant)
    result = person.post(editor(tenant), [*editor_form("25")[:-1], ("rule_value", "true")])
    assert result.status_code == 303  # the split kept, another rule changed
    assert services.store.get_flag(tenant.environment_id, FLAG).rules[1].value is True
    services.store.decide_rollout(
        tenant.environment_id, FLAG, 1, RolloutAction.HELD, "sample ratio mismatch", None
    )
    result = person.post(editor(tenant), editor_form("40"))  # held: nothing moves on its own
    assert result.status_code == 303 and split_of(services, tenant) == 40
