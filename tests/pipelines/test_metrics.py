"""The assets over the fixture lake: every figure against an independent computation."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb

from tests.pipelines.figures import (
    assert_same_figures,
    published_rows,
    without_timestamps,
)
from tests.pipelines.fixture_lake import ENV_PROD, ENV_STAGING, MIN_FEEDBACK, expected_figures
from tests.pipelines.support import add_wave_two, materialize_all
from warehouse import read

TABLES = {
    "flag_environment_metrics": "environment_id, flag_key",
    "flag_environment_daily": "environment_id, flag_key, evaluation_date",
    "flag_value_comparison": "environment_id, flag_key",
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
    comparison = published_rows(path, "flag_value_comparison", TABLES["flag_value_comparison"])
    assert len(comparison) == len(expected.sides)
    for row in comparison:
        key = (row["environment_id"], row["flag_key"])
        assert_same_figures(row, expected.sides[key][True], key, prefix="on_")
        assert_same_figures(row, expected.sides[key][False], key, prefix="off_")
        _check_test(row, expected.sides[key])
    assert read.pending_feedback_count(path) == expected.pending


def _check_test(row: dict, sides: dict) -> None:
    on, off = sides[True], sides[False]
    if min(on["feedback_count"], off["feedback_count"]) < MIN_FEEDBACK:
        assert row["verdict"] is None and row["p_value"] is None
        assert str(MIN_FEEDBACK) in row["no_verdict_reason"]
        return
    n1, n2 = on["feedback_count"], off["feedback_count"]
    p1, p2 = on["success_count"] / n1, off["success_count"] / n2
    pooled = (on["success_count"] + off["success_count"]) / (n1 + n2)
    z = (p1 - p2) / math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    p_value = math.erfc(abs(z) / math.sqrt(2))
    assert math.isclose(row["z_score"], z, rel_tol=1e-9)
    assert math.isclose(row["p_value"], p_value, rel_tol=1e-9, abs_tol=1e-300)
    want = (
        "no_significant_difference"
        if p_value >= 0.05
        else ("on_better" if p1 > p2 else "off_better")
    )
    assert row["verdict"] == want and row["no_verdict_reason"] is None


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
    assert len(checks) == 5 and all(e.passed for e in checks)

    # The verdict path is exercised: production/checkout has enough feedback on both sides.
    comparison = read.value_comparison(published, ENV_PROD, "checkout")
    assert comparison["verdict"] == "on_better" and comparison["pValue"] < 0.05
    small = read.value_comparison(published, ENV_STAGING, "checkout")
    assert small["verdict"] is None and small["noVerdictReason"].startswith("insufficient sample")


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


def test_read_helpers_give_camel_case_rows_and_none_without_warehouse(lake_settings, tmp_path):
    missing = tmp_path / "nowhere" / "warehouse.duckdb"
    assert read.flag_metrics(missing, ENV_PROD, "checkout") is None
    assert read.daily_series(missing, ENV_PROD, "checkout") == []
    assert read.value_comparison(missing, ENV_PROD, "checkout") is None
    assert read.pending_feedback_count(missing) is None

    assert materialize_all(lake_settings).success
    path = lake_settings.warehouse_path
    row = read.flag_metrics(path, ENV_STAGING, "beta.banner")
    assert list(row) == [
        "organizationId", "environmentId", "environmentKey", "flagKey", "evaluations",
        "feedbackCount", "feedbackCoverage", "successCount", "failureCount", "successRate",
        "failureRate", "avgLatencyMs", "computedAt",
    ]  # fmt: skip
    assert row["environmentKey"] is None and row["computedAt"].endswith("Z")
    assert read.flag_metrics(path, ENV_PROD, "ghost-flag")["feedbackCount"] >= 0
    assert read.flag_metrics(path, ENV_PROD, "no-such-flag") is None
    series = read.daily_series(path, ENV_PROD, "checkout")
    assert [d["date"] for d in series] == ["2026-03-01", "2026-03-02", "2026-03-03"]
    con = read.connect_readonly(path)
    try:
        assert con.execute("SELECT count(*) FROM environments").fetchone()[0] == 1
    finally:
        con.close()
