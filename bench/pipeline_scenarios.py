"""The pipeline scenarios: a full run over a synthetic lake, then an incremental one.

The lake comes from ``tests/pipelines/synthetic_lake.py`` (the real Parquet schemas), and each
run is ``flagsight pipeline run`` in its own process, as an operator runs it. Two figures per
run: the run itself (what ``run_pipeline_once`` reports: instance, steps, checks) and the whole
process (Python start-up and imports included).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.servers import REPO

SYNTHETIC_LAKE = REPO / "tests" / "pipelines" / "synthetic_lake.py"
_SUCCEEDED = re.compile(r"run (\S+) succeeded in ([0-9.]+) s")


def _env(data_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLAGSIGHT_", "DAGSTER_"))}
    return env | {"FLAGSIGHT_DATA_DIR": str(data_dir)} | (extra or {})


def write_lake(
    data_dir: Path,
    evaluations: int,
    feedback: int,
    files: int,
    tag: str,
    later: bool = False,
    options: Sequence[str] = (),
) -> float:
    """Add a batch of events (ids and file names unique to ``tag``); the seconds it took.
    ``later``: on the day after the history's seven (new traffic), not among them. ``options``:
    more of ``synthetic_lake.py``'s (tracked events, the tenancy's ids)."""
    started = time.monotonic()
    days = ["--first-day", "7", "--days", "1"] if later else []
    subprocess.run(
        [sys.executable, str(SYNTHETIC_LAKE), str(data_dir), str(evaluations), str(feedback),
         "--files", str(files), "--tag", tag, *days, *options],
        check=True, cwd=REPO, env=_env(data_dir),
    )  # fmt: skip
    return time.monotonic() - started


def run_pipeline(data_dir: Path, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """One ``flagsight pipeline run``: the run's seconds, the process's, and the run's id."""
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "api.cli", "pipeline", "run"],
        capture_output=True, text=True, cwd=REPO, env=_env(data_dir, extra_env), check=False,
    )  # fmt: skip
    process_s = time.monotonic() - started
    match = _SUCCEEDED.search(out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"pipeline run failed: {out.stdout[-2000:]}{out.stderr[-3000:]}")
    return {"run_s": float(match.group(2)), "process_s": round(process_s, 2),
            "run_id": match.group(1)}  # fmt: skip


def dagster_floor(data_dir: Path, home: Path, rounds: int) -> dict[str, object]:
    """``bench.dagster_floor``: the insights job with empty bodies, in an instance configured
    as the lake's (``data_dir``'s settings) but of its own (its ``dagster.yaml`` names its
    folders: a copy of the lake's would write into the lake's instance), each round in its
    own process."""
    from api.infra.dagster_home import prepare_dagster_home
    from api.settings import Settings
    from bench.dagster_floor import floor_rounds

    prepare_dagster_home(home, Settings.from_env(_env(data_dir)).database_url)
    return floor_rounds(home, rounds)


INCREMENT_ROUNDS = 3
"""Incremental runs per measurement, each over its own new events; the median is reported
(one run moved by ±0.5 s on the shared 2-core machine, a sixth of the 3 s goal)."""


def incremental_rounds(data_dir: Path, events: int, rounds: int = INCREMENT_ROUNDS) -> dict:
    """``rounds`` increments of ``events`` new events (two thirds evaluations, on the day after
    the history), each written then loaded by its own run; the medians and every round."""
    runs = []
    for round_number in range(rounds):
        evaluations = events * 2 // 3
        write_lake(data_dir, evaluations, events - evaluations, 2, f"inc{round_number}", True)
        runs.append(run_pipeline(data_dir))
    return {
        "run_s": statistics.median(r["run_s"] for r in runs),
        "process_s": statistics.median(r["process_s"] for r in runs),
        "rounds_run_s": [r["run_s"] for r in runs],
    }


def step_seconds(data_dir: Path, run_id: str) -> dict[str, float]:
    """Each step's seconds in run ``run_id`` of the data directory's Dagster instance."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(data_dir / "dagster")) as instance:
        return {
            stats.step_key: round(stats.end_time - stats.start_time, 2)
            for stats in instance.get_run_step_stats(run_id)
            if stats.start_time is not None and stats.end_time is not None
        }


def _median_steps(runs: list[dict[str, float]], slowest: int = 5) -> dict[str, float]:
    """The ``slowest`` steps by their median seconds over ``runs``, slowest first."""
    medians = {step: statistics.median(run.get(step, 0.0) for run in runs) for step in runs[0]}
    ranked = sorted(medians.items(), key=lambda item: -item[1])[:slowest]
    return {step: round(seconds, 2) for step, seconds in ranked}


def metrics_bench(
    work_dir: Path,
    *,
    evaluations: int,
    tracked: int,
    files: int,
    incremental: int,
    log: Callable[[str], None],
    rounds: int = INCREMENT_ROUNDS,
) -> dict[str, object]:
    """Metrics (contract 13): a lake of ``evaluations`` (half of their users in the arms of 25
    split flags, in two environments), as many feedback as half of them and ``tracked`` tracked
    events over seven days, whose split flags follow ``bench.metric_world.METRICS`` in the
    data directory's control plane; a full run, then ``rounds`` runs each over ``incremental``
    new tracked events of the lake's users (on the day after the history, within most of their
    windows). The medians, every round, the slowest steps and the size of ``metric_users``."""
    from bench.metric_world import METRICS, SPLIT_FLAGS, create_metric_world

    data = work_dir / "lake-metrics"
    world = create_metric_world(data)
    tenancy = ["--organization", world.organization_id,
               "--environments", ",".join(world.environment_ids)]  # fmt: skip
    record: dict[str, object] = {
        "evaluations": evaluations, "feedback": evaluations // 2, "tracked": tracked,
        "metrics": len(METRICS), "follows": len(METRICS) * len(SPLIT_FLAGS) * 2,
    }  # fmt: skip
    record["lake_write_s"] = round(write_lake(data, evaluations, evaluations // 2, files, "hist",
                                              options=[*tenancy, "--track", str(tracked)]), 1)  # fmt: skip
    record["full"] = run_pipeline(data)
    log(f"  full run over {evaluations:,} evaluations and {tracked:,} tracked events, "
        f"{len(METRICS)} metrics: {record['full']}")  # fmt: skip
    runs = []
    for round_number in range(rounds):
        write_lake(data, 0, 0, 2, f"track-inc{round_number}", True,
                   [*tenancy, "--track", str(incremental)])  # fmt: skip
        runs.append(run_pipeline(data))
    record["incremental"] = {
        "run_s": statistics.median(r["run_s"] for r in runs),
        "process_s": statistics.median(r["process_s"] for r in runs),
        "rounds_run_s": [r["run_s"] for r in runs],
        "slowest_steps_s": _median_steps([step_seconds(data, r["run_id"]) for r in runs]),
    }
    record["incremental_events"] = incremental
    record["metric_users"] = _published_rows(data, "metric_users")
    log(f"  incremental run over {incremental:,} new tracked events, {len(METRICS)} metrics "
        f"({record['metric_users']:,} metric_users rows): {record['incremental']}")  # fmt: skip
    return record


def _published_rows(data_dir: Path, table: str) -> int:
    """The rows of ``table`` in the data directory's ``outcomes.duckdb`` (the analysts' per-user
    tables, published beside the warehouse)."""
    import duckdb

    from api.settings import Settings
    from warehouse.read import outcomes_path

    warehouse = Settings.from_env({"FLAGSIGHT_DATA_DIR": str(data_dir)}).warehouse_path
    with duckdb.connect(str(outcomes_path(warehouse)), read_only=True) as con:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])


def copy_lake_to_bucket(data_dir: Path, s3_env: dict[str, str]) -> str:
    """Copy the local lake's files into the bucket of ``s3_env``; the events URI there."""
    import pyarrow.fs as pafs

    from api.infra.objectstore import filesystem_for
    from api.settings import Settings

    target = s3_env["FLAGSIGHT_EVENTS_URI"].rstrip("/") + "-bench-lake"
    settings = Settings.from_env({**s3_env, "FLAGSIGHT_DATA_DIR": str(data_dir)})
    filesystem, base = filesystem_for(target, settings.s3)
    pafs.copy_files(str(data_dir / "events"), base, source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=filesystem, use_threads=True)  # fmt: skip
    return target


def pipeline_bench(
    work_dir: Path,
    *,
    evaluations: int,
    feedback: int,
    files: int,
    incremental: int,
    small_history: int | None,
    log: Callable[[str], None],
    s3_env: dict[str, str] | None = None,
    floor_rounds: int = INCREMENT_ROUNDS,
) -> dict[str, object]:
    """Full run over ``evaluations + feedback`` events, then runs over ``incremental`` new ones
    (``incremental_rounds``) and the same job with empty bodies (``floor_rounds`` runs of
    ``bench.dagster_floor``); optionally the same increments over a small history, to compare.
    With ``s3_env`` (the cluster mode's variables), the same lake is also copied into the
    bucket and loaded from there by a pipeline host of its own."""
    big = work_dir / "lake-big"
    record: dict[str, object] = {"evaluations": evaluations, "feedback": feedback, "files": files}
    record["lake_write_s"] = round(write_lake(big, evaluations, feedback, files, "hist"), 1)
    record["full"] = run_pipeline(big)
    log(f"  full run over {evaluations:,} + {feedback:,} events: {record['full']}")
    if s3_env is not None:
        record["full_s3"] = run_pipeline(
            work_dir / "lake-s3-pipeline",
            s3_env | {"FLAGSIGHT_EVENTS_URI": copy_lake_to_bucket(big, s3_env)},
        )
        log(f"  the same run with the lake in S3 (SeaweedFS): {record['full_s3']}")
    record["incremental"] = incremental_rounds(big, incremental)
    record["incremental_events"] = incremental
    log(f"  incremental run over {incremental:,} new events: {record['incremental']}")
    record["dagster_floor"] = dagster_floor(big, work_dir / "dagster-floor", floor_rounds)
    log(f"  the same job with empty bodies (Dagster's own cost): {record['dagster_floor']}")
    if small_history:
        small = work_dir / "lake-small"
        write_lake(small, small_history * 2 // 3, small_history - small_history * 2 // 3, 2, "hist")
        record["small_history_full"] = run_pipeline(small)
        record["small_history_incremental"] = incremental_rounds(small, incremental)
        record["small_history_events"] = small_history
        log(f"  same increment over {small_history:,} events of history: "
            f"{record['small_history_incremental']}")  # fmt: skip
    return record
