"""Each asset and each check is its own Dagster step: subsets, failures, the shared connection."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import pytest

import pipelines.resources as resources_module
from pipelines.assets import ASSETS
from pipelines.checks import CHECKS
from pipelines.cli import PipelineRunFailed, run_pipeline_once
from pipelines.constants import (
    ATTRIBUTED_FEEDBACK,
    ENVIRONMENT_KEYS,
    FLAG_ENVIRONMENT_METRICS,
    FLAG_HEALTH,
    FLAG_LIFECYCLE,
    PUBLISHED_WAREHOUSE,
    RAW_EVALUATIONS,
    RAW_FEEDBACK,
    RAW_TRACK,
)
from pipelines.definitions import build_resources, working_database_path
from tests.pipelines.figures import assert_same_figures, published_rows
from tests.pipelines.fixture_lake import expected_figures
from tests.pipelines.support import add_wave_two, materialize_all
from warehouse import read
from warehouse.compaction import compact

feedback_asset = importlib.import_module("pipelines.assets.attributed_feedback")

ALL_CHECK_NAMES = {
    f"{ATTRIBUTED_FEEDBACK}:pending_feedback_bounded",
    f"{FLAG_ENVIRONMENT_METRICS}:coverage_at_most_100",
    f"{FLAG_ENVIRONMENT_METRICS}:success_plus_failure_is_100",
    f"{RAW_EVALUATIONS}:no_file_loaded_twice",
    f"{RAW_FEEDBACK}:no_file_loaded_twice",
    f"{RAW_TRACK}:no_file_loaded_twice",
    f"{FLAG_HEALTH}:decisions_follow_the_rules",
    f"{FLAG_LIFECYCLE}:lifecycle_one_row_per_flag",
    f"{FLAG_LIFECYCLE}:lifecycle_evidence_consistent",
}
ASSET_NAMES = {asset.key.to_user_string() for asset in ASSETS}
CHECK_STEPS = {check.node_def.name for check in CHECKS}


def _materialize(settings, selection=None, raise_on_error=True) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [*ASSETS, *CHECKS],
        selection=selection,
        resources=build_resources(settings),
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=raise_on_error,
    )


def _materialized(result: dg.ExecuteInProcessResult) -> set[str]:
    return {
        event.asset_key.to_user_string()
        for event in result.all_events
        if event.is_step_materialization
    }


def _checked(result: dg.ExecuteInProcessResult) -> set[str]:
    return {
        f"{e.asset_key.to_user_string()}:{e.check_name}"
        for e in result.get_asset_check_evaluations()
    }


def _boom(con, run_id, rollouts=()):
    raise RuntimeError("attribution exploded")


def test_each_asset_and_each_check_is_its_own_step_and_every_check_runs(lake_settings):
    result = materialize_all(lake_settings)
    assert result.success
    steps = {
        e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_START
    }
    assert len(CHECK_STEPS) == len(ALL_CHECK_NAMES)
    assert steps == ASSET_NAMES | CHECK_STEPS
    assert _materialized(result) == ASSET_NAMES
    assert _checked(result) == ALL_CHECK_NAMES


def test_a_subset_materializes_only_the_selected_assets_and_their_checks(lake_settings):
    result = _materialize(lake_settings, selection=[RAW_EVALUATIONS])
    assert result.success
    assert _materialized(result) == {RAW_EVALUATIONS}
    assert _checked(result) == {f"{RAW_EVALUATIONS}:no_file_loaded_twice"}
    assert not lake_settings.warehouse_path.exists()
    con = duckdb.connect(working_database_path(lake_settings), read_only=True)
    try:
        loaded = con.execute("SELECT DISTINCT event_type FROM loaded_files").fetchall()
    finally:
        con.close()
    assert loaded == [("evaluation",)]

    # A check alone (as "Execute check" in the UI does) runs without materializing anything.
    only_check = dg.AssetSelection.checks(
        dg.AssetCheckKey(dg.AssetKey(RAW_EVALUATIONS), "no_file_loaded_twice")
    )
    result = _materialize(lake_settings, selection=only_check)
    assert result.success
    assert _materialized(result) == set()
    assert _checked(result) == {f"{RAW_EVALUATIONS}:no_file_loaded_twice"}


def test_a_failing_asset_skips_only_what_depends_on_it_and_fails_the_run(
    lake_settings, waves, monkeypatch
):
    monkeypatch.setattr(feedback_asset, "fold_new_events", _boom)
    result = _materialize(lake_settings, raise_on_error=False)
    assert not result.success
    # Independent assets and their checks still ran; nothing downstream of the failure did.
    assert _materialized(result) == {RAW_EVALUATIONS, RAW_FEEDBACK, RAW_TRACK, ENVIRONMENT_KEYS}
    assert _checked(result) == {
        f"{RAW_EVALUATIONS}:no_file_loaded_twice",
        f"{RAW_FEEDBACK}:no_file_loaded_twice",
        f"{RAW_TRACK}:no_file_loaded_twice",
    }
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_key == ATTRIBUTED_FEEDBACK
    assert "attribution exploded" in failure.step_failure_data.error.to_string()
    assert not lake_settings.warehouse_path.exists()

    # The next run folds what the failed one loaded (the ledger kept it) and gets every figure.
    monkeypatch.undo()
    result = materialize_all(lake_settings)
    assert result.success
    wave1 = waves[0]
    expected = expected_figures(wave1.evaluations, wave1.feedback)
    rows = published_rows(
        lake_settings.warehouse_path, "flag_environment_metrics", "environment_id, flag_key"
    )
    assert {(r["environment_id"], r["flag_key"]) for r in rows} == set(expected.metrics)
    for row in rows:
        key = (row["environment_id"], row["flag_key"])
        assert_same_figures(row, expected.metrics[key], key)
    assert read.pending_feedback_count(lake_settings.warehouse_path) == expected.pending


def test_run_pipeline_once_names_the_failed_asset(lake_settings, monkeypatch):
    monkeypatch.setattr(feedback_asset, "fold_new_events", _boom)
    lines: list[str] = []
    with pytest.raises(PipelineRunFailed, match=ATTRIBUTED_FEEDBACK):
        run_pipeline_once(lake_settings, echo=lines.append)
    assert any(
        "FAILED" in line and ATTRIBUTED_FEEDBACK in line and "attribution exploded" in line
        for line in lines
    )
    assert f"  materialized {RAW_EVALUATIONS}" in lines


def test_a_run_opens_the_working_database_once_and_closes_it(lake_settings, monkeypatch):
    opened: list[str] = []
    real_connect = resources_module.duckdb.connect

    def counting_connect(path, *args, **kwargs):
        opened.append(str(path))
        return real_connect(path, *args, **kwargs)

    monkeypatch.setattr(resources_module.duckdb, "connect", counting_connect)
    assert materialize_all(lake_settings).success
    working = working_database_path(lake_settings)
    assert opened == [working]
    # Closed at the end of the run: another process-level read-write open succeeds at once.
    real_connect(working).close()


def test_connect_outside_a_run_opens_and_closes_its_own_connection(tmp_path: Path):
    resource = resources_module.WarehouseResource(
        working_path=str(tmp_path / "w.duckdb"), published_path=str(tmp_path / "p.duckdb")
    )
    with resource.connect() as con:
        assert con.execute("SELECT count(*) FROM loaded_files").fetchone()[0] == 0
    duckdb.connect(str(tmp_path / "w.duckdb")).close()  # not held open


def test_a_run_imports_neither_pandas_nor_pyarrow(lake_settings):
    """Each of them cost 0.3-1 s per run (a registered Arrow table, a conversion): none is
    needed. (numpy is: the evaluation core's rule types match many users with it.)"""
    script = (
        "import sys\n"
        "from api.settings import Settings\n"
        "from pipelines.cli import run_pipeline_once\n"
        f"run_pipeline_once(Settings(data_dir=Path({str(lake_settings.data_dir)!r})))\n"
        "print(sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "from pathlib import Path\n" + script],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        check=True,
    )
    lines = out.stdout.strip().splitlines()
    assert "succeeded" in lines[-2]
    assert lines[-1] == "[]"


@pytest.mark.parametrize("runs_inspect_every_table", [False, True])
def test_the_working_database_is_compacted_by_the_pipeline_not_by_duckdbs_vacuum(
    lake_settings, waves, monkeypatch, runs_inspect_every_table
):
    """The vacuum is off on the pipeline's connection (warehouse/compaction.py says why);
    the published step reports what it compacted, and a full compaction of every table between
    two runs changes no figure. Whether a run inspects every table depends on its id (one in
    sixteen): both kinds are run here, not left to chance."""
    published_module = importlib.import_module("pipelines.assets.published_warehouse")
    monkeypatch.setattr(
        published_module, "is_full_inspection", lambda run_id: runs_inspect_every_table
    )
    first = materialize_all(lake_settings)
    [published] = first.asset_materializations_for_node(PUBLISHED_WAREHOUSE)
    assert published.metadata["rows_compacted"].value >= 0
    resource = build_resources(lake_settings)["warehouse"]
    with resource.connect() as con:
        assert con.execute("SELECT current_setting('max_vacuum_tasks')").fetchone() == (0,)
    add_wave_two(lake_settings, waves)
    assert materialize_all(lake_settings).success

    def figures() -> list[list[dict]]:
        tables = ("flag_environment_metrics", "flag_health", "flag_arm_windows")
        rows = [published_rows(lake_settings.warehouse_path, t, "ALL") for t in tables]
        return [[{k: v for k, v in r.items() if k != "computed_at"} for r in t] for t in rows]

    before = figures()
    with resource.connect() as con:
        compacted = compact(con, full=True)
    if not runs_inspect_every_table:  # else the run before has compacted it already
        assert "flag_health" in compacted  # its touched rows are deleted and inserted again
    assert materialize_all(lake_settings).success
    assert figures() == before


def test_a_failed_compaction_warns_and_the_snapshot_is_still_published(lake_settings, monkeypatch):
    published_module = importlib.import_module("pipelines.assets.published_warehouse")

    def failing(con, full=True):
        raise duckdb.IOException("No space left on device")

    monkeypatch.setattr(published_module, "compact", failing)
    result = materialize_all(lake_settings)
    assert result.success
    [published] = result.asset_materializations_for_node(PUBLISHED_WAREHOUSE)
    assert "No space left on device" in published.metadata["compaction_error"].value
    assert "rows_compacted" not in published.metadata
    assert read.pending_feedback_count(lake_settings.warehouse_path) is not None  # published
