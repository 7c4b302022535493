"""Readers are never blocked, and ``run_pipeline_once`` records runs in the persistent instance."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg

from pipelines.cli import run_pipeline_once
from tests.pipelines.support import add_wave_two
from warehouse import read

READER = Path(__file__).with_name("reader_process.py")


def test_a_reader_holding_the_warehouse_open_does_not_block_the_pipeline(lake_settings, waves):
    lines: list[str] = []
    run_pipeline_once(lake_settings, echo=lines.append)
    assert any("succeeded" in line for line in lines)
    first = read.flag_metrics(lake_settings.warehouse_path, "env_00000000000000aa", "checkout")

    stop = lake_settings.data_dir / "stop-reader"
    reader = subprocess.Popen(
        [sys.executable, str(READER), str(lake_settings.warehouse_path), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout.readline().strip() == "ready"
        add_wave_two(lake_settings, waves)
        run_pipeline_once(lake_settings, echo=lines.append)  # must not wait for the reader
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=60)
    assert reader.returncode == 0, out
    held, fresh = (int(part.split("=")[1]) for part in out.split())
    assert held > 0 and fresh > 0

    second = read.flag_metrics(lake_settings.warehouse_path, "env_00000000000000aa", "checkout")
    assert second["evaluations"] > first["evaluations"]  # the new snapshot is visible
    leftovers = [p.name for p in lake_settings.data_dir.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []

    with dg.DagsterInstance.from_config(str(lake_settings.dagster_home)) as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(job_name="insights_job"))
    assert len(runs) == 2 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    assert all(r.tags.get("flagsight/trigger") == "cli" for r in runs)
