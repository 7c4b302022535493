"""The release-health document of contract sections 9 and 13, from a warehouse ``flag_health``
row and its ``health_comparisons`` rows.

The warehouse speaks snake_case, one row per comparison; the admin API's health answer, the
dashboard's health view and each guarded-rollout decision's ``statistics`` (recorded by the
pipeline's guardian) are this nested camelCase document, its comparisons named by the catalogue
(``api.controlplane.catalogue``). One mapping, below both edges that show or record it.
"""

from __future__ import annotations

from typing import Any

from flagsight_core.contract import Decision

from api.controlplane.catalogue import BUILT_IN, metric_key_of

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


def _comparison(comparison: dict[str, Any] | None, confidence: float) -> dict[str, Any]:
    """One COMPARISON; withheld when the warehouse has none (no arms to compare)."""
    if comparison is None:
        return {"difference": None, "ci": None, "confidence": confidence,
                "decision": str(Decision.WITHHELD)}  # fmt: skip
    low, high = comparison["ci_low"], comparison["ci_high"]
    return {
        "difference": comparison["difference"],
        "ci": None if low is None or high is None else [low, high],
        "confidence": comparison["confidence"],
        "decision": comparison["decision"],
    }


def _metric(comparison: dict[str, Any]) -> dict[str, Any]:
    """One metric's comparison (contract section 13): the arms' users and means too."""
    return {
        "treatment": {"users": comparison["treatment_users"], "mean": comparison["treatment_mean"]},
        "control": {"users": comparison["control_users"], "mean": comparison["control_mean"]},
        **_comparison(comparison, comparison["confidence"]),
        "varianceReduction": comparison["variance_reduction"],
        "withheldReason": comparison["withheld_reason"],
    }


def health_answer(row: dict[str, Any]) -> dict[str, Any]:
    """The contract's health body from a ``flag_health`` row and its ``comparisons``. Beyond
    the contract's fields: ``coverage`` (the coverage comparison behind the coverage warning)
    and ``withheldReason``. (A guarded rollout's own evidence is its ``guard``, in
    ``GET .../rollout``.)"""
    has_arms = row["rollout_percentage"] is not None
    compared = {c["comparison"]: c for c in row.get("comparisons", ())}
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
        **{m.name: _comparison(compared.get(m.name), row["confidence"]) for m in BUILT_IN},
        "metrics": {
            key: _metric(c)
            for name, c in sorted(compared.items())
            if (key := metric_key_of(name)) is not None
        },
        "withheldReason": row["withheld_reason"],
    }
