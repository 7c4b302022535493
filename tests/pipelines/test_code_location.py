"""The code location as ``dagster dev -w workspace.yaml`` loads it, and its asset graph."""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path

import dagster as dg
import yaml

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).with_name("asset_graph.snapshot.json")


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
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        assets[key.to_user_string()] = {
            "deps": sorted(k.to_user_string() for k in node.parent_keys),
            "group": node.group_name,
            "kinds": sorted(node.kinds),
            "checks": sorted(c.name for c in node.check_keys),
            "has_description": bool(node.description),
        }
    return assets


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
