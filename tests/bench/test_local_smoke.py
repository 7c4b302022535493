"""The smoke of local evaluation's bench scenarios (``bench/local_scenarios.py``): each runs
briefly and yields its figure, and the report turns them into goals. Machinery, not figures."""

from __future__ import annotations

from pathlib import Path

from bench.local_scenarios import local_bench
from bench.report import evaluate_goals
from tests.support.needs import needs_wrk

pytestmark = needs_wrk()


def test_local_scenarios_yield_every_figure_and_goal(tmp_path: Path) -> None:
    local = local_bench(tmp_path, smoke=True)
    assert local["local_vs_remote"]["speedup"] > 1 and local["local_vs_remote"]["local_p99_us"] > 0
    assert local["propagation"]["p99_s"] < 10 and local["streams"]["open_reported"] >= 50
    assert local["streams"]["evaluate_rps_with"] > 0 and local["ingest"]["per_second"] > 0
    assert len(local["streams"]["rounds_ratio"]) == 3  # back-to-back pairs, median reported
    rounds = local["ingest"]["rounds_per_second"]  # the reported rate is their median
    assert len(rounds) == 3 and local["ingest"]["per_second"] == sorted(rounds)[1]
    assert local["attributes"]["p99_us"] > 0 and local["attributes"]["plain_p99_us"] > 0
    goals = {goal.name: goal for goal in evaluate_goals({"local": local})}
    assert len(goals) == 7 and all(goal.measured is not None for goal in goals.values())
    assert "local evaluate p99" in goals
    assert "local evaluate with 1 KB attributes, a segment of 5 conditions, p99" in goals
