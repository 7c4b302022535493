"""Metrics through the admin API (contract 13): an organization's metrics, the metrics a flag
follows, metric guardrails of a guarded rollout, their audit records and restores. Every
answer is checked against the OpenAPI document by the client."""

from __future__ import annotations

from typing import Any

import pytest

from tests.admin.conftest import TIMESTAMP, AdminClient

CHECKOUT = {
    "name": "Checkout", "event": "checkout", "kind": "conversion", "windowHours": 72,
    "better": "higher",
}  # fmt: skip
REVENUE = {
    "name": "Revenue",
    "event": "order",
    "kind": "sum",
    "windowHours": 24,
    "better": "higher",
}
PERCENTAGE = [{"type": "PERCENTAGE", "percentage": 0}]


@pytest.fixture
def metrics(org: dict) -> str:
    return f"/organizations/{org['id']}/metrics"


@pytest.fixture
def flag(admin_api: AdminClient, env: dict) -> str:
    path = f"/environments/{env['id']}/flags/new-checkout"
    assert admin_api.put(path, {"enabled": True, "rules": PERCENTAGE}).status == 201
    return path


def _put(admin_api: AdminClient, metrics: str, key: str, body: dict[str, Any]) -> Any:
    return admin_api.put(f"{metrics}/{key}", body)


def test_a_metric_is_created_read_listed_replaced_and_deleted(
    admin_api: AdminClient, metrics: str
) -> None:
    created = _put(admin_api, metrics, "checkout", CHECKOUT)
    assert created.status == 201
    body = created.body
    assert {k: body[k] for k in CHECKOUT} == CHECKOUT
    assert body["key"] == "checkout" and TIMESTAMP.fullmatch(body["createdAt"])
    assert body["updatedAt"] == body["createdAt"]
    assert admin_api.get(f"{metrics}/checkout").body == body
    assert _put(admin_api, metrics, "revenue", REVENUE).status == 201
    listed = admin_api.get(metrics)
    assert listed.status == 200
    assert [m["key"] for m in listed.body["items"]] == ["checkout", "revenue"]
    assert listed.body["items"][0] == body

    replaced = _put(admin_api, metrics, "checkout", {**CHECKOUT, "name": "Checkouts"})
    assert replaced.status == 200
    assert (replaced.body["name"], replaced.body["createdAt"]) == ("Checkouts", body["createdAt"])

    assert admin_api.delete(f"{metrics}/checkout").status == 204
    assert admin_api.get(f"{metrics}/checkout").status == 404
    gone = admin_api.delete(f"{metrics}/checkout")
    assert (gone.status, gone.body["message"]) == (
        404, "Metric 'checkout' does not exist in this organization",
    )  # fmt: skip
    assert [m["key"] for m in admin_api.get(metrics).body["items"]] == ["revenue"]


def test_an_unknown_organization_is_404(admin_api: AdminClient) -> None:
    path = "/organizations/org_0000000000000000/metrics"
    assert admin_api.get(path).status == 404
    assert admin_api.get(f"{path}/checkout").status == 404
    assert admin_api.put(f"{path}/checkout", CHECKOUT).status == 404


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": None}, "name"),
        ({"name": ""}, "name"),
        ({"event": "a b"}, "event"),
        ({"event": None}, "event"),
        ({"kind": "ratio"}, "kind"),
        ({"windowHours": 0}, "windowHours"),
        ({"windowHours": 721}, "windowHours"),
        ({"windowHours": 1.5}, "windowHours"),
        ({"windowHours": "72"}, "windowHours"),
        ({"better": "up"}, "better"),
    ],
)
def test_a_bad_metric_is_400_naming_its_field(
    admin_api: AdminClient, metrics: str, change: dict, field: str
) -> None:
    body = {k: v for k, v in {**CHECKOUT, **change}.items() if v is not None}
    answer = _put(admin_api, metrics, "checkout", body)
    assert answer.status == 400
    assert f"'{field}'" in answer.body["message"]
    assert admin_api.get(metrics).body["items"] == []


def test_the_window_is_1_to_720_hours(admin_api: AdminClient, metrics: str) -> None:
    for hours in (1, 720):
        assert (
            _put(admin_api, metrics, f"w{hours}", {**CHECKOUT, "windowHours": hours}).status == 201
        )
    answer = _put(admin_api, metrics, "w721", {**CHECKOUT, "windowHours": 721})
    assert answer.body["message"] == "Field 'windowHours' must be an integer from 1 to 720"


def test_a_malformed_metric_key_is_400(admin_api: AdminClient, metrics: str) -> None:
    answer = _put(admin_api, metrics, "a%20b", CHECKOUT)
    assert (answer.status, "'metricKey'" in answer.body["message"]) == (400, True)


def test_a_flag_follows_metrics_of_its_organization(
    admin_api: AdminClient, metrics: str, flag: str
) -> None:
    _put(admin_api, metrics, "checkout", CHECKOUT)
    _put(admin_api, metrics, "revenue", REVENUE)
    followed = f"{flag}/followed-metrics"
    assert admin_api.get(followed).body == {"metrics": []}
    answer = admin_api.put(f"{flag}/metrics", {"metrics": ["revenue", "checkout"]})
    assert (answer.status, answer.body) == (200, {"metrics": ["revenue", "checkout"]})
    assert admin_api.get(followed).body == {"metrics": ["revenue", "checkout"]}

    unknown = admin_api.put(f"{flag}/metrics", {"metrics": ["checkout", "ghost"]})
    assert (unknown.status, unknown.body["message"]) == (
        400, "Field 'metrics[1]' names metric 'ghost', which does not exist in this organization",
    )  # fmt: skip
    twice = admin_api.put(f"{flag}/metrics", {"metrics": ["checkout", "checkout"]})
    assert (twice.status, twice.body["message"]) == (400, "Field 'metrics' names a metric twice")
    for body in ({}, {"metrics": "checkout"}, {"metrics": ["a b"]}):
        refused = admin_api.put(f"{flag}/metrics", body)
        assert (refused.status, "'metrics" in refused.body["message"]) == (400, True)
    assert admin_api.get(followed).body == {"metrics": ["revenue", "checkout"]}

    assert admin_api.put(f"{flag}/metrics", {"metrics": []}).body == {"metrics": []}
    assert admin_api.get(followed).body == {"metrics": []}


def test_a_flag_cannot_follow_another_organizations_metric(
    admin_api: AdminClient, metrics: str, flag: str
) -> None:
    other = admin_api.organization()
    assert (
        _put(admin_api, f"/organizations/{other['id']}/metrics", "theirs", CHECKOUT).status == 201
    )
    refused = admin_api.put(f"{flag}/metrics", {"metrics": ["theirs"]})
    assert (refused.status, "'metrics[0]'" in refused.body["message"]) == (400, True)


def test_follows_of_a_missing_flag_or_environment_are_404(
    admin_api: AdminClient, metrics: str, env: dict
) -> None:
    _put(admin_api, metrics, "checkout", CHECKOUT)
    missing = f"/environments/{env['id']}/flags/missing"
    assert admin_api.put(f"{missing}/metrics", {"metrics": ["checkout"]}).status == 404
    assert admin_api.get(f"{missing}/followed-metrics").status == 404
    not_a_key = f"/environments/{env['id']}/flags/a%20b/metrics"  # evaluated keys are any
    assert admin_api.put(not_a_key, {"metrics": ["checkout"]}).status == 404
    nowhere = "/environments/env_0000000000000000/flags/missing"
    assert admin_api.put(f"{nowhere}/metrics", {"metrics": ["checkout"]}).status == 404
    assert admin_api.get(f"{nowhere}/followed-metrics").status == 404


def test_the_warehouse_row_stays_at_get_of_the_flags_metrics(
    admin_api: AdminClient, metrics: str, flag: str, env: dict
) -> None:
    _put(admin_api, metrics, "checkout", CHECKOUT)
    admin_api.put(f"{flag}/metrics", {"metrics": ["checkout"]})
    answer = admin_api.get(f"{flag}/metrics")
    assert (answer.status, answer.body["message"]) == (
        404, f"No metrics for flag 'new-checkout' in environment '{env['id']}' yet: the"
        " insights pipeline has not aggregated it",
    )  # fmt: skip


def test_deleting_a_metric_or_the_flag_drops_the_follows(
    admin_api: AdminClient, metrics: str, flag: str
) -> None:
    _put(admin_api, metrics, "checkout", CHECKOUT)
    _put(admin_api, metrics, "revenue", REVENUE)
    admin_api.put(f"{flag}/metrics", {"metrics": ["checkout", "revenue"]})
    assert admin_api.delete(f"{metrics}/checkout").status == 204
    assert admin_api.get(f"{flag}/followed-metrics").body == {"metrics": ["revenue"]}
    assert admin_api.delete(flag).status == 204
    assert admin_api.put(flag, {"enabled": True, "rules": PERCENTAGE}).status == 201
    assert admin_api.get(f"{flag}/followed-metrics").body == {"metrics": []}


def test_a_metric_a_running_rollout_guards_on_is_not_deleted(
    admin_api: AdminClient, metrics: str, flag: str
) -> None:
    _put(admin_api, metrics, "checkout", CHECKOUT)
    plan = {"steps": [10, 100], "guardrails": ["failureRate", "metric:checkout"]}
    started = admin_api.put(f"{flag}/rollout", plan)
    assert started.status == 200
    assert started.body["guardrails"] == ["failureRate", "metric:checkout"]
    assert started.body["tolerances"] == {"failureRate": 1.0, "metric:checkout": 1.0}
    refused = admin_api.delete(f"{metrics}/checkout")
    assert (refused.status, refused.body["message"]) == (
        409, "Metric 'checkout' is guarded on by the rollout of flag 'new-checkout' in"
        " environment 'production'; stop that rollout first",
    )  # fmt: skip
    kind = _put(admin_api, metrics, "checkout", {**CHECKOUT, "kind": "count"})
    assert (kind.status, "cannot become a count metric" in kind.body["message"]) == (409, True)
    assert _put(admin_api, metrics, "checkout", {**CHECKOUT, "windowHours": 24}).status == 200
    assert admin_api.get(f"{metrics}/checkout").status == 200
    assert admin_api.delete(f"{flag}/rollout").status == 204
    assert admin_api.delete(f"{metrics}/checkout").status == 204


def test_an_unknown_metric_guardrail_is_400_naming_guardrails(
    admin_api: AdminClient, flag: str
) -> None:
    answer = admin_api.put(f"{flag}/rollout", {"guardrails": ["coverage", "metric:ghost"]})
    assert (answer.status, answer.body["message"]) == (
        400, "Field 'guardrails[1]' guards on metric 'ghost', which does not exist in this"
        " organization",
    )  # fmt: skip
    assert admin_api.get(f"{flag}/rollout").status == 404
    for guardrail in ("metric:", "metric:a b", "metrics:checkout"):
        refused = admin_api.put(f"{flag}/rollout", {"guardrails": [guardrail]})
        assert (refused.status, "'guardrails" in refused.body["message"]) == (400, True)


@pytest.mark.parametrize("kind", ["count", "sum", "mean"])
def test_a_count_sum_or_mean_guardrail_needs_a_tolerance(
    admin_api: AdminClient, metrics: str, flag: str, kind: str
) -> None:
    _put(admin_api, metrics, "m", {**REVENUE, "kind": kind})
    plan = {"steps": [10, 100], "guardrails": ["metric:m"]}
    refused = admin_api.put(f"{flag}/rollout", plan)
    assert (refused.status, refused.body["message"]) == (
        400, f"Field 'tolerances' must give metric:m a tolerance: a {kind} metric's difference"
        " is in its events' own unit, which has no default",
    )  # fmt: skip
    started = admin_api.put(f"{flag}/rollout", {**plan, "tolerances": {"metric:m": 2.5}})
    assert (started.status, started.body["tolerances"]) == (200, {"metric:m": 2.5})
    assert admin_api.get(f"{flag}/rollout").body["tolerances"] == {"metric:m": 2.5}


@pytest.mark.parametrize(
    ("tolerances", "words"),
    [
        ({"metric:checkout": 100.5},
         "Field 'tolerances' must give metric:checkout a number above 0 and at most 100 (pp)"),
        ({"metric:checkout": 0}, "Field 'tolerances' must give metric:checkout a number above 0"),
        ({"metric:checkout": True},
         "Field 'tolerances' must give metric:checkout a number above 0"),
        ({"metric:other": 1}, "Field 'tolerances' names 'metric:other', which is not one of the"
                              " rollout's guardrails (metric:checkout)"),
    ],
)  # fmt: skip
def test_a_conversion_guardrail_tolerance_is_in_points(
    admin_api: AdminClient, metrics: str, flag: str, tolerances: dict, words: str
) -> None:
    _put(admin_api, metrics, "checkout", CHECKOUT)
    plan = {"steps": [10, 100], "guardrails": ["metric:checkout"], "tolerances": tolerances}
    answer = admin_api.put(f"{flag}/rollout", plan)
    assert (answer.status, answer.body["message"]) == (400, words)
    fine = admin_api.put(f"{flag}/rollout", {**plan, "tolerances": {"metric:checkout": 0.5}})
    assert (fine.status, fine.body["tolerances"]) == (200, {"metric:checkout": 0.5})


def _audit(admin_api: AdminClient, org: dict) -> list[dict]:
    return admin_api.get(f"/organizations/{org['id']}/audit").body["items"]


def test_metric_changes_are_audited_and_restored(
    admin_api: AdminClient, org: dict, metrics: str
) -> None:
    first = _put(admin_api, metrics, "checkout", CHECKOUT).body
    _put(admin_api, metrics, "checkout", {**CHECKOUT, "better": "lower"})
    change = _audit(admin_api, org)[0]
    target = f"metric:{org['id']}/checkout"
    assert (change["action"], change["actor"], change["target"]) == (
        "metric.put", "admin-api", target,
    )  # fmt: skip
    assert (change["before"], change["after"]["better"]) == (first, "lower")
    restored = admin_api.post(f"/audit/{change['id']}/restore")
    assert (restored.status, restored.body["restoredFrom"]) == (201, change["id"])
    assert admin_api.get(f"{metrics}/checkout").body == first

    admin_api.delete(f"{metrics}/checkout")
    deletion = _audit(admin_api, org)[0]
    assert (deletion["action"], deletion["before"], deletion["after"]) == (
        "metric.deleted", first, None,
    )  # fmt: skip
    assert admin_api.post(f"/audit/{deletion['id']}/restore").status == 201
    assert admin_api.get(f"{metrics}/checkout").body == first


def test_follow_changes_are_audited_and_restored(
    admin_api: AdminClient, org: dict, env: dict, metrics: str, flag: str
) -> None:
    _put(admin_api, metrics, "checkout", CHECKOUT)
    _put(admin_api, metrics, "revenue", REVENUE)
    admin_api.put(f"{flag}/metrics", {"metrics": ["checkout"]})
    admin_api.put(f"{flag}/metrics", {"metrics": ["revenue"]})
    change = _audit(admin_api, org)[0]
    assert (change["action"], change["target"], change["before"], change["after"]) == (
        "flagMetrics.put", f"flagMetrics:{env['id']}/new-checkout", {"metrics": ["checkout"]},
        {"metrics": ["revenue"]},
    )  # fmt: skip
    assert admin_api.post(f"/audit/{change['id']}/restore").status == 201
    assert admin_api.get(f"{flag}/followed-metrics").body == {"metrics": ["checkout"]}
    admin_api.delete(f"{metrics}/checkout")
    refused = admin_api.post(f"/audit/{change['id']}/restore")
    assert (refused.status, refused.body["message"]) == (
        409, f"Audit record '{change['id']}' (flagMetrics.put of {change['target']}) cannot be"
        " restored: metric 'checkout' has been deleted since",
    )  # fmt: skip
