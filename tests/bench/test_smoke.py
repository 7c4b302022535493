"""The benchmark smoke: every scenario of ``make bench`` for about a second, so it cannot rot.

It checks the machinery (servers, wrk scripts, metrics, pipeline runs, report), not figures:
a shared test machine cannot promise performance.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.run import main
from tests.support.needs import needs_wrk

pytestmark = needs_wrk()


def test_bench_smoke_writes_a_report_with_every_goal(tmp_path: Path) -> None:
    # local evaluation's scenarios have their own smoke (test_local_smoke.py), run beside this
    assert main(["--smoke", "--no-local", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    results = report["results"]
    ratios = results["single_evaluate"]["summary"]["c16"]["ratios"]
    assert ratios["vs_tight"]["median"] > 0 and ratios["vs_media"]["median"] > 0
    assert ratios["cluster_vs_embedded"]["median"] > 0  # a host on PostgreSQL and S3
    assert ratios["attributes_vs_plain"]["median"] > 0  # 1 KB attributes, 5 conditions
    assert results["cluster_meter"]["evaluations"] > 0
    assert results["pipeline"]["full_s3"]["run_s"] > 0
    assert results["bulk_10k"]["server_user_evaluations"] > 0
    assert results["bulk_10k_attributes"]["server_user_evaluations"] > 0
    assert results["feedback_bulk_500"]["events_per_s"] > 0
    assert results["pipeline"]["incremental"]["run_s"] > 0
    assert results["pipeline"]["dagster_floor"]["run_s"] > 0  # the job with empty bodies
    assert results["time_to_signal"]["samples"] == 3 and results["time_to_signal"]["p95_s"] > 0
    assert results["time_to_metric_signal"]["samples"] == 3  # a followed metric's events
    assert results["pipeline_metrics"]["incremental"]["run_s"] > 0  # 10 followed metrics
    names = {goal["name"] for goal in report["goals"]}
    assert any(name.startswith("bulk 10,000") for name in names)
    assert any(name.startswith("bulk 10,000 users with attributes") for name in names)
    assert any(name.startswith("single evaluate with 1 KB attributes") for name in names)
    assert any(name.startswith("worker RSS") for name in names)
    assert all(goal["measured"] is not None for goal in report["goals"])
    markdown = (tmp_path / "report.md").read_text()
    assert "## Goals" in markdown and "python -m bench.run --smoke" in markdown
