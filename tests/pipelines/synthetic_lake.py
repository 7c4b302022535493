"""A fast synthetic event lake for smoke runs and timing (not the exact-figures fixture).

Usage: python tests/pipelines/synthetic_lake.py DATA_DIR EVALUATIONS FEEDBACK [--files N] [--tag T]
                                                [--first-day D] [--days K] [--track M]
                                                [--organization ORG] [--environments E1,E2]
Writes N evaluation and N feedback files under DATA_DIR/events with the real schemas; every
feedback row refers to an evaluation written by the same call. Events fall on K days from day D
after 2026-01-01 (an increment on a later day than its history, as new traffic is). Half the
flags are 50 % rollouts: their users are in an arm (by user, as bucketing puts them), and
treatment fails more often than control. ``--track M`` adds M tracked events (N files) of
the same users and environments, ``TRACK_EVENT_NAMES`` in turn, two in three with a value.
``--organization`` and ``--environments`` name the ids (a control plane's, where the pipeline
must find the flags and the metrics they follow); 70 % of events are in the first environment.
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
    TRACK,
    TRACK_SCHEMA,
)

DAY_US = 86_400_000_000
START_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
USERS = 100_000
"""Users are ``user-0`` to ``user-99999`` in every call, so that increments meet the history's."""
ORGANIZATION = "org_1"
ENVIRONMENTS = ("env_00000000000000a1", "env_00000000000000b2")
TRACK_EVENT_NAMES = ("purchase", "signup", "page-view", "app-error")
"""The tracked events' names, in turn (a bench's metrics count them)."""


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
    *,
    track: int = 0,
    organization: str = ORGANIZATION,
    environments: tuple[str, str] = ENVIRONMENTS,
) -> None:
    seed = abs(hash(tag)) % 2**32
    rng = np.random.default_rng(seed)
    events = data_dir / "events"
    if track:
        _write(_track_table(np.random.default_rng(seed + 1), track, first_day, days, organization, environments),
               events / type_dir(TRACK), tag, files)  # fmt: skip
    if not evaluations:
        return
    ids = _ids(tag, evaluations)
    at = START_US + first_day * DAY_US + rng.integers(0, days * DAY_US, evaluations)
    env = np.where(rng.random(evaluations) < 0.7, *environments)
    flag_numbers = rng.integers(0, 50, evaluations)
    flags = np.char.add("flag-", flag_numbers.astype(str))
    user_numbers = rng.integers(0, USERS, evaluations)
    split = flag_numbers < 25
    value = np.where(split, user_numbers % 2 == 0, rng.random(evaluations) < 0.5)
    arm = np.where(split, np.where(value, "treatment", "control"), None)
    n = evaluations
    table = pa.table(
        {
            "schema_version": pa.array(np.full(n, 2, np.int16)),
            "evaluation_id": ids,
            "evaluated_at": pa.array(at, pa.timestamp("us", tz="UTC")),
            "organization_id": pa.array(np.full(n, organization)),
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
            "organization_id": pa.array(np.full(m, organization)),
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


def _track_table(
    rng: np.random.Generator,
    n: int,
    first_day: int,
    days: int,
    organization: str,
    environments: tuple[str, str],
) -> pa.Table:
    """``n`` tracked events of the lake's users, at arrival (``occurred_at`` = ``received_at``)."""
    at = pa.array(START_US + first_day * DAY_US + rng.integers(0, days * DAY_US, n),
                  pa.timestamp("us", tz="UTC"))  # fmt: skip
    users = np.char.add("user-", rng.integers(0, USERS, n).astype(str))
    names = np.array(TRACK_EVENT_NAMES)[np.arange(n) % len(TRACK_EVENT_NAMES)]
    value = rng.lognormal(3.0, 1.0, n)
    return pa.table(
        {
            "schema_version": pa.array(np.full(n, 2, np.int16)),
            "occurred_at": at,
            "received_at": at,
            "organization_id": pa.array(np.full(n, organization)),
            "environment_id": pa.array(np.where(rng.random(n) < 0.7, *environments)),
            "event_name": pa.array(names),
            "user_identifier": pa.array(users),
            "value": pa.array(value, mask=rng.random(n) < 1 / 3),
            "source": pa.array(np.full(n, "http")),
            "api_key_id": pa.array(np.full(n, "key_1")),
        },
        schema=TRACK_SCHEMA,
    )


def _write(table: pa.Table, root: Path, tag: str, files: int) -> None:
    # the folder's date is the first time column's, as sealing puts it
    time_column = next(f.name for f in table.schema if pa.types.is_timestamp(f.type))
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
    parser.add_argument("--track", type=int, default=0, help="tracked events to add")
    parser.add_argument("--organization", default=ORGANIZATION)
    parser.add_argument("--environments", default=",".join(ENVIRONMENTS), help="two ids, a comma")
    args = parser.parse_args()
    first, second = args.environments.split(",")
    write_lake(
        args.data_dir,
        args.evaluations,
        args.feedback,
        args.files,
        args.tag,
        args.first_day,
        args.days,
        track=args.track,
        organization=args.organization,
        environments=(first, second),
    )


if __name__ == "__main__":
    main()
