"""A metric per exposed user and its comparison (contract section 13), on a real DuckDB with the
pipeline's schema: each kind's per-user value against an independent count, the window and the
pre-period, users never exposed, and the decision read by the metric's ``better``."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow as pa
import pytest

from api.controlplane.model import Better, Metric, MetricFollow, MetricKind
from pipelines.metrics import compute_metrics
from warehouse.migrations import migrate
from warehouse.read import health_comparisons
from warehouse.statistics import MOMENT_COLUMNS

ENV, FLAG, ORG = "env_metrics", "checkout", "org_metrics"
EXPOSED = datetime(2026, 11, 20, 12, tzinfo=UTC)
WINDOW_HOURS = 24


def _metric(key: str, kind: MetricKind, better: Better = Better.HIGHER) -> Metric:
    return Metric(ORG, key, key.title(), "purchase", kind, WINDOW_HOURS, better, EXPOSED, EXPOSED)


def _follows(*metrics: Metric) -> list[MetricFollow]:
    return [MetricFollow(ORG, ENV, FLAG, metric) for metric in metrics]


@pytest.fixture
def con(tmp_path) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(str(tmp_path / "working.duckdb"))
    connection.execute("SET TimeZone = 'UTC'")
    migrate(connection)
    yield connection
    connection.close()


def _expose(con, user: str, arm: str, at: datetime, percentage: float = 50.0) -> None:
    _expose_many(con, [(user, arm, at, percentage)])


def _expose_many(con, users: list[tuple[str, str, datetime, float]]) -> None:
    """``arm_users`` rows as the fold writes them: (user, arm, first evaluation, split)."""
    rows = pa.table({
        "user_identifier": [u for u, _, _, _ in users], "arm": [a for _, a, _, _ in users],
        "seen": pa.array([t for _, _, t, _ in users], pa.timestamp("us", tz="UTC")),
        "percentage": [p for _, _, _, p in users],
    })  # fmt: skip
    con.register("exposed", rows)
    con.execute(
        "INSERT INTO arm_users (environment_id, flag_key, rollout_percentage, arm, "
        "user_identifier, organization_id, evaluations, feedback_count, failure_count, "
        "latency_sum, latency_count, last_evaluated_at, first_evaluated_at) "
        "SELECT ?, ?, percentage, arm, user_identifier, ?, 1, 0, 0, 0, 0, seen, seen FROM exposed",
        [ENV, FLAG, ORG],
    ).fetchall()
    con.unregister("exposed")


def _track(
    con, user: str, at: datetime, value: float | None, event: str = "purchase", batch: int = 1
) -> None:
    _track_many(con, [(user, at, value)], event, batch)


def _track_many(
    con, events: list[tuple[str, datetime, float | None]], event: str = "purchase", batch: int = 1
) -> None:
    """``track_events`` rows as ``raw_track_events`` loads them, in load batch ``batch``
    (recorded in ``load_batches`` as a load of tracked events): (user, occurred at, value)."""
    rows = pa.table({
        "user_identifier": [u for u, _, _ in events],
        "occurred": pa.array([t for _, t, _ in events], pa.timestamp("us", tz="UTC")),
        "value": pa.array([v for _, _, v in events], pa.float64()),
    })  # fmt: skip
    con.register("tracked", rows)
    con.execute(
        "INSERT INTO track_events (organization_id, environment_id, event_name, "
        "user_identifier, value, occurred_at, received_at, source, api_key_id, schema_version, "
        "load_batch) SELECT ?, ?, ?, user_identifier, value, occurred, occurred, 'http', 'key', 2, ? "
        "FROM tracked",
        [ORG, ENV, event, batch],
    )
    con.unregister("tracked")
    con.execute(
        "INSERT INTO load_batches SELECT ?, 'track', 1, ?, ?, 0, now(), 'test' "
        "WHERE NOT EXISTS (SELECT 1 FROM load_batches WHERE load_batch = ?)",
        [batch, len(events), len(events), batch],
    ).fetchall()


def _rows(con, metric: str) -> dict[str, tuple]:
    return {
        user: rest
        for user, *rest in con.execute(
            "SELECT user_identifier, events, value, denominator, pre_events, pre_value "
            "FROM metric_users WHERE metric_key = ?",
            [metric],
        ).fetchall()
    }


@pytest.mark.parametrize("events_arrive", ["before the first run", "after it"])
def test_each_kind_counts_a_users_events_from_exposure_to_the_window_end(
    con, events_arrive: str
) -> None:
    """The same figures whether a row is computed from all its events or moved by the events
    loaded since the last run (the edges of the window and the pre-period included)."""
    hour = timedelta(hours=1)
    _expose(con, "ann", "treatment", EXPOSED)
    _expose(con, "bob", "control", EXPOSED)
    metrics = [_metric(k.value, k) for k in MetricKind]
    batch = 1
    if events_arrive == "after it":
        assert compute_metrics(con, _follows(*metrics)) == 4
        batch = 2
    for at, value in [
        (EXPOSED - timedelta(days=8), 100.0),  # before the pre-period: nowhere
        (EXPOSED - timedelta(days=7), 7.0),  # the pre-period opens 7 days before exposure
        (EXPOSED - hour, None),  # pre-period, no value
        (EXPOSED, 3.0),  # the window opens at exposure
        (EXPOSED + 5 * hour, 4.5),
        (EXPOSED + 6 * hour, None),  # counted, adds nothing to a sum or a mean's denominator
        (EXPOSED + WINDOW_HOURS * hour, 50.0),  # the window has closed
    ]:
        _track(con, "ann", at, value, batch=batch)
    _track(con, "ann", EXPOSED + hour, 9.0, event="signup", batch=batch)  # not this metric
    _track(con, "zoe", EXPOSED + hour, 9.0, batch=batch)  # never exposed: no row
    assert compute_metrics(con, _follows(*metrics)) == 4
    expected = {  # events, value, denominator, pre_events, pre_value
        "conversion": {"ann": (3, 1.0, 1.0, 2, 1.0), "bob": (0, 0.0, 1.0, 0, 0.0)},
        "count": {"ann": (3, 3.0, 1.0, 2, 2.0), "bob": (0, 0.0, 1.0, 0, 0.0)},
        "sum": {"ann": (3, 7.5, 1.0, 2, 7.0), "bob": (0, 0.0, 1.0, 0, 0.0)},
        "mean": {"ann": (3, 7.5, 2.0, 2, 7.0), "bob": (0, 0.0, 0.0, 0, 0.0)},
    }
    for metric, users in expected.items():
        assert _rows(con, metric) == {user: list(figures) for user, figures in users.items()}


def test_exposure_is_the_users_first_evaluation_of_the_flag_at_any_split(con) -> None:
    """A user seen at 10 % and again at 50 % has one exposure, its first: its window runs from
    there in both splits' rows."""
    _expose(con, "ann", "control", EXPOSED, percentage=10.0)
    _expose(con, "ann", "control", EXPOSED + timedelta(hours=20), percentage=50.0)
    _track(con, "ann", EXPOSED + timedelta(hours=22), 1.0)
    _track(con, "ann", EXPOSED + timedelta(hours=30), 1.0)  # past the first exposure's window
    compute_metrics(con, _follows(_metric("orders", MetricKind.COUNT)))
    found = con.execute(
        "SELECT rollout_percentage, exposed_at, events FROM metric_users ORDER BY 1"
    ).fetchall()
    assert found == [(10.0, EXPOSED, 1), (50.0, EXPOSED, 1)]


def _split_traffic(con, users: int, treatment_rate: float, control_rate: float) -> dict:
    """``users`` per arm at 50 %, each with a Poisson-ish count of purchases of value 1-20;
    returns the independent per-arm figures (users, users with one, events, value sum)."""
    rng = random.Random(7)
    figures, exposed, tracked = {}, [], []
    for arm, rate in (("treatment", treatment_rate), ("control", control_rate)):
        converted = events = total = 0
        for n in range(users):
            user = f"{arm[0]}{n}"
            exposed.append((user, arm, EXPOSED, 50.0))
            count = sum(rng.random() < rate for _ in range(3))
            converted += count > 0
            events += count
            for k in range(count):
                value = float(rng.randint(1, 20))
                total += value
                tracked.append((user, EXPOSED + timedelta(minutes=10 + k), value))
        figures[arm] = (users, converted, events, total)
    _expose_many(con, exposed)
    _track_many(con, tracked)
    return figures


def test_per_arm_means_equal_an_independent_count_for_each_kind(con) -> None:
    figures = _split_traffic(con, 1_500, 0.30, 0.20)
    metrics = [_metric(k.value, k) for k in MetricKind]
    compute_metrics(con, _follows(*metrics))
    compared = {c["comparison"]: c for c in health_comparisons(con, ENV, FLAG)}
    for arm in ("treatment", "control"):
        users, converted, events, total = figures[arm]
        means = {
            "conversion": 100.0 * converted / users,
            "count": events / users,
            "sum": total / users,
            "mean": total / events,
        }
        for kind, mean in means.items():
            row = compared[f"metric:{kind}"]
            assert row[f"{arm}_users"] == users
            assert row[f"{arm}_mean"] == pytest.approx(mean, rel=1e-12)
    for kind in ("conversion", "count", "sum"):
        row = compared[f"metric:{kind}"]
        assert row["difference"] == pytest.approx(row["treatment_mean"] - row["control_mean"])
        assert row["decision"] == "improvement", kind  # higher is better, treatment is higher
        assert row["ci_low"] > 0


def test_a_worse_difference_is_a_regression_by_the_metrics_better(con) -> None:
    _split_traffic(con, 1_500, 0.30, 0.20)
    lower = _metric("complaints", MetricKind.COUNT, Better.LOWER)
    compute_metrics(con, _follows(lower))
    [row] = health_comparisons(con, ENV, FLAG)
    assert (row["comparison"], row["decision"]) == ("metric:complaints", "regression")


def test_a_metric_no_longer_followed_loses_its_rows(con) -> None:
    _split_traffic(con, 50, 0.3, 0.3)
    compute_metrics(con, _follows(_metric("orders", MetricKind.COUNT)))
    assert len(health_comparisons(con, ENV, FLAG)) == 1
    compute_metrics(con, [])
    assert health_comparisons(con, ENV, FLAG) == []
    assert con.execute("SELECT count(*) FROM metric_users").fetchone() == (0,)


def _all_rows(con) -> list[tuple]:
    return con.execute(
        "SELECT * EXCLUDE (organization_id) FROM metric_users ORDER BY ALL"
    ).fetchall()


def test_kept_up_to_date_it_equals_a_computation_afresh(con, tmp_path) -> None:
    """Rounds of new exposures (some earlier than a user's first), new tracked events, a follow
    added, a metric's window changed and a follow dropped; after each, the rows kept up to date
    equal those a fresh database computes from the same arms and events."""
    rng = random.Random(11)
    orders, revenue = _metric("orders", MetricKind.COUNT), _metric("revenue", MetricKind.SUM)
    follows = _follows(orders)
    for round_number in range(1, 6):
        exposed = [
            (f"u{rng.randrange(60)}", rng.choice(["treatment", "control"]),
             EXPOSED + timedelta(hours=rng.uniform(-30, 30)), rng.choice([10.0, 50.0]))
            for _ in range(25)
        ]  # fmt: skip
        for user, arm, at, percentage in exposed:  # as the fold keeps them, marked dirty
            _fold_exposure(con, user, arm, at, percentage)
        _track_many(con, [
            (f"u{rng.randrange(70)}", EXPOSED + timedelta(hours=rng.uniform(-200, 300)),
             float(rng.randint(1, 9)))
            for _ in range(40)
        ], batch=round_number)  # fmt: skip
        if round_number == 2:
            follows = _follows(orders, revenue)
        if round_number == 3:
            longer = Metric(ORG, "orders", "Orders", "purchase", MetricKind.COUNT, 96,
                            Better.HIGHER, EXPOSED, EXPOSED)  # fmt: skip
            follows = _follows(longer, revenue)
        if round_number == 5:
            follows = _follows(revenue)
        compute_metrics(con, follows)
        assert _all_rows(con) == _afresh(con, tmp_path / f"fresh{round_number}.duckdb", follows)
        assert _kept_moments(con) == _moments_of_rows(con)
    assert {row[0] for row in _all_rows(con)} == {"revenue"}


def _kept_moments(con) -> list[tuple]:
    """``metric_moments`` as the runs kept it, by their differences."""
    return con.execute("SELECT * FROM metric_moments ORDER BY ALL").fetchall()


def _moments_of_rows(con) -> list[tuple]:
    """Each arm's moments aggregated from ``metric_users`` itself (``MeanMoments``' sums)."""
    return con.execute(
        "SELECT metric_key, environment_id, flag_key, rollout_percentage, arm, "
        f"{', '.join(MOMENT_COLUMNS)} FROM (SELECT *, value AS y, denominator AS d, "
        "pre_value AS x FROM metric_users) GROUP BY ALL ORDER BY ALL"
    ).fetchall()


def _fold_exposure(con, user: str, arm: str, at: datetime, percentage: float) -> None:
    """A user's evaluation folded into ``arm_users`` as attribute_feedback.sql does: its row
    in that split keeps the earliest first evaluation, and an exposure that changed is marked."""
    [found] = con.execute(
        "SELECT min(first_evaluated_at) FROM arm_users WHERE environment_id = ? AND "
        "flag_key = ? AND rollout_percentage = ? AND arm = ? AND user_identifier = ?",
        [ENV, FLAG, percentage, arm, user],
    ).fetchall()
    if found[0] is None:
        _expose(con, user, arm, at, percentage)
    elif at < found[0]:
        con.execute(
            "UPDATE arm_users SET first_evaluated_at = ? WHERE environment_id = ? AND "
            "flag_key = ? AND rollout_percentage = ? AND arm = ? AND user_identifier = ?",
            [at, ENV, FLAG, percentage, arm, user],
        ).fetchall()
    else:
        return
    con.execute(
        "INSERT INTO exposure_dirty VALUES (?, ?, ?)", [ENV, FLAG, user]
    ).fetchall()  # DuckDB registers no table while a result is unread


def _afresh(con, path, follows: list[MetricFollow]) -> list[tuple]:
    """``metric_users`` computed in a new database from ``con``'s arms and tracked events."""
    fresh = duckdb.connect(str(path))
    try:
        fresh.execute("SET TimeZone = 'UTC'")
        migrate(fresh)
        for table in ("arm_users", "track_events", "load_batches"):
            rows = con.cursor().sql(f"SELECT * FROM {table}").to_arrow_table()
            fresh.register("rows", rows)
            fresh.execute(f"INSERT INTO {table} BY NAME SELECT * FROM rows")
            fresh.unregister("rows")
        compute_metrics(fresh, follows)
        return _all_rows(fresh)
    finally:
        fresh.close()


def test_a_huge_value_taken_out_leaves_the_arms_moments_exact(con) -> None:
    """A user's 1e17 in a sum, then the metric's event changed: every row of it goes and comes
    again. Kept by differences, the treatment's sum of squares lost the 4s beside 1e34 and its
    mean read 0 where it is 2; the groups of a changed follow are summed afresh."""
    users = [("t0", "treatment", EXPOSED, 50.0), ("t1", "treatment", EXPOSED, 50.0),
             ("c0", "control", EXPOSED, 50.0)]  # fmt: skip
    _expose_many(con, users)
    later = EXPOSED + timedelta(minutes=5)
    _track_many(con, [("t0", later, 1e17)], event="purchase")
    _track_many(con, [(user, later, 2.0) for user, *_ in users], event="signup")
    revenue = _metric("revenue", MetricKind.SUM)
    compute_metrics(con, _follows(revenue))
    compute_metrics(con, _follows(replace(revenue, event="signup")))
    assert _kept_moments(con) == _moments_of_rows(con)
    [row] = [r for r in health_comparisons(con, ENV, FLAG) if r["comparison"] == "metric:revenue"]
    assert (row["treatment_mean"], row["control_mean"]) == (2.0, 2.0)


def test_a_run_that_rebuilds_all_sums_every_arm_afresh(con) -> None:
    """A drift no follow change shows: t0's exposure moves two hours earlier, so its 1e17 at
    the window's last hour falls out and its row is computed again (1e17 out, 0 in). A run
    that rebuilds every arm's moments leaves them the rows' sums."""
    _expose_many(con, [("t0", "treatment", EXPOSED, 50.0), ("t1", "treatment", EXPOSED, 50.0)])
    last_hour = EXPOSED + timedelta(hours=WINDOW_HOURS - 1)
    _track_many(con, [("t0", last_hour, 1e17), ("t1", last_hour, 2.0)])
    revenue = _metric("revenue", MetricKind.SUM)
    compute_metrics(con, _follows(revenue))
    _fold_exposure(con, "t0", "treatment", EXPOSED - timedelta(hours=2), 50.0)
    compute_metrics(con, _follows(revenue), rebuild_all=True)
    assert _rows(con, "revenue")["t0"][1] == 0.0
    assert _kept_moments(con) == _moments_of_rows(con)
