"""``python -m bench.run --only``: issue 41's scenarios alone, each beside its plain
counterpart (issue 42's ``track-bulk``, ``pipeline-metrics`` and ``signal-metrics`` alone), with
their goals and nothing else (no other scenario, no rewritten docs). Machinery, not figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.run import main
from bench.servers import REPO
from tests.support.needs import needs_wrk

pytestmark = needs_wrk()


def _report(out: Path) -> tuple[dict, set[str]]:
    report = json.loads((out / "report.json").read_text())
    return report["results"], {goal["name"] for goal in report["goals"]}


def test_bulk_and_local_with_attributes_run_alone(tmp_path: Path) -> None:
    docs = REPO / "docs" / "benchmarks.md"
    before = docs.stat().st_mtime_ns
    only = ["--only", "bulk-attributes", "--only", "local-attributes"]
    assert main(["--smoke", *only, "--out", str(tmp_path)]) == 0
    results, goals = _report(tmp_path)
    assert set(results) == {"bulk_10k", "bulk_10k_attributes", "local"}  # and the plain bulk
    assert results["bulk_10k_attributes"]["server_user_evaluations_per_s_per_core"] > 0
    assert set(results["local"]) == {"attributes"}
    assert results["local"]["attributes"]["p99_us"] > 0
    assert "bulk 10,000 users with attributes: user-evaluations/s per core in the server" in goals
    assert "local evaluate with 1 KB attributes, a segment of 5 conditions, p99" in goals
    assert docs.stat().st_mtime_ns == before


def test_single_evaluate_with_attributes_runs_beside_plain_and_the_reference(
    tmp_path: Path,
) -> None:
    assert main(["--smoke", "--only", "single-attributes", "--out", str(tmp_path)]) == 0
    results, goals = _report(tmp_path)
    assert set(results) == {"single_evaluate"}
    summary = results["single_evaluate"]["summary"]
    assert list(summary) == ["c16"]
    assert set(summary["c16"]["ratios"]) == {"vs_tight", "attributes_vs_plain"}
    assert summary["c16"]["ratios"]["attributes_vs_plain"]["median"] > 0
    assert (
        "single evaluate with 1 KB attributes, a segment of 5 conditions, vs plain, 16 connections"
        in goals
    )


def test_tracked_events_in_bulk_run_alone(tmp_path: Path) -> None:
    assert main(["--smoke", "--only", "track-bulk", "--out", str(tmp_path)]) == 0
    results, goals = _report(tmp_path)
    assert set(results) == {"track_bulk_500"}
    assert results["track_bulk_500"]["events_per_s"] > 0  # wrk saw no refused body
    assert "tracked events ingest through /v1/track (2 workers)" in goals


def test_the_pipeline_with_followed_metrics_runs_alone(tmp_path: Path) -> None:
    assert main(["--smoke", "--only", "pipeline-metrics", "--out", str(tmp_path)]) == 0
    results, goals = _report(tmp_path)
    assert set(results) == {"pipeline_metrics"}
    metrics = results["pipeline_metrics"]
    assert metrics["incremental"]["run_s"] > 0
    assert "metric_users" in metrics["incremental"]["slowest_steps_s"]  # the step ran
    # every split flag environment's exposed users, once per metric
    assert metrics["metric_users"] > 0 and metrics["metric_users"] % metrics["metrics"] == 0
    assert "incremental run with 1,000 new tracked events and 10 metrics" in goals


def test_time_to_signal_for_a_metric_runs_alone(tmp_path: Path) -> None:
    assert main(["--smoke", "--only", "signal-metrics", "--out", str(tmp_path)]) == 0
    results, goals = _report(tmp_path)
    assert set(results) == {"time_to_metric_signal"}
    assert results["time_to_metric_signal"]["samples"] == 3  # each tracked event was counted
    assert "time to signal for a metric, p95" in goals


def test_an_unknown_scenario_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--only", "mixed"])
    assert "invalid choice" in capsys.readouterr().err
