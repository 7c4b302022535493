"""Flag metrics: the warehouse row, 404 before the first aggregation or for a missing env."""

from __future__ import annotations

import sys
import types

import pytest

ROW = {
    "organizationId": "org_0000000000000001",
    "environmentId": "",
    "environmentKey": "production",
    "flagKey": "checkout",
    "evaluations": 10,
    "feedbackCount": 4,
    "feedbackCoverage": 40.0,
    "successCount": 3,
    "failureCount": 1,
    "successRate": 75.0,
    "failureRate": 25.0,
    "avgLatencyMs": None,
    "computedAt": "2025-03-15T00:05:00Z",
}
"""The admin API's answer: the warehouse's row (``WAREHOUSE_ROW``) in the API's camelCase."""
WAREHOUSE_ROW = {
    "organization_id": "org_0000000000000001",
    "environment_id": "",
    "environment_key": "production",
    "flag_key": "checkout",
    "evaluations": 10,
    "feedback_count": 4,
    "feedback_coverage": 40.0,
    "success_count": 3,
    "failure_count": 1,
    "success_rate": 75.0,
    "failure_rate": 25.0,
    "avg_latency_ms": None,
    "computed_at": "2025-03-15T00:05:00Z",
}


def test_404_before_the_first_aggregation(admin_api, env) -> None:
    assert not admin_api.services.settings.warehouse_path.exists()
    answer = admin_api.get(f"/environments/{env['id']}/flags/checkout/metrics")
    assert (answer.status, answer.body) == (
        404,
        {
            "status": 404,
            "error": "Not Found",
            "message": f"No metrics for flag 'checkout' in environment '{env['id']}' yet:"
            " the insights pipeline has not aggregated it",
        },
    )


@pytest.fixture
def fake_warehouse(monkeypatch) -> list:
    """Stands in for ``warehouse.read`` and records how it was called."""
    calls: list = []

    def flag_metrics(warehouse_path, environment_id, flag_key):
        calls.append((warehouse_path, environment_id, flag_key))
        return (
            {**WAREHOUSE_ROW, "environment_id": environment_id, "flag_key": flag_key}
            if flag_key == "checkout"
            else None
        )

    module = types.ModuleType("warehouse.read")
    module.flag_metrics = flag_metrics  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "warehouse.read", module)
    return calls


def test_the_warehouse_row_is_answered_in_the_apis_camel_case(
    admin_api, env, fake_warehouse
) -> None:
    answer = admin_api.get(f"/environments/{env['id']}/flags/checkout/metrics")
    assert (answer.status, answer.body) == (200, {**ROW, "environmentId": env["id"]})
    assert fake_warehouse == [(admin_api.services.settings.warehouse_path, env["id"], "checkout")]
    answer = admin_api.get(f"/environments/{env['id']}/flags/other/metrics")
    assert answer.status == 404


def test_missing_environment_is_404_without_reading_the_warehouse(
    admin_api, fake_warehouse
) -> None:
    answer = admin_api.get("/environments/env_0000000000000000/flags/checkout/metrics")
    assert (answer.status, answer.body["message"]) == (
        404,
        "Environment 'env_0000000000000000' does not exist",
    )
    assert fake_warehouse == []


def test_flag_key_over_128_characters_is_400(admin_api, env) -> None:
    answer = admin_api.get(f"/environments/{env['id']}/flags/{'x' * 129}/metrics")
    assert (answer.status, answer.body["message"]) == (
        400,
        "'flagKey' must be 1 to 128 characters long",
    )
