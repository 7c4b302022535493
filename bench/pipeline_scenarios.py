"""The pipeline scenarios: a full run over a synthetic lake, then an incremental one.

The lake comes from ``tests/pipelines/synthetic_lake.py`` (the real Parquet schemas), and each
run is ``flagsight pipeline run`` in its own process, as an operator runs it. Two figures per
run: the run itself (what ``run_pipeline_once`` reports: instance, steps, checks) and the whole
process (Python start-up and imports included).
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.servers import REPO

SYNTHETIC_LAKE = REPO / "tests" / "pipelines" / "synthetic_lake.py"
_SUCCEEDED = re.compile(r"succeeded in ([0-9.]+) s")


def _env(data_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLAGSIGHT_", "DAGSTER_"))}
    return env | {"FLAGSIGHT_DATA_DIR": str(data_dir)} | (extra or {})


def write_lake(
    data_dir: Path, evaluations: int, feedback: int, files: int, tag: str, later: bool = False
) -> float:
    """Add a batch of events (ids and file names unique to ``tag``); the seconds it took.
    ``later``: on the day after the history's seven (new traffic), not among them."""
    started = time.monotonic()
    days = ["--first-day", "7", "--days", "1"] if later else []
    subprocess.run(
        [sys.executable, str(SYNTHETIC_LAKE), str(data_dir), str(evaluations), str(feedback),
         "--files", str(files), "--tag", tag, *days],
        check=True, cwd=REPO, env=_env(data_dir),
    )  # fmt: skip
    return time.monotonic() - started


def run_pipeline(data_dir: Path, extra_env: dict[str, str] | None = None) -> dict[str, float]:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "api.cli", "pipeline", "run"],
        capture_output=True, text=True, cwd=REPO, env=_env(data_dir, extra_env), check=False,
    )  # fmt: skip
    process_s = time.monotonic() - started
    match = _SUCCEEDED.search(out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"pipeline run failed: {out.stdout[-2000:]}{out.stderr[-3000:]}")
    return {"run_s": float(match.group(1)), "process_s": round(process_s, 2)}


def dagster_floor(data_dir: Path, home: Path, rounds: int) -> dict[str, object]:
    """``bench.dagster_floor``: the insights job with empty bodies, in an instance of the same
    ``dagster.yaml`` as the lake's (``data_dir``'s), each round in its own process."""
    from bench.dagster_floor import floor_rounds

    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(data_dir / "dagster" / "dagster.yaml", home / "dagster.yaml")
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
