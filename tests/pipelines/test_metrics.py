"""The assets over the fixture lake: every figure against an independent computation."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import pytest

from tests.pipelines.figures import (
    assert_same_figures,
    published_rows,
    without_timestamps,
)
from tests.pipelines.fixture_lake import ENV_PROD, ENV_STAGING, expected_figures
from tests.pipelines.support import add_wave_two, materialize_all
from warehouse import read
from warehouse.statistics.histogram import RELATIVE_ACCURACY

TABLES = {
    "flag_environment_metrics": "environment_id, flag_key",
    "flag_environment_daily": "environment_id, flag_key, evaluation_date",
    "flag_health": "environment_id, flag_key",
}


def _snapshot(path: Path) -> dict[str, list[dict]]:
    return {t: without_timestamps(published_rows(path, t, o)) for t, o in TABLES.items()}


def _check_against(path: Path, expected) -> None:
    metrics = published_rows(path, "flag_environment_metrics", TABLES["flag_environment_metrics"])
    assert {(r["environment_id"], r["flag_key"]) for r in metrics} == set(expected.metrics)
    for row in metrics:
        key = (row["environment_id"], row["flag_key"])
        assert_same_figures(row, expected.metrics[key], key)
        assert row["environment_key"] == expected.metrics[key]["environment_key"]
        assert row["organization_id"] == "org_fixture"
        assert row["computed_at"] is not None
    daily = published_rows(path, "flag_environment_daily", TABLES["flag_environment_daily"])
    assert len(daily) == len(expected.daily)
    for row in daily:
        key = (row["environment_id"], row["flag_key"], row["evaluation_date"].isoformat())
        assert_same_figures(row, expected.daily[key], key)
    health = published_rows(path, "flag_health", TABLES["flag_health"])
    assert {(r["environment_id"], r["flag_key"]) for r in health} == set(expected.metrics)
    for row in health:
        key = (row["environment_id"], row["flag_key"])
        if key[1] == "ghost-flag":  # only error outcomes (flag not found): no arm
            assert row["rollout_percentage"] is None
            assert read.flag_health(path, *key)["comparisons"] == []  # answered as withheld
            continue
        _check_arms(row, expected.sides[key])
    assert read.pending_feedback_count(path) == expected.pending


def _quantile_cont(ordered: list[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    below, above = math.floor(position), math.ceil(position)
    return ordered[below] + (position - below) * (ordered[above] - ordered[below])


def _check_arms(row: dict, sides: dict) -> None:
    """Each fixture user is evaluated once, treatment when served true: per-user figures are
    the served-value sides' per-evaluation figures, and each user's latency is its kept
    feedback's. Percentiles come from the arms' histograms: within 0.5 % of the exact ones,
    across runs whose corrections move users between buckets."""
    assert row["rollout_percentage"] == 50.0
    for arm, served in (("treatment", True), ("control", False)):
        side = sides[served]
        assert row[f"{arm}_users"] == side["evaluations"]
        assert row[f"{arm}_users_with_feedback"] == side["feedback_count"]
        assert row[f"{arm}_failed_users"] == side["failure_count"]
        assert row[f"{arm}_coverage"] == pytest.approx(side["feedback_coverage"])
        if side["feedback_count"]:
            assert row[f"{arm}_failure_rate"] == pytest.approx(side["failure_rate"])
        latencies = side["latencies"]
        assert row[f"{arm}_latency_users"] == len(latencies)
        for q, column in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
            got = row[f"{arm}_latency_{column}_ms"]
            if not latencies:
                assert got is None
                continue
            assert got == pytest.approx(_quantile_cont(latencies, q), rel=RELATIVE_ACCURACY)
    treatment, control = sides[True]["evaluations"], sides[False]["evaluations"]
    assert row["sample_ratio_observed"] == pytest.approx(treatment / (treatment + control))


def test_every_figure_matches_an_independent_computation_across_runs(lake_settings, waves):
    wave1, wave2 = waves
    published = lake_settings.warehouse_path

    first = materialize_all(lake_settings)
    assert first.success
    expected1 = expected_figures(wave1.evaluations, wave1.feedback)
    assert expected1.pending > 1  # late feedback is waiting for its evaluations
    _check_against(published, expected1)
    assert all(e.passed for e in first.get_asset_check_evaluations())

    before = _snapshot(published)
    again = materialize_all(lake_settings)  # same files: nothing may change
    assert again.success
    assert _snapshot(published) == before

    add_wave_two(lake_settings, waves)
    third = materialize_all(lake_settings)
    assert third.success
    everything = expected_figures(
        wave1.evaluations + wave2.evaluations + wave1.evaluations[:25],
        wave1.feedback + wave2.feedback,
    )
    assert everything.pending == 1  # only the orphan is left
    _check_against(published, everything)
    checks = third.get_asset_check_evaluations()
    assert len(checks) == 9 and all(e.passed for e in checks)

    # Decisions: production/checkout's treatment fails 10 % against control's 40 %.
    health = _comparisons(read.flag_health(published, ENV_PROD, "checkout"))
    assert health["failureRate"]["decision"] == "improvement"
    assert health["failureRate"]["ci_high"] < 0
    small = read.flag_health(published, ENV_STAGING, "checkout")
    assert _comparisons(small)["failureRate"]["decision"] == "withheld"
    assert small["withheld_reason"]


def test_ledger_loads_each_file_once_and_ignores_unsealed_files(lake_settings, waves):
    assert materialize_all(lake_settings).success
    assert materialize_all(lake_settings).success
    working = Path(lake_settings.data_dir) / "pipeline" / "working.duckdb"
    con = duckdb.connect(str(working), read_only=True)
    try:
        paths = [r[0] for r in con.execute("SELECT path FROM loaded_files").fetchall()]
        batches = con.execute("SELECT count(*) FROM load_batches").fetchone()[0]
    finally:
        con.close()
    on_disk = sorted(
        p.relative_to(lake_settings.events_location).as_posix()
        for p in Path(lake_settings.events_location).rglob("*.parquet")
        if not p.name.startswith(".")
    )
    assert sorted(paths) == on_disk
    assert batches == 2  # the second run found nothing new


def test_read_helpers_give_snake_case_rows_and_none_without_warehouse(lake_settings, tmp_path):
    missing = tmp_path / "nowhere" / "warehouse.duckdb"
    assert read.flag_metrics(missing, ENV_PROD, "checkout") is None
    assert read.daily_series(missing, ENV_PROD, "checkout") == []
    assert read.flag_health(missing, ENV_PROD, "checkout") is None
    assert read.pending_feedback_count(missing) is None

    assert materialize_all(lake_settings).success
    path = lake_settings.warehouse_path
    row = read.flag_metrics(path, ENV_STAGING, "beta.banner")
    assert list(row) == [
        "organization_id", "environment_id", "environment_key", "flag_key", "evaluations",
        "feedback_count", "feedback_coverage", "success_count", "failure_count", "success_rate",
        "failure_rate", "avg_latency_ms", "computed_at",
    ]  # fmt: skip
    assert row["environment_key"] is None and row["computed_at"].endswith("Z")
    assert read.flag_metrics(path, ENV_PROD, "ghost-flag")["feedback_count"] >= 0
    assert read.flag_metrics(path, ENV_PROD, "no-such-flag") is None
    series = read.daily_series(path, ENV_PROD, "checkout")
    assert [d["evaluation_date"] for d in series] == ["2026-03-01", "2026-03-02", "2026-03-03"]
    con = read.connect_readonly(path)
    try:
        assert con.execute("SELECT count(*) FROM environments").fetchone()[0] == 1
    finally:
        con.close()


def _comparisons(health: dict) -> dict[str, dict]:
    """A health row's comparisons by name."""
    return {c["comparison"]: c for c in health["comparisons"]}
