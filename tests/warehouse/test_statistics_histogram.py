"""Latency histograms: DuckDB buckets as Python does, percentiles within 0.5 %, a p95
comparison on buckets that contains the exact one, and the migration that builds them from
arm_users."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from warehouse.migrations import migrate, register_macros
from warehouse.statistics import ArmCells, quantile_difference_interval
from warehouse.statistics.histogram import (
    RELATIVE_ACCURACY,
    SMALLEST_MS,
    ZERO_BUCKET,
    LatencyHistogram,
    bucket_of,
    buckets_of,
    lower_edge,
    upper_edge,
)


def _sample(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.lognormal(5.0, 1.2, n), rng.uniform(0.0, 0.05, n // 50)])


def test_duckdb_buckets_every_value_as_python_does() -> None:
    values = _sample(1, 20_000).tolist() + [0.0, SMALLEST_MS, 1.0, 1e-9, 1e7, 150.0]
    con = duckdb.connect()
    register_macros(con)
    got = [row[0] for row in con.execute(
        "SELECT latency_bucket(v) FROM unnest(?::DOUBLE[]) WITH ORDINALITY AS t(v, i) ORDER BY i",
        [values],
    ).fetchall()]  # fmt: skip
    assert got == [bucket_of(v) for v in values]
    assert buckets_of(values).tolist() == got
    assert con.execute("SELECT latency_bucket(NULL)").fetchone()[0] is None


def test_every_value_lies_within_its_buckets_edges() -> None:
    just_above_the_zero_bucket = [0.01, 0.010001, 0.01002, 0.01004, 0.010049, 0.01005, 0.0101]
    for value in [*_sample(2, 5_000), *just_above_the_zero_bucket]:
        bucket = bucket_of(value)
        assert lower_edge(bucket) <= value <= upper_edge(bucket)
    assert bucket_of(0.0) == ZERO_BUCKET and lower_edge(ZERO_BUCKET) == 0.0


@pytest.mark.parametrize("n", [1, 2, 7, 173, 174, 1_000, 25_000])
def test_percentiles_are_within_half_a_percent_of_the_exact_ones(n: int) -> None:
    values = np.random.default_rng(n).lognormal(5.0, 0.8, n)
    histogram = LatencyHistogram.of_values(values)
    assert histogram.n == n
    for q in (0.5, 0.95, 0.99):
        exact = float(np.quantile(values, q))  # interpolated, like DuckDB's quantile_cont
        assert histogram.quantile(q) == pytest.approx(exact, rel=RELATIVE_ACCURACY)


@pytest.mark.parametrize("seed", range(5))
def test_the_p95_interval_on_buckets_contains_the_exact_one_and_stays_close(seed: int) -> None:
    treatment = np.sort(_sample(seed, 3_000 + 997 * seed))
    treatment = np.concatenate([treatment, np.full(300, treatment[int(0.95 * len(treatment))])])
    control = np.sort(_sample(seed + 10, 4_000)) * 1.05
    exact = quantile_difference_interval(
        ArmCells.of_values(treatment, 0.95), ArmCells.of_values(control, 0.95), 0.95
    )
    bucketed = quantile_difference_interval(
        LatencyHistogram.of_values(treatment).cells(0.95),
        LatencyHistogram.of_values(control).cells(0.95),
        0.95,
    )
    assert bucketed[0] <= exact[0] and exact[1] <= bucketed[1]
    scale = float(np.quantile(np.concatenate([treatment, control]), 0.95))
    # Each end moves by at most about two buckets of each arm (a bucket is 2 a wide).
    assert exact[0] - bucketed[0] <= 8 * RELATIVE_ACCURACY * scale
    assert bucketed[1] - exact[1] <= 8 * RELATIVE_ACCURACY * scale


def test_cells_span_each_bucket_and_carry_the_interpolated_estimate() -> None:
    histogram = LatencyHistogram.of_values([100.0] * 150 + [300.0] * 10)
    cells = histogram.cells(0.95)
    assert cells.n == 160
    assert cells.counts.tolist() == [150, 10]
    assert cells.lower[0] <= 100.0 <= cells.upper[0] and cells.lower[1] <= 300.0 <= cells.upper[1]
    assert cells.estimate == histogram.quantile(0.95)
    assert LatencyHistogram(()).cells(0.95).estimate is None


def test_histograms_merge_by_adding_counts() -> None:
    a, b = _sample(5, 4_000), _sample(6, 3_000)
    merged = LatencyHistogram.of_values(a).plus(LatencyHistogram.of_values(b))
    assert merged == LatencyHistogram.of_values(np.concatenate([a, b]))


def test_malformed_histograms_are_refused() -> None:
    with pytest.raises(ValueError, match="ascending"):
        LatencyHistogram.of_sorted([3, 2], [1, 1])
    with pytest.raises(ValueError, match="positive"):
        LatencyHistogram.of_sorted([1, 2], [1, 0])
    with pytest.raises(ValueError, match="users"):
        LatencyHistogram.of([(1, -1)])
    with pytest.raises(IndexError):
        LatencyHistogram.of_values([1.0]).bucket_at(1)


def test_migration_three_builds_totals_and_histograms_from_arm_users() -> None:
    """A working database of version 2 keeps its users: version 3 derives each arm's totals
    and histogram from them, and keys every user row."""
    con = duckdb.connect()
    assert migrate(con, up_to=2) == [1, 2]
    rng = np.random.default_rng(7)
    rows = []
    for i in range(600):
        arm = "treatment" if i % 3 else "control"
        latency_count = int(rng.integers(0, 3))
        rows.append(("env", "flag", 50.0, arm, f"user-{i}", "org", 1, int(i % 4 != 0),
                     int(i % 7 == 0), float(rng.uniform(5, 500)) * latency_count,
                     latency_count, None))  # fmt: skip
    con.executemany(f"INSERT INTO arm_users VALUES ({', '.join('?' * 12)})", rows)

    assert migrate(con, up_to=3) == [3]

    totals = con.execute(
        "SELECT arm, users, users_with_feedback, failed_users FROM arm_totals ORDER BY arm"
    ).fetchall()
    expected = []
    for arm in ("control", "treatment"):
        mine = [r for r in rows if r[3] == arm]
        expected.append((arm, len(mine), sum(r[7] > 0 for r in mine), sum(r[8] > 0 for r in mine)))
    assert totals == expected
    for arm in ("control", "treatment"):
        means = [r[9] / r[10] for r in rows if r[3] == arm and r[10]]
        stored = con.execute(
            "SELECT bucket, users FROM arm_latency_buckets WHERE arm = ? ORDER BY bucket", [arm]
        ).fetchall()
        assert LatencyHistogram.of_sorted(*zip(*stored, strict=True)) == (
            LatencyHistogram.of_values(means)
        )
    assert con.execute("SELECT count(*) FROM arm_users WHERE user_key IS NULL").fetchone()[0] == 0
    assert con.execute("SELECT count(DISTINCT user_key) FROM arm_users").fetchone()[0] == 600
