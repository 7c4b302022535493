"""A small, exact event lake for the pipeline tests, and the figures computed independently.

Two waves of files. Wave 1 holds most evaluations and feedback, including feedback whose
evaluation only arrives in wave 2 (late) and feedback whose evaluation never arrives (orphan).
Wave 2 holds those evaluations, a re-sealed copy of a wave-1 evaluation file, and feedback that
supersedes earlier feedback. Both waves have duplicates, null latencies, an unknown flag key,
two environments (one without a key in the control plane) and half-written files to ignore.
"""

from __future__ import annotations

import random
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from api.controlplane.sqlite_store import SqliteControlPlaneStore
from api.eventlog.layout import type_dir
from api.eventlog.schema import (
    EVALUATION,
    EVALUATION_SCHEMA,
    EVENT_TYPES,
    FEEDBACK,
    FEEDBACK_SCHEMA,
)

ORG = "org_fixture"
ENV_PROD = "env_00000000000000aa"  # key "production" in the control plane
ENV_STAGING = "env_00000000000000bb"  # not in the control plane: key NULL
PROD_KEY = "production"
DAY0 = datetime(2026, 3, 1, tzinfo=UTC)
MIN_FEEDBACK = 150


@dataclass
class Lake:
    evaluations: list[dict] = field(default_factory=list)  # as written, duplicates included
    feedback: list[dict] = field(default_factory=list)


def _evaluation(
    eid: str, env: str, flag: str, at: datetime, value: bool, error: str | None
) -> dict:
    return {
        "schema_version": 2,
        "evaluation_id": eid,
        "evaluated_at": at,
        "organization_id": ORG,
        "environment_id": env,
        "flag_key": flag,
        "user_identifier": f"user-{eid}",
        "value": value,
        "matched_rule_type": None if error else "PERCENTAGE",
        "error_type": error,
        "sdk": "python/1.0",
        "api_key_id": f"key-{env}",
        "source": "v1",
        "rule_index": None if error or not value else 0,
        "arm": None if error else ("treatment" if value else "control"),
        "rollout_percentage": None if error else 50.0,
    }


def _feedback(evaluation: dict, at: datetime, result: bool, latency: float | None) -> dict:
    return {
        "schema_version": 1,
        "evaluation_id": evaluation["evaluation_id"],
        "received_at": at,
        "organization_id": ORG,
        "environment_id": evaluation["environment_id"],
        "result": result,
        "latency_ms": latency,
        "error_type": None if result else "app_error",
        "api_key_id": evaluation["api_key_id"],
    }


def _make_evaluations(rng: random.Random) -> list[dict]:
    plan = [  # env, flag, count, error
        (ENV_PROD, "checkout", 900, None),
        (ENV_PROD, "search", 120, None),
        (ENV_PROD, "ghost-flag", 40, "FLAG_NOT_FOUND"),
        (ENV_STAGING, "checkout", 150, None),
        (ENV_STAGING, "beta.banner", 60, None),
    ]
    rows = []
    for env, flag, count, error in plan:
        for i in range(count):
            at = DAY0 + timedelta(seconds=rng.randrange(3 * 86_400))
            value = False if error else rng.random() < 0.5
            rows.append(_evaluation(f"{env[-2:]}-{flag}-{i:05d}", env, flag, at, value, error))
    rows.sort(key=lambda r: r["evaluated_at"])
    return rows


def _success_probability(evaluation: dict) -> float:
    if evaluation["flag_key"] == "checkout" and evaluation["environment_id"] == ENV_PROD:
        return 0.9 if evaluation["value"] else 0.6
    return 0.75


def _make_feedback(rng: random.Random, evaluations: list[dict]) -> list[dict]:
    rows = []
    for ev in evaluations:
        if rng.random() > 0.7:
            continue
        at = ev["evaluated_at"] + timedelta(seconds=rng.randrange(1, 30 * 3600))  # may cross a day
        latency = None if rng.random() < 0.2 else round(rng.uniform(5, 900), 3)
        first = _feedback(ev, at, rng.random() < _success_probability(ev), latency)
        rows.append(first)
        roll = rng.random()
        if roll < 0.08:  # an exact duplicate (client retry)
            rows.append(dict(first))
        elif roll < 0.2:  # a later correction, possibly with the other result and no latency
            later = at + timedelta(seconds=rng.randrange(1, 7200))
            rows.append(_feedback(ev, later, rng.random() < 0.5, None if roll < 0.14 else 42.5))
        elif roll < 0.24:  # an older report received later in the file order
            earlier = at - timedelta(seconds=1)
            rows.append(_feedback(ev, earlier, not first["result"], 1.0))
    return rows


def build_waves(seed: int = 7) -> tuple[Lake, Lake]:
    """The events of wave 1 and wave 2 (wave 2 alone: what is added later)."""
    rng = random.Random(seed)
    evaluations = _make_evaluations(rng)
    feedback = _make_feedback(rng, evaluations)
    late_ids = {ev["evaluation_id"] for ev in rng.sample(evaluations, 60)}
    wave1 = Lake([e for e in evaluations if e["evaluation_id"] not in late_ids], [])
    wave2 = Lake([e for e in evaluations if e["evaluation_id"] in late_ids], [])
    for row in feedback:  # supersessions (second row of an id) go to wave 2 half of the time
        seen_before = any(f["evaluation_id"] == row["evaluation_id"] for f in wave1.feedback[-3:])
        (wave2 if seen_before and rng.random() < 0.5 else wave1).feedback.append(row)
    orphan = _evaluation("aa-never-loaded", ENV_PROD, "checkout", DAY0, True, None)
    wave1.feedback.append(_feedback(orphan, DAY0 + timedelta(hours=1), True, 10.0))
    return wave1, wave2


def write_wave(
    events_dir: Path, wave: Lake, name: str, resealed_copy_of: list[dict] | None = None
) -> None:
    """Write one wave as several files per date partition, plus files the loader must ignore."""
    _write(
        events_dir / type_dir(EVALUATION), EVALUATION_SCHEMA, wave.evaluations, "evaluated_at", name
    )
    _write(events_dir / type_dir(FEEDBACK), FEEDBACK_SCHEMA, wave.feedback, "received_at", name)
    if resealed_copy_of:
        _write_file(
            events_dir / type_dir(EVALUATION),
            EVALUATION_SCHEMA,
            resealed_copy_of,
            "evaluated_at",
            f"{name}-resealed",
        )
    for kind in EVENT_TYPES:
        folder = events_dir / type_dir(kind) / f"date={DAY0.date().isoformat()}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f".{name}-inflight.parquet").write_bytes(b"PAR1 half written")
        (folder / f"{name}-sealing.parquet.tmp").write_bytes(b"PAR1 half written")


def _write(root: Path, schema: pa.Schema, rows: list[dict], time_key: str, name: str) -> None:
    by_day: dict[date, list[dict]] = defaultdict(list)
    for row in rows:
        by_day[row[time_key].date()].append(row)
    for day, day_rows in sorted(by_day.items()):
        for part in range(2):
            chunk = day_rows[part::2]
            if chunk:
                _write_file(root, schema, chunk, time_key, f"{name}-{day.isoformat()}-{part}")


def _write_file(root: Path, schema: pa.Schema, rows: list[dict], time_key: str, stem: str) -> None:
    folder = root / f"date={rows[0][time_key].date().isoformat()}"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), folder / f"{stem}.parquet")


def write_control_plane(path: Path) -> None:
    """A control-plane database (the store's own schema) that knows only the production
    environment, under the fixture's fixed ids."""
    SqliteControlPlaneStore(path).close()
    con = sqlite3.connect(path)
    con.execute("INSERT INTO organizations VALUES (?, 'Fixture', 'pro', 1000000, '', 1)", [ORG])
    con.execute(
        "INSERT INTO environments VALUES (?, ?, ?, ?, 1, '', 1)",
        [ENV_PROD, ORG, PROD_KEY, PROD_KEY],
    )
    con.commit()
    con.close()


# ---------------------------------------------------------------------------------------------
# Independent computation of every figure, straight from the contract's definitions.


def winner_key(row: dict) -> tuple:
    """Which feedback of an evaluation is kept: the greatest key (the warehouse's order)."""
    latency = row["latency_ms"]
    return (row["received_at"], row["result"], -1.0 if latency is None else latency)


def _figures(evaluations: int, feedback: list[dict]) -> dict:
    successes = sum(1 for f in feedback if f["result"])
    failures = len(feedback) - successes
    latencies = [f["latency_ms"] for f in feedback if f["latency_ms"] is not None]
    return {
        "evaluations": evaluations,
        "feedback_count": len(feedback),
        "feedback_coverage": len(feedback) / evaluations * 100 if evaluations else None,
        "success_count": successes,
        "failure_count": failures,
        "success_rate": successes / len(feedback) * 100 if feedback else None,
        "failure_rate": failures / len(feedback) * 100 if feedback else None,
        "avg_latency_ms": sum(latencies) / len(latencies) if latencies else None,
        "latencies": sorted(latencies),
    }


@dataclass
class Expected:
    metrics: dict[tuple[str, str], dict]
    daily: dict[tuple[str, str, str], dict]
    sides: dict[tuple[str, str], dict[bool, dict]]
    pending: int


def expected_figures(evaluation_rows: list[dict], feedback_rows: list[dict]) -> Expected:
    evaluations: dict[str, dict] = {}
    for row in evaluation_rows:
        evaluations.setdefault(row["evaluation_id"], row)
    latest: dict[str, dict] = {}
    for row in feedback_rows:
        kept = latest.get(row["evaluation_id"])
        if kept is None or winner_key(row) > winner_key(kept):
            latest[row["evaluation_id"]] = row
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for ev in evaluations.values():
        groups[(ev["environment_id"], ev["flag_key"])].append(ev)
    pending = sum(1 for eid in latest if eid not in evaluations)

    def feedback_of(evs: list[dict]) -> list[dict]:
        return [latest[e["evaluation_id"]] for e in evs if e["evaluation_id"] in latest]

    metrics, daily, sides = {}, {}, {}
    for key, evs in groups.items():
        metrics[key] = _figures(len(evs), feedback_of(evs))
        metrics[key]["environment_key"] = PROD_KEY if key[0] == ENV_PROD else None
        by_day: dict[str, list[dict]] = defaultdict(list)
        for ev in evs:
            by_day[ev["evaluated_at"].astimezone(UTC).date().isoformat()].append(ev)
        for day, day_evs in by_day.items():
            daily[(*key, day)] = _figures(len(day_evs), feedback_of(day_evs))
        sides[key] = {
            value: _figures(len(side), feedback_of(side))
            for value in (True, False)
            for side in [[e for e in evs if e["value"] is value]]
        }
    return Expected(metrics, daily, sides, pending)
