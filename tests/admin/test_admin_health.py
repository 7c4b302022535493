"""Flag health over HTTP: 404 before the first aggregation or for a missing environment, 400
for an over-long key, and the contract's shape (checked against the OpenAPI document)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from tests.support.health_rows import insert_health
from warehouse.migrations import migrate


def test_404_before_the_first_aggregation(admin_api, env) -> None:
    answer = admin_api.get(f"/environments/{env['id']}/flags/checkout/health")
    assert (answer.status, answer.body["message"]) == (
        404,
        f"No health for flag 'checkout' in environment '{env['id']}' yet:"
        " the insights pipeline has not aggregated it",
    )


def test_missing_environment_is_404(admin_api) -> None:
    answer = admin_api.get("/environments/env_0000000000000000/flags/checkout/health")
    assert answer.status == 404


def test_flag_key_over_128_characters_is_400(admin_api, env) -> None:
    answer = admin_api.get(f"/environments/{env['id']}/flags/{'x' * 129}/health")
    assert answer.status == 400


def _published_row(
    path: Path, environment_id: str, comparisons: dict | None = None, **columns
) -> None:
    """A warehouse file holding one flag_health row and its comparisons (the schema is the
    pipeline's own)."""
    con = duckdb.connect(str(path))
    migrate(con)
    row = {"environment_id": environment_id, "flag_key": "checkout", **columns}
    insert_health(con, row, comparisons, "TIMESTAMPTZ '2026-11-23 10:00:00Z'")
    con.close()


def test_a_flag_without_a_percentage_rule_answers_null_arms_and_withheld(admin_api, env) -> None:
    _published_row(
        admin_api.services.settings.warehouse_path,
        env["id"],
        withheld_reason="no percentage rule",
    )
    answer = admin_api.get(f"/environments/{env['id']}/flags/checkout/health")
    assert answer.status == 200
    body = answer.body
    assert body["arms"] is None and body["percentage"] is None
    assert body["failureRate"] == {
        "difference": None,
        "ci": None,
        "confidence": 0.95,
        "decision": "withheld",
    }
    assert body["computedAt"] == "2026-11-23T10:00:00Z"


def test_a_split_answers_both_arms_side_by_side(admin_api, env) -> None:
    arm = {
        "users": 5012,
        "users_with_feedback": 4810,
        "coverage": 95.97,
        "failure_rate": 4.9,
        "latency_p50_ms": 120.0,
        "latency_p95_ms": 410.0,
        "latency_p99_ms": 800.0,
    }
    columns = {
        f"{side}_{name}": value for side in ("treatment", "control") for name, value in arm.items()
    }
    _published_row(
        admin_api.services.settings.warehouse_path,
        env["id"],
        rollout_percentage=50.0,
        **columns,
        sample_ratio_expected=0.5,
        sample_ratio_observed=0.5,
        sample_ratio_p_value=1.0,
        sample_ratio_mismatch=False,
        comparisons={
            "failureRate": {
                "difference": 0.2,
                "ci_low": -0.9,
                "ci_high": 1.3,
                "decision": "inconclusive",
            },
            "latencyP95Ms": {"decision": "inconclusive"},
            "coverage": {"decision": "inconclusive"},
        },  # fmt: skip
    )
    body = admin_api.get(f"/environments/{env['id']}/flags/checkout/health").body
    assert body["percentage"] == 50.0
    assert (
        body["arms"]["treatment"]
        == body["arms"]["control"]
        == {
            "users": 5012,
            "usersWithFeedback": 4810,
            "coverage": 95.97,
            "failureRate": 4.9,
            "latencyP50Ms": 120.0,
            "latencyP95Ms": 410.0,
            "latencyP99Ms": 800.0,
        }
    )
    assert body["sampleRatio"] == {
        "expected": 0.5,
        "observed": 0.5,
        "pValue": 1.0,
        "mismatch": False,
    }
    assert body["failureRate"] == {
        "difference": 0.2,
        "ci": [-0.9, 1.3],
        "confidence": 0.95,
        "decision": "inconclusive",
    }


def test_a_followed_metric_answers_its_arms_means_interval_and_variance_reduction(
    admin_api, env
) -> None:
    _published_row(
        admin_api.services.settings.warehouse_path,
        env["id"],
        rollout_percentage=50.0,
        treatment_users=4000,
        treatment_users_with_feedback=3900,
        control_users=4000,
        control_users_with_feedback=3900,
        sample_ratio_mismatch=False,
        comparisons={
            "metric:revenue": {
                "treatment_users": 4000,
                "treatment_mean": 12.5,
                "control_users": 4000,
                "control_mean": 11.0,
                "difference": 1.5,
                "ci_low": 0.4,
                "ci_high": 2.6,
                "decision": "improvement",
                "variance_reduction": 0.31,
            },
        },  # fmt: skip
    )
    body = admin_api.get(f"/environments/{env['id']}/flags/checkout/health").body
    assert body["metrics"] == {
        "revenue": {
            "treatment": {"users": 4000, "mean": 12.5},
            "control": {"users": 4000, "mean": 11.0},
            "difference": 1.5,
            "ci": [0.4, 2.6],
            "confidence": 0.95,
            "decision": "improvement",
            "varianceReduction": 0.31,
            "withheldReason": None,
        }
    }
    # the built-in comparisons the warehouse has no row for are withheld, not missing
    assert body["failureRate"]["decision"] == "withheld"
