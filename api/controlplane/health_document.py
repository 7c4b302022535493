"""The release-health document of contract section 9, from a warehouse ``flag_health`` row.

The warehouse speaks snake_case, one column per figure; the admin API's health answer, the
dashboard's health view and each guarded-rollout decision's ``statistics`` (recorded by the
pipeline's guardian) are this nested camelCase document. One mapping, below both edges that
show or record it.
"""

from __future__ import annotations

from typing import Any

ARMS = ("treatment", "control")


def _arm(row: dict[str, Any], arm: str) -> dict[str, Any]:
    return {
        "users": row[f"{arm}_users"],
        "usersWithFeedback": row[f"{arm}_users_with_feedback"],
        "coverage": row[f"{arm}_coverage"],
        "failureRate": row[f"{arm}_failure_rate"],
        "latencyP50Ms": row[f"{arm}_latency_p50_ms"],
        "latencyP95Ms": row[f"{arm}_latency_p95_ms"],
        "latencyP99Ms": row[f"{arm}_latency_p99_ms"],
    }


def _comparison(row: dict[str, Any], metric: str) -> dict[str, Any]:
    """One COMPARISON."""
    low, high = row[f"{metric}_ci_low"], row[f"{metric}_ci_high"]
    return {
        "difference": row[f"{metric}_difference"],
        "ci": None if low is None or high is None else [low, high],
        "confidence": row["confidence"],
        "decision": row[f"{metric}_decision"],
    }


def health_answer(row: dict[str, Any]) -> dict[str, Any]:
    """The contract's health body from a ``flag_health`` row. Beyond the contract's fields:
    ``coverage`` (the coverage comparison behind the coverage warning) and
    ``withheldReason``. (A guarded rollout's own evidence is its ``guard``, in
    ``GET .../rollout``.)"""
    has_arms = row["rollout_percentage"] is not None
    return {
        "computedAt": row["computed_at"],
        "percentage": row["rollout_percentage"],
        "arms": {arm: _arm(row, arm) for arm in ARMS} if has_arms else None,
        "sampleRatio": {
            "expected": row["sample_ratio_expected"],
            "observed": row["sample_ratio_observed"],
            "pValue": row["sample_ratio_p_value"],
            "mismatch": bool(row["sample_ratio_mismatch"]),
        },
        "failureRate": _comparison(row, "failure_rate"),
        "latencyP95Ms": _comparison(row, "latency_p95"),
        "coverage": _comparison(row, "coverage"),
        "withheldReason": row["withheld_reason"],
    }
