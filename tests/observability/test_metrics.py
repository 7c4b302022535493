"""/metrics tells an operator what was answered: requests by route and status, outcomes."""

from __future__ import annotations

import re

from api.observability.tallies import outcome_label


def metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    match = re.search(rf"^{name}\{{{re.escape(wanted)}\}} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def test_requests_and_evaluation_outcomes_are_counted(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC", "value": True}])
    auth = {"Authorization": f"ApiKey {tenant.api_key}"}
    for _ in range(3):
        client.simulate_post(
            "/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, headers=auth
        )
    client.simulate_post(
        "/v1/evaluate", json={"flagKey": "nope", "userIdentifier": "u"}, headers=auth
    )
    client.simulate_post(
        "/v1/evaluate/bulk", json={"flagKey": "f", "userIdentifiers": ["a", "b"]}, headers=auth
    )
    client.simulate_post("/v1/evaluate", json={"flagKey": "f"}, headers=auth)
    client.simulate_get("/no/such/path")
    text = client.simulate_get("/metrics").text
    assert metric(text, "flagsight_http_requests_total", route="/v1/evaluate", status="200") == 4
    assert metric(text, "flagsight_http_requests_total", route="/v1/evaluate", status="400") == 1
    assert (
        metric(text, "flagsight_http_requests_total", route="/v1/evaluate/bulk", status="200") == 1
    )
    assert metric(text, "flagsight_http_requests_total", route="unmatched", status="404") == 1
    assert metric(text, "flagsight_http_request_seconds_total", route="/v1/evaluate") > 0
    assert metric(text, "flagsight_evaluations_total", outcome="STATIC:true") == 5
    assert metric(text, "flagsight_evaluations_total", outcome="FLAG_NOT_FOUND") == 1
    # The event log counts its appends in memory; /metrics adds them before rendering.
    assert metric(text, "flagsight_events_logged_total", type="evaluation") == 6


def test_outcome_labels() -> None:
    assert [outcome_label(c) for c in (0, 1, 6, 10)] == [
        "NO_MATCH",
        "STATIC:true",
        "PERCENTAGE:false",
        "PLAN_LIMIT_EXCEEDED",
    ]
