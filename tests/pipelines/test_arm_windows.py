"""``flag_arm_windows`` run after run against an independent computation from every event.

Events near now, so that all three grains are kept (minutes 48 hours, hours 35 days, days
always), loaded in waves into a real working database and folded as the pipeline folds them:
late evaluations whose feedback came first, corrections that replace kept feedback, feedback
for old windows that no evaluation touches again, users evaluated many times in one window.
After each fold the table must equal what the events say, window by window.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from pipelines.attribution import fold_new_events
from pipelines.derived import build_windows
from tests.pipelines.fixture_lake import winner_key
from warehouse.migrations import LATEST_VERSION, migrate

GRAINS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
KEPT = {"minute": timedelta(hours=48), "hour": timedelta(days=35)}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Window = tuple[str, str, str, datetime, str]


@pytest.fixture
def con(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect(str(tmp_path / "working.duckdb"))
    migrate(connection)
    yield connection
    connection.close()


def _floor(at: datetime, grain: str) -> datetime:
    step = GRAINS[grain]
    return _EPOCH + ((at - _EPOCH) // step) * step


def expected_windows(evaluations: list[dict], feedback: list[dict], now: datetime) -> dict:
    """Per window: evaluations, distinct users, evaluations with kept feedback, failures and
    the kept feedback's latency sum and count, as the warehouse README defines them."""
    latest: dict[str, dict] = {}
    for row in feedback:
        kept = latest.get(row["evaluation_id"])
        if kept is None or winner_key(row) > winner_key(kept):
            latest[row["evaluation_id"]] = row
    figures: dict[Window, dict] = defaultdict(
        lambda: {"evaluations": 0, "users": set(), "feedback": 0, "failures": 0,
                 "latency_sum": 0.0, "latency_count": 0}
    )  # fmt: skip
    for ev in evaluations:
        if ev["arm"] is None:
            continue
        for grain in GRAINS:
            start = _floor(ev["evaluated_at"], grain)
            if grain in KEPT and start < now - KEPT[grain]:
                continue
            window = figures[(ev["environment_id"], ev["flag_key"], grain, start, ev["arm"])]
            window["evaluations"] += 1
            window["users"].add(ev["user_identifier"])
            kept = latest.get(ev["evaluation_id"])
            if kept is not None:
                window["feedback"] += 1
                window["failures"] += not kept["result"]
                if kept["latency_ms"] is not None:
                    window["latency_sum"] += kept["latency_ms"]
                    window["latency_count"] += 1
    return {
        key: (f["evaluations"], len(f["users"]), f["feedback"], f["failures"],
              round(f["latency_sum"], 6), f["latency_count"])
        for key, f in figures.items()
    }  # fmt: skip


def stored_windows(con: duckdb.DuckDBPyConnection) -> dict:
    rows = con.execute(
        "SELECT environment_id, flag_key, grain, window_start, arm, evaluations, users, "
        "feedback_count, failure_count, latency_sum, latency_count FROM flag_arm_windows"
    ).fetchall()
    return {
        (env, flag, grain, start.astimezone(UTC), arm): (n, users, fb, fail, round(lat, 6), lc)
        for env, flag, grain, start, arm, n, users, fb, fail, lat, lc in rows
    }


def _evaluation(eid: str, env: str, flag: str, user: str, at: datetime, arm: str | None) -> dict:
    return {
        "evaluation_id": eid, "evaluated_at": at, "organization_id": "org_w",
        "environment_id": env, "flag_key": flag, "user_identifier": user,
        "value": arm == "treatment", "matched_rule_type": "PERCENTAGE" if arm else "STATIC",
        "error_type": None, "sdk": "python/1.0", "api_key_id": "key_w", "source": "v1",
        "schema_version": 2, "rule_index": 0 if arm else None, "arm": arm,
        "rollout_percentage": 50.0 if arm else None,
    }  # fmt: skip


def _feedback(ev: dict, received_at: datetime, result: bool, latency: float | None) -> dict:
    return {
        "evaluation_id": ev["evaluation_id"], "received_at": received_at,
        "organization_id": "org_w", "environment_id": ev["environment_id"], "result": result,
        "latency_ms": latency, "error_type": None if result else "app_error",
        "api_key_id": "key_w", "schema_version": 1,
    }  # fmt: skip


def load(con: duckdb.DuckDBPyConnection, table: str, event_type: str, rows: list[dict]) -> None:
    """One load batch of ``rows``, recorded as the loader records it."""
    batch = con.execute("SELECT nextval('load_batch_seq')").fetchone()[0]
    if rows:
        columns = list(rows[0])
        con.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}, load_batch) "
            f"VALUES ({', '.join('?' * len(columns))}, {batch})",
            [[row[c] for c in columns] for row in rows],
        )
    con.execute(
        "INSERT INTO load_batches VALUES (?, ?, 1, ?, ?, 0, current_timestamp, 'test')",
        [batch, event_type, len(rows), len(rows)],
    )


def make_events(rng: random.Random, now: datetime) -> list[dict]:
    """Evaluations of two split flags and one without arms, by 40 users (so most windows see
    a user more than once), at times kept at every grain, at hour and day only, and at day
    only; none within an hour of a retention boundary."""
    spans = [(timedelta(minutes=2), timedelta(hours=46)),
             (timedelta(hours=50), timedelta(days=10)),
             (timedelta(days=40), timedelta(days=60))]  # fmt: skip
    flags = [("env_a", "checkout", True), ("env_a", "banner", False), ("env_b", "checkout", True)]
    rows = []
    for index in range(900):
        env, flag, split = rng.choice(flags)
        low, high = rng.choice(spans)
        at = now - low - (high - low) * rng.random()
        at = at.replace(microsecond=0) if index % 7 == 0 else at  # some on a minute's edge
        user = f"user-{rng.randrange(40)}"
        arm = rng.choice(["treatment", "control"]) if split else None
        rows.append(_evaluation(f"ev-{index:04d}", env, flag, user, at, arm))
    return rows


def make_feedback(rng: random.Random, evaluations: list[dict], now: datetime) -> list[dict]:
    rows = []
    for ev in evaluations:
        if rng.random() < 0.75:
            latency = None if rng.random() < 0.2 else round(rng.uniform(1, 900), 3)
            at = min(now, ev["evaluated_at"] + timedelta(seconds=rng.randrange(1, 3600)))
            rows.append(_feedback(ev, at, rng.random() < 0.7, latency))
    return rows


def test_windows_equal_the_events_run_after_run(con: duckdb.DuckDBPyConnection) -> None:
    rng = random.Random(11)
    now = datetime.now(UTC)
    evaluations = make_events(rng, now)
    first_feedback = make_feedback(rng, evaluations, now)
    late = set(rng.sample(range(len(evaluations)), 150))
    waves = [[ev for i, ev in enumerate(evaluations) if i not in late],
             [ev for i, ev in enumerate(evaluations) if i in late]]  # fmt: skip
    # Wave 2: corrections of wave-1 feedback (another result, latency or none; some on
    # windows no new evaluation touches), and first feedback of evaluations that had none.
    answered = {f["evaluation_id"] for f in first_feedback}
    by_id = {ev["evaluation_id"]: ev for ev in evaluations}
    corrections = [
        _feedback(by_id[f["evaluation_id"]], f["received_at"] + timedelta(seconds=5),
                  not f["result"], rng.choice([None, 3.25, f["latency_ms"]]))
        for f in rng.sample(first_feedback, 120)
    ]  # fmt: skip
    unanswered = [ev for ev in evaluations if ev["evaluation_id"] not in answered]
    newcomers = make_feedback(rng, unanswered, now)
    stale = [  # older than what is kept: never wins
        _feedback(by_id[f["evaluation_id"]], f["received_at"] - timedelta(hours=1), False, 1.0)
        for f in rng.sample(first_feedback, 30)
    ]
    # Wave 3: the same users again in windows they were already counted in, and new ones.
    repeats = [
        _evaluation(f"ev-r{i:03d}", ev["environment_id"], ev["flag_key"],
                    ev["user_identifier"] if i % 2 else f"user-new-{i}",
                    ev["evaluated_at"] + timedelta(seconds=1), ev["arm"])
        for i, ev in enumerate(rng.sample(evaluations, 80))
    ]  # fmt: skip
    loads = [
        (waves[0], first_feedback),  # feedback of late evaluations waits
        (waves[1], corrections + newcomers + stale),
        (repeats, make_feedback(rng, repeats, now)),
        ([], []),  # nothing new: nothing may change
    ]
    seen_evaluations: list[dict] = []
    seen_feedback: list[dict] = []
    for new_evaluations, new_feedback in loads:
        load(con, "evaluation_events", "evaluation", new_evaluations)
        load(con, "feedback_events", "feedback", new_feedback)
        seen_evaluations += new_evaluations
        seen_feedback += new_feedback
        fold_new_events(con, "test")
        build_windows(con)
        expected = expected_windows(seen_evaluations, seen_feedback, now)
        stored = stored_windows(con)
        assert {k[2] for k in expected} == set(GRAINS)
        assert stored.keys() == expected.keys()
        wrong = {k: (stored[k], expected[k]) for k in expected if stored[k] != expected[k]}
        assert not wrong, f"{len(wrong)} windows differ, e.g. {next(iter(wrong.items()))}"


def test_minutes_a_failed_run_left_to_recompute_are_recomputed_by_the_upgrade(
    tmp_path: Path,
) -> None:
    """A database of version 6 whose last run folded events and failed before its windows
    (their minutes still in ``window_dirty``, the windows stale): the upgrade recomputes them
    from the events, and later folds add to exact windows."""
    con = duckdb.connect(str(tmp_path / "working.duckdb"))
    migrate(con, up_to=6)
    rng = random.Random(5)
    now = datetime.now(UTC)
    evaluations = make_events(rng, now)
    feedback = make_feedback(rng, evaluations, now)
    load(con, "evaluation_events", "evaluation", evaluations)
    con.execute(  # what version 6's fold kept and marked
        "INSERT INTO feedback_latest SELECT f.evaluation_id, f.organization_id, "
        "f.environment_id, f.received_at, f.result, f.latency_ms, e.environment_id, e.flag_key, "
        "utc_date(e.evaluated_at), e.value, e.user_identifier, e.arm, e.rollout_percentage, "
        "e.evaluated_at FROM (SELECT unnest(?, recursive := true)) AS f "
        "JOIN evaluation_events AS e USING (evaluation_id)",
        [feedback],
    )
    con.execute(
        "INSERT INTO window_dirty SELECT DISTINCT environment_id, flag_key, "
        "utc_floor(evaluated_at, 60000000) FROM evaluation_events WHERE arm IS NOT NULL"
    )
    con.execute(
        "INSERT INTO flag_arm_windows VALUES ('env_a', 'checkout', 'day', ?, 'control', "
        "99, 99, 99, 99, 99.0, 99)",
        [_floor(evaluations[0]["evaluated_at"], "day")],
    )  # stale
    con.execute("INSERT INTO fold_state VALUES ('evaluations_folded', 1)")

    assert migrate(con) == list(range(7, LATEST_VERSION + 1))
    assert stored_windows(con) == expected_windows(evaluations, feedback, now)
    tables = {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "window_dirty" not in tables and "window_deltas" in tables

    more = [
        _evaluation(f"ev-m{i:03d}", ev["environment_id"], ev["flag_key"], ev["user_identifier"],
                    ev["evaluated_at"] + timedelta(seconds=2), ev["arm"])
        for i, ev in enumerate(rng.sample(evaluations, 60))
    ]  # fmt: skip
    more_feedback = make_feedback(rng, more + evaluations[:100], now)
    load(con, "evaluation_events", "evaluation", more)
    load(con, "feedback_events", "feedback", more_feedback)
    fold_new_events(con, "test")
    build_windows(con)
    assert stored_windows(con) == expected_windows(
        evaluations + more, feedback + more_feedback, now
    )
    con.close()
