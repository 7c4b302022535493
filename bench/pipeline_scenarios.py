"""The pipeline scenarios: a full run over a synthetic lake, then an incremental one.

The lake comes from ``tests/pipelines/synthetic_lake.py`` (the real Parquet schemas), and each
run is ``flagsight pipeline run`` in its own process, as an operator runs it. Two figures per
run: the run itself (what ``run_pipeline_once`` reports: instance, steps, checks) and the whole
process (Python start-up and imports included).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.servers import REPO

SYNTHETIC_LAKE = REPO / "tests" / "pipelines" / "synthetic_lake.py"
_SUCCEEDED = re.compile(r"succeeded in ([0-9.]+) s")


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLAGSIGHT_", "DAGSTER_"))}
    return env | {"FLAGSIGHT_DATA_DIR": str(data_dir)}


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


def run_pipeline(data_dir: Path) -> dict[str, float]:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "api.cli", "pipeline", "run"],
        capture_output=True, text=True, cwd=REPO, env=_env(data_dir), check=False,
    )  # fmt: skip
    process_s = time.monotonic() - started
    match = _SUCCEEDED.search(out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"pipeline run failed: {out.stdout[-2000:]}{out.stderr[-3000:]}")
    return {"run_s": float(match.group(1)), "process_s": round(process_s, 2)}


def pipeline_bench(
    work_dir: Path,
    *,
    evaluations: int,
    feedback: int,
    files: int,
    incremental: int,
    small_history: int | None,
    log: Callable[[str], None],
) -> dict[str, object]:
    """Full run over ``evaluations + feedback`` events, then one over ``incremental`` new ones
    (two thirds evaluations); optionally the same increment over a small history, to compare."""
    big = work_dir / "lake-big"
    record: dict[str, object] = {"evaluations": evaluations, "feedback": feedback, "files": files}
    record["lake_write_s"] = round(write_lake(big, evaluations, feedback, files, "hist"), 1)
    record["full"] = run_pipeline(big)
    log(f"  full run over {evaluations:,} + {feedback:,} events: {record['full']}")
    inc_eval = incremental * 2 // 3
    write_lake(big, inc_eval, incremental - inc_eval, 2, "inc", later=True)
    record["incremental"] = run_pipeline(big)
    record["incremental_events"] = incremental
    log(f"  incremental run over {incremental:,} new events: {record['incremental']}")
    if small_history:
        small = work_dir / "lake-small"
        write_lake(small, small_history * 2 // 3, small_history - small_history * 2 // 3, 2, "hist")
        record["small_history_full"] = run_pipeline(small)
        write_lake(small, inc_eval, incremental - inc_eval, 2, "inc", later=True)
        record["small_history_incremental"] = run_pipeline(small)
        record["small_history_events"] = small_history
        log(f"  same increment over {small_history:,} events of history: "
            f"{record['small_history_incremental']}")  # fmt: skip
    return record
