"""Dagster's own cost of an insights run: the same job, with bodies that do nothing.

The insights job's graph (every asset with its dependencies and kinds, every check on its
asset), each body replaced by one that returns at once, run as ``flagsight pipeline run`` runs
the real one: in a fresh process with the CLI's imports done, timed from opening the instance
to the run's end, against an instance configured as the lake's (a home without a
``dagster.yaml`` gets flagsight's embedded default). What is left is the part of
an incremental run that no asset body can remove: the instance, the run and its SQLite shard,
and each step's events and data-version lookups.

    python -m bench.dagster_floor DAGSTER_HOME [--rounds N] [--graph insights|no-checks|one-asset]

``--graph`` splits that cost: the same assets without their checks, or a single asset (what a
run costs before any step).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg

from bench.servers import REPO

GRAPHS = ("insights", "no-checks", "one-asset")


def floor_definitions(graph: str = "insights") -> dg.Definitions:
    """The insights graph with empty bodies (``pipelines.assets.ASSETS``, ``CHECKS``), or a
    part of it (``GRAPHS``)."""
    from pipelines.assets import ASSETS
    from pipelines.checks import CHECKS
    from pipelines.constants import JOB_NAME

    specs = [spec for asset in ASSETS for spec in asset.specs]
    if graph == "one-asset":
        specs = [spec.replace_attributes(deps=[]) for spec in specs[:1]]
    assets = [_empty_asset(spec) for spec in specs]
    checks = []
    if graph == "insights":
        checks = [_empty_check(spec) for check in CHECKS for spec in check.check_specs]
    job = dg.define_asset_job(JOB_NAME, selection=dg.AssetSelection.all(),
                              executor_def=dg.in_process_executor)  # fmt: skip
    return dg.Definitions(assets=assets, asset_checks=checks, jobs=[job])


def _empty_asset(spec: dg.AssetSpec) -> dg.AssetsDefinition:
    @dg.asset(key=spec.key, deps=[dep.asset_key for dep in spec.deps], kinds=spec.kinds,
              group_name=spec.group_name)  # fmt: skip
    def empty() -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"dagster/row_count": 0})

    return empty


def _empty_check(spec: dg.AssetCheckSpec) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=spec.asset_key, name=spec.name)
    def empty() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=True, metadata={"violations": 0})

    return empty


def run_once(dagster_home: Path, graph: str = "insights") -> float:
    """One run of the empty job in this process; its seconds, as the CLI counts them."""
    import pipelines.cli  # noqa: F401 (the CLI's imports, done before its clock starts)
    from pipelines.cli import QUIET_CONSOLE
    from pipelines.constants import JOB_NAME

    job = floor_definitions(graph).resolve_job_def(JOB_NAME)
    dagster_home.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        result = job.execute_in_process(run_config=QUIET_CONSOLE, instance=instance)
    elapsed = time.monotonic() - started
    if not result.success:
        raise RuntimeError("the empty insights job failed")
    return elapsed


def floor_rounds(dagster_home: Path, rounds: int, graph: str = "insights") -> dict[str, object]:
    """``rounds`` runs, each in its own process; the median and every round."""
    measured = []
    for _ in range(rounds):
        out = subprocess.run(
            [sys.executable, "-m", "bench.dagster_floor", str(dagster_home), "--once",
             "--graph", graph],
            capture_output=True, text=True, cwd=REPO, check=True,
        )  # fmt: skip
        measured.append(round(json.loads(out.stdout.strip().splitlines()[-1])["run_s"], 2))
    return {"run_s": round(statistics.median(measured), 2), "rounds_run_s": measured}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dagster_floor", description=__doc__)
    parser.add_argument("dagster_home", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--graph", choices=GRAPHS, default="insights")
    parser.add_argument("--once", action="store_true", help="one run, in this process")
    args = parser.parse_args(argv)
    if not (args.dagster_home / "dagster.yaml").exists():  # flagsight's embedded default
        from api.infra.dagster_home import prepare_dagster_home

        prepare_dagster_home(args.dagster_home, None)
    if args.once:
        print(json.dumps({"run_s": run_once(args.dagster_home, args.graph)}))
    else:
        print(json.dumps(floor_rounds(args.dagster_home, args.rounds, args.graph)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
