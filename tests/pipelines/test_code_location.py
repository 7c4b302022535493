"""The code location as ``dagster dev -w workspace.yaml`` loads it, and its asset graph: one
definition per asset and per check, the kinds of what each touches, and no resource declared
that is not used."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import yaml

from api.settings import Settings
from pipelines.definitions import build_definitions, build_resources

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).with_name("asset_graph.snapshot.json")
RESOURCES = set(build_resources(Settings(data_dir=ROOT / "var")))
"""The code location's own resources (Dagster adds its ``io_manager`` to every step)."""


def _load_code_location(monkeypatch, data_dir: Path) -> dg.Definitions:
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    (entry,) = workspace["load_from"]
    target = entry["python_module"]
    assert (ROOT / target["working_directory"]).resolve() == ROOT
    monkeypatch.setenv("FLAGSIGHT_DATA_DIR", str(data_dir))
    monkeypatch.setenv("FLAGSIGHT_PIPELINE_CRON", "*/7 * * * *")
    # A fresh copy of the module, run with this environment as `dagster dev` would, and left
    # out of sys.modules: popping and re-importing it left a second copy (and its Definitions)
    # alive until the interpreter exited, where DuckDB's bindings reported leaked instances.
    spec = importlib.util.find_spec(target["module_name"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    defs = getattr(module, target["attribute"])
    assert isinstance(defs, dg.Definitions)
    return defs


def _graph(defs: dg.Definitions) -> dict:
    graph = defs.resolve_asset_graph()
    checks_defs = {key: check for check in defs.asset_checks for key in check.check_keys}
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        assets[key.to_user_string()] = {
            "deps": sorted(k.to_user_string() for k in node.parent_keys),
            "group": node.group_name,
            "kinds": sorted(node.kinds),
            "resources": sorted(graph.assets_def_for_key(key).required_resource_keys & RESOURCES),
            "checks": {
                check.name: sorted(checks_defs[check].required_resource_keys & RESOURCES)
                for check in sorted(node.check_keys, key=lambda c: c.name)
            },
            "has_description": bool(node.description),
        }
    return assets


def _resources_used(fn: Callable) -> set[str]:
    """The resources named in ``fn``'s body (its parameters and decorator left out)."""
    (function,) = ast.parse(textwrap.dedent(inspect.getsource(fn))).body
    named = {n.id for line in function.body for n in ast.walk(line) if isinstance(n, ast.Name)}
    return named & RESOURCES


def test_workspace_loads_the_code_location_and_the_asset_graph_matches_the_snapshot(
    monkeypatch, tmp_path
):
    defs = _load_code_location(monkeypatch, tmp_path)
    assert _graph(defs) == json.loads(SNAPSHOT.read_text())
    job = defs.resolve_job_def("insights_job")
    assert job.executor_def.name == "in_process"
    schedule = defs.resolve_schedule_def("insights_schedule")
    assert schedule.cron_schedule == "*/7 * * * *"
    assert schedule.job_name == "insights_job"
    warehouse = defs.resources["warehouse"]
    assert warehouse.published_path == str(tmp_path.resolve() / "warehouse.duckdb")


def test_every_asset_and_every_check_is_a_definition_of_its_own(monkeypatch, tmp_path):
    defs = _load_code_location(monkeypatch, tmp_path)
    graph = defs.resolve_asset_graph()
    assets = list(defs.assets)
    for asset in assets:
        (key,) = asset.keys  # an @dg.asset: one asset, one op named after it, no check inside
        assert asset.op.name == key.to_python_identifier()
        assert not asset.check_keys, key
    assert {k for a in assets for k in a.keys} == graph.get_all_asset_keys()
    checks = list(defs.asset_checks)
    for check in checks:
        (check_key,) = check.check_keys  # an @dg.asset_check: one check, one op, no asset
        assert not check.keys and check.node_def.name not in {a.op.name for a in assets}
        (spec,) = check.check_specs
        assert spec.description, check_key
        assert not spec.blocking, f"{check_key} blocks: none did, downstream assets always ran"
    assert {k for c in checks for k in c.check_keys} == graph.asset_check_keys
    assert len(graph.asset_check_keys) == 9


def test_each_asset_and_check_declares_only_the_resources_it_uses(monkeypatch, tmp_path):
    defs = _load_code_location(monkeypatch, tmp_path)
    for asset in defs.assets:
        declared = asset.required_resource_keys & RESOURCES
        assert declared == _resources_used(asset.op.compute_fn.decorated_fn), asset.key
    for check in defs.asset_checks:
        declared = check.required_resource_keys & RESOURCES
        assert declared == _resources_used(check.node_def.compute_fn.decorated_fn), check.check_keys


def test_kinds_follow_the_configured_control_plane_and_lake(tmp_path):
    """SQLite and a lake folder by default (the snapshot); PostgreSQL and a bucket in the
    cluster mode: the control plane's assets are postgres, the lake's users are also s3."""
    default = _graph(build_definitions(Settings(data_dir=tmp_path)))
    cluster = _graph(
        build_definitions(
            Settings(
                data_dir=tmp_path,
                database_url="postgresql://flagsight@db.internal/flagsight",
                events_uri="s3://events-bucket/flagsight",
            )
        )
    )
    changed = {
        name: (node["kinds"], cluster[name]["kinds"])
        for name, node in default.items()
        if node["kinds"] != cluster[name]["kinds"]
    }
    assert changed == {
        "environment_keys": (["duckdb", "sqlite"], ["duckdb", "postgres"]),
        "rollout_decisions": (["sqlite"], ["postgres"]),
        "flag_lifecycle": (["duckdb", "sqlite"], ["duckdb", "postgres"]),
        "raw_evaluation_events": (["duckdb", "parquet"], ["duckdb", "parquet", "s3"]),
        "raw_feedback_events": (["duckdb", "parquet"], ["duckdb", "parquet", "s3"]),
        "raw_track_events": (["duckdb", "parquet"], ["duckdb", "parquet", "s3"]),
        "published_warehouse": (["duckdb"], ["duckdb", "s3"]),
    }
