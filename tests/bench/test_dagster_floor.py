"""Dagster's floor (``bench/dagster_floor.py``) measures the insights job's own graph: the same
assets with the same dependencies and kinds, the same checks on the same assets."""

from __future__ import annotations

import dagster as dg

from api.settings import Settings
from bench.dagster_floor import floor_definitions
from pipelines.constants import JOB_NAME
from pipelines.definitions import build_definitions


def _graph(defs: dg.Definitions) -> tuple[dict, set]:
    graph = defs.resolve_asset_graph()
    assets = {
        key: (frozenset(graph.get(key).parent_keys), frozenset(graph.get(key).kinds))
        for key in graph.materializable_asset_keys
    }
    return assets, set(graph.asset_check_keys)


def test_the_empty_job_has_the_insights_graph(tmp_path) -> None:
    real = build_definitions(Settings(data_dir=tmp_path))  # the default deployment's kinds
    assert _graph(floor_definitions()) == _graph(real)
    assert floor_definitions().resolve_job_def(JOB_NAME).executor_def == dg.in_process_executor


def test_its_parts_are_the_assets_alone_and_one_asset(tmp_path) -> None:
    assets, checks = _graph(floor_definitions())
    no_checks, none = _graph(floor_definitions("no-checks"))
    assert no_checks == assets and not none and checks
    one, none = _graph(floor_definitions("one-asset"))
    assert len(one) == 1 and not none


def test_the_floor_runs_in_an_instance_of_its_own(tmp_path) -> None:
    """Configured as the lake's, but its runs are not the lake's (``dagster.yaml`` names its
    storages' folders: a copy of the lake's once wrote the floor's runs into the lake's)."""
    from api.infra.dagster_home import prepare_dagster_home
    from bench.pipeline_scenarios import dagster_floor

    lake = tmp_path / "lake"
    prepare_dagster_home(lake / "dagster", None)
    floor = dagster_floor(lake, tmp_path / "floor", rounds=1)
    assert len(floor["rounds_run_s"]) == 1
    for home, runs in ((lake / "dagster", 0), (tmp_path / "floor", 1)):
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert len(instance.get_run_records()) == runs, home
