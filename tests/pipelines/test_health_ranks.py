"""The p95 interval's ranks lie in the tail that flag_health sorts, and the tail gives the same
order statistics as sorting every user."""

from __future__ import annotations

import random

import duckdb

from pipelines.health import LATENCY_QUANTILE, TAIL_LEVEL, ArmFigures, _latency_bounds
from warehouse.statistics import CONFIDENCE, quantile_ci_ranks


def test_the_lower_rank_is_above_the_tail_level() -> None:
    for n in [*range(1, 2000), 10_000, 123_457, 1_000_000, 10_000_000]:
        ranks = quantile_ci_ranks(n, LATENCY_QUANTILE, CONFIDENCE)
        if ranks is not None:
            assert ranks[0] >= TAIL_LEVEL * n, n


def test_the_tail_gives_the_order_statistics_of_a_full_sort() -> None:
    rng = random.Random(3)
    con = duckdb.connect()
    values = {arm: [round(rng.lognormvariate(5, 0.5)) for _ in range(n)] for arm, n in
              (("treatment", 1234), ("control", 987))}  # fmt: skip
    values["treatment"] += [500.0] * 300  # ties around the tail's edge
    rows = [("e", "f", arm, v) for arm, vs in values.items() for v in vs]
    con.execute("CREATE TEMP TABLE health_users (environment_id VARCHAR, flag_key VARCHAR, "
                "arm VARCHAR, latency_ms DOUBLE)")  # fmt: skip
    con.executemany("INSERT INTO health_users VALUES (?, ?, ?, ?)", rows)
    con.execute(
        "CREATE TEMP TABLE health_arms AS SELECT environment_id, flag_key, arm, "
        "count(latency_ms) AS latency_users, quantile_disc(latency_ms, 0.85) AS latency_tail_from "
        "FROM health_users GROUP BY ALL"
    )
    arms = {
        ("e", "f", arm): (None, ArmFigures(len(vs), len(vs), 0, len(vs), None, None, None))
        for arm, vs in values.items()
    }
    bounds = _latency_bounds(con, arms)
    for arm, vs in values.items():
        lo, hi = quantile_ci_ranks(len(vs), LATENCY_QUANTILE, CONFIDENCE)
        ordered = sorted(vs)
        assert bounds[("e", "f", arm)] == (ordered[lo], ordered[hi])
