"""Outcomes beyond success end to end (contract section 13): metrics defined and followed
through the admin API, users evaluated and events tracked through the public API, the lake
sealed, ``flagsight pipeline run``'s run over it, and the health answer and the guardian read
back: per-arm means equal an independent count for each kind, events before a user's exposure
and users never exposed count nowhere, the decision follows the metric's ``better``, and a
metric guardrail rolls a guarded rollout back."""

from __future__ import annotations

import os
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from pipelines.assets.published_warehouse import OUTCOMES_REFRESH_S
from pipelines.cli import run_pipeline_once
from tests.pipelines.test_notebook import execute_notebook, printed
from tests.support.admin import Admin, Tenant
from warehouse import read

FLAG = "new-checkout"
USERS = 1_400
"""Per flag: about 700 per arm at 50 %, above the means' minimum of 500 per arm."""


def _evaluate(client, tenant: Tenant, flag: str, users: list[str]) -> dict[str, bool]:
    """Each user's value (True: treatment) from one bulk evaluation."""
    answer = client.simulate_post(
        "/v1/evaluate/bulk", json={"flagKey": flag, "userIdentifiers": users},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    return {user: entry["value"] for user, entry in answer.json.items()}


def _track(client, tenant: Tenant, events: list[dict]) -> None:
    for start in range(0, len(events), 500):
        answer = client.simulate_post(
            "/v1/track", json={"events": events[start : start + 500]},
            headers={"Authorization": f"ApiKey {tenant.api_key}"},
        )  # fmt: skip
        assert answer.status_code == 204, answer.text


def _metric(admin: Admin, tenant: Tenant, key: str, event: str, kind: str, better: str) -> None:
    body = {"name": key.title(), "event": event, "kind": kind, "windowHours": 72, "better": better}
    admin.request("PUT", f"/organizations/{tenant.organization_id}/metrics/{key}", body, expect=201)


def _run_pipeline(services) -> None:
    services.event_log.seal_now()
    run_pipeline_once(services.settings, echo=lambda line: None)


def _at(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@pytest.fixture
def split(admin: Admin, tenant: Tenant) -> str:
    admin.flag(tenant.environment_id, FLAG, [{"type": "PERCENTAGE", "percentage": 50}])
    return FLAG


def test_per_arm_means_equal_an_independent_count_for_each_kind(
    client, services, admin: Admin, tenant: Tenant, split: str, monkeypatch
) -> None:
    kinds = {"converted": "conversion", "orders": "count", "revenue": "sum", "basket": "mean"}
    for key, kind in kinds.items():
        _metric(admin, tenant, key, "purchase", kind, "higher")
    _metric(admin, tenant, "refunds", "purchase", "count", "lower")
    follows = {"metrics": [*kinds, "refunds"]}
    path = f"/environments/{tenant.environment_id}/flags/{split}"
    assert admin.request("PUT", f"{path}/metrics", follows, expect=200) == follows

    users = [f"shopper-{n}" for n in range(USERS)]
    before = datetime.now(UTC) - timedelta(hours=1)
    _track(client, tenant, [  # before their exposure: in no window
        {"name": "purchase", "userIdentifier": user, "value": 1_000.0, "at": _at(before)}
        for user in users[::3]
    ])  # fmt: skip
    arms = _evaluate(client, tenant, split, users)
    rng = random.Random(42)
    events, sent = [], defaultdict(list)
    for user, treated in arms.items():
        for _ in range(rng.choices([0, 1, 2, 3], [4, 3, 2, 1] if treated else [6, 2, 1, 1])[0]):
            value = float(rng.randint(5, 80))
            events.append({"name": "purchase", "userIdentifier": user, "value": value})
            sent[user].append(value)
    events += [
        {"name": "purchase", "userIdentifier": f"ghost-{n}", "value": 9.0} for n in range(50)
    ]  # fmt: skip  never exposed: counted nowhere
    _track(client, tenant, events)
    _run_pipeline(services)

    metrics = admin.request("GET", f"{path}/health", expect=200)["metrics"]
    assert set(metrics) == {*kinds, "refunds"}
    for arm, treated in (("treatment", True), ("control", False)):
        group = [user for user, value in arms.items() if value is treated]
        values = [v for user in group for v in sent[user]]
        expected = {
            "converted": 100.0 * sum(bool(sent[user]) for user in group) / len(group),
            "orders": len(values) / len(group),
            "revenue": sum(values) / len(group),
            "basket": sum(values) / len(values),
        }
        for key, mean in expected.items():
            assert metrics[key][arm]["users"] == len(group), (key, arm)
            assert metrics[key][arm]["mean"] == pytest.approx(mean, rel=1e-12), (key, arm)
    for key in ("converted", "orders", "revenue"):
        assert metrics[key]["decision"] == "improvement", (key, metrics[key])
        assert metrics[key]["ci"][0] > 0
    assert metrics["refunds"]["decision"] == "regression"  # more of them, and lower is better
    assert metrics["orders"]["varianceReduction"] is not None

    # For analysts (outcomes.duckdb): the users' events, each once, and a row per metric and
    # exposed user; none of it in the snapshot every run publishes.
    con = read.connect_readonly(read.outcomes_path(services.settings.warehouse_path))
    try:
        published = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE starts_with(user_identifier, 'ghost-')) "
            "FROM track_events"
        ).fetchone()
        per_metric = con.execute("SELECT count(*) FROM metric_users").fetchone()[0]
    finally:
        con.close()
    assert published == (len(events) - 50 + len(users[::3]), 0)  # those before exposure too
    assert per_metric == len(users) * len(follows["metrics"])
    con = read.connect_readonly(services.settings.warehouse_path)
    try:
        tables = {
            name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        }
    finally:
        con.close()
    assert "health_comparisons" in tables and not tables & {"metric_users", "track_events"}

    # The notebook's last section reproduces the first metric's comparison by hand.
    outputs = execute_notebook(
        services.settings.data_dir, monkeypatch, tenant.environment_id, split
    )
    basket = metrics["basket"]
    said = printed(outputs)
    assert f"metric:basket (mean) treatment: {basket['treatment']['users']} users" in said
    assert f"difference {basket['difference']} (pipeline {basket['difference']})" in said


def test_a_metric_guardrail_rolls_a_guarded_rollout_back(
    client, services, admin: Admin, tenant: Tenant
) -> None:
    admin.flag(tenant.environment_id, FLAG, [{"type": "PERCENTAGE", "percentage": 0}])
    _metric(admin, tenant, "payment_errors", "payment_error", "count", "lower")
    rollout_path = f"/environments/{tenant.environment_id}/flags/{FLAG}/rollout"
    plan = {"steps": [50, 100], "stepMinutes": 60, "guardrails": ["metric:payment_errors"],
            "tolerances": {"metric:payment_errors": 0.05}}  # fmt: skip
    admin.request("PUT", rollout_path, plan, expect=200)
    arms = _evaluate(client, tenant, FLAG, [f"payer-{n}" for n in range(USERS)])
    rng = random.Random(3)
    _track(client, tenant, [
        {"name": "payment_error", "userIdentifier": user}
        for user, treated in arms.items() if rng.random() < (0.5 if treated else 0.05)
    ])  # fmt: skip
    _run_pipeline(services)

    rollout = admin.request("GET", rollout_path, expect=200)
    assert rollout["state"] == "rolledBack", rollout
    (decision,) = rollout["decisions"]
    assert decision["reason"].startswith("regression: Payment_Errors (treatment - control +")
    guard = decision["statistics"]["guard"]["guardrails"]["metric:payment_errors"]
    assert guard["status"] == "regression" and guard["ci"][0] > 0


def test_the_per_user_tables_are_published_at_most_every_ten_minutes(
    client, services, admin: Admin, tenant: Tenant, split: str
) -> None:
    _metric(admin, tenant, "orders", "purchase", "count", "higher")
    path = f"/environments/{tenant.environment_id}/flags/{split}/metrics"
    admin.request("PUT", path, {"metrics": ["orders"]}, expect=200)
    _evaluate(client, tenant, split, ["early"])
    _run_pipeline(services)
    outcomes = read.outcomes_path(services.settings.warehouse_path)

    def rows() -> int:
        con = read.connect_readonly(outcomes)
        try:
            return con.execute("SELECT count(*) FROM metric_users").fetchall()[0][0]
        finally:
            con.close()

    assert rows() == 1
    _evaluate(client, tenant, split, ["late"])
    _run_pipeline(services)
    assert rows() == 1  # published a moment ago: not again yet
    stale = outcomes.stat().st_mtime - OUTCOMES_REFRESH_S
    os.utime(outcomes, (stale, stale))
    _run_pipeline(services)
    assert rows() == 2
