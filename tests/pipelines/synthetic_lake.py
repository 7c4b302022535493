"""A fast synthetic event lake for smoke runs and timing (not the exact-figures fixture).

Usage: python tests/pipelines/synthetic_lake.py DATA_DIR EVALUATIONS FEEDBACK [--files N] [--tag T]
                                                [--first-day D] [--days K]
Writes N evaluation and N feedback files under DATA_DIR/events with the real schemas; every
feedback row refers to an evaluation written by the same call. Events fall on K days from day D
after 2026-01-01 (an increment on a later day than its history, as new traffic is). Half the
flags are 50 % rollouts: their users are in an arm (by user, as bucketing puts them), and
treatment fails more often than control.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from api.eventlog.layout import type_dir  # noqa: E402
from api.eventlog.schema import (  # noqa: E402
    EVALUATION,
    EVALUATION_SCHEMA,
    FEEDBACK,
    FEEDBACK_SCHEMA,
)

DAY_US = 86_400_000_000
START_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z


def _ids(tag: str, n: int) -> pa.Array:
    numbers = pa.array(np.arange(n), pa.int64()).cast(pa.string())
    return pa.compute.binary_join_element_wise(pa.scalar(f"ev-{tag}-"), numbers, "")


def write_lake(
    data_dir: Path,
    evaluations: int,
    feedback: int,
    files: int,
    tag: str,
    first_day: int = 0,
    days: int = 7,
) -> None:
    rng = np.random.default_rng(abs(hash(tag)) % 2**32)
    events = data_dir / "events"
    ids = _ids(tag, evaluations)
    at = START_US + first_day * DAY_US + rng.integers(0, days * DAY_US, evaluations)
    env = np.where(rng.random(evaluations) < 0.7, "env_00000000000000a1", "env_00000000000000b2")
    flag_numbers = rng.integers(0, 50, evaluations)
    flags = np.char.add("flag-", flag_numbers.astype(str))
    user_numbers = rng.integers(0, 100_000, evaluations)
    split = flag_numbers < 25
    value = np.where(split, user_numbers % 2 == 0, rng.random(evaluations) < 0.5)
    arm = np.where(split, np.where(value, "treatment", "control"), None)
    n = evaluations
    table = pa.table(
        {
            "schema_version": pa.array(np.full(n, 2, np.int16)),
            "evaluation_id": ids,
            "evaluated_at": pa.array(at, pa.timestamp("us", tz="UTC")),
            "organization_id": pa.array(np.full(n, "org_1")),
            "environment_id": pa.array(env),
            "flag_key": pa.array(flags),
            "user_identifier": pa.array(np.char.add("user-", user_numbers.astype(str))),
            "value": pa.array(value),
            "matched_rule_type": pa.array(
                np.where(value, np.where(split, "PERCENTAGE", "STATIC"), None)
            ),
            "error_type": pa.nulls(n, pa.string()),
            "sdk": pa.nulls(n, pa.string()),
            "api_key_id": pa.array(np.full(n, "key_1")),
            "source": pa.array(np.full(n, "v1")),
            "rule_index": pa.array(np.where(value, 0, -1), mask=~value, type=pa.int16()),
            "arm": pa.array(arm, pa.string()),
            "rollout_percentage": pa.array(np.where(split, 50.0, np.nan), from_pandas=True),
        },
        schema=EVALUATION_SCHEMA,
    )
    _write(table, events / type_dir(EVALUATION), tag, files)
    pick = rng.integers(0, evaluations, feedback)
    m = feedback
    latency = rng.exponential(120.0, m)
    fb = pa.table(
        {
            "schema_version": pa.array(np.full(m, 2, np.int16)),
            "evaluation_id": ids.take(pa.array(pick)),
            "received_at": pa.array(
                at[pick] + rng.integers(0, 60_000_000, m), pa.timestamp("us", tz="UTC")
            ),
            "organization_id": pa.array(np.full(m, "org_1")),
            "environment_id": pa.array(env[pick]),
            "result": pa.array(rng.random(m) < np.where(arm[pick] == "treatment", 0.78, 0.8)),
            "latency_ms": pa.array(
                np.where(rng.random(m) < 0.1, np.nan, latency), from_pandas=True
            ),
            "error_type": pa.nulls(m, pa.string()),
            "api_key_id": pa.array(np.full(m, "key_1")),
        },
        schema=FEEDBACK_SCHEMA,
    )
    _write(fb, events / type_dir(FEEDBACK), tag, files)


def _write(table: pa.Table, root: Path, tag: str, files: int) -> None:
    time_column = "evaluated_at" if "evaluated_at" in table.column_names else "received_at"
    step = -(-table.num_rows // files)
    for index in range(files):
        part = table.slice(index * step, step)
        if part.num_rows == 0:
            continue
        first = part.column(time_column)[0].as_py()
        folder = root / f"date={first.date().isoformat()}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(part, folder / f"{tag}-{index:05d}.parquet")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("evaluations", type=int)
    parser.add_argument("feedback", type=int)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--tag", default="a")
    parser.add_argument("--first-day", type=int, default=0)
    parser.add_argument("--days", type=int, default=7)
    args = parser.parse_args()
    write_lake(
        args.data_dir,
        args.evaluations,
        args.feedback,
        args.files,
        args.tag,
        args.first_day,
        args.days,
    )


if __name__ == "__main__":
    main()
