"""The one loop every background job runs on: ticks go on after a failing one, and stop
ends the thread."""

from __future__ import annotations

import logging
import threading

import pytest

from api.infra.periodic import PeriodicJob


def test_a_failing_tick_is_logged_and_the_next_one_runs(caplog: pytest.LogCaptureFixture) -> None:
    ticks: list[int] = []
    third = threading.Event()

    def tick() -> None:
        ticks.append(len(ticks))
        if len(ticks) == 3:
            third.set()
        if len(ticks) == 1:
            raise RuntimeError("the control plane is busy")

    job = PeriodicJob(
        "test-job", 0.01, tick, log=logging.getLogger("flagsight.test"), failure="tick failed"
    )
    with caplog.at_level(logging.ERROR, logger="flagsight.test"):
        job.start()
        assert third.wait(10)
        job.stop()
    assert [r.getMessage() for r in caplog.records] == ["tick failed"]
    assert not job._thread.is_alive() and job.stopping


def test_the_first_tick_can_run_at_once() -> None:
    ran = threading.Event()
    job = PeriodicJob(
        "test-job", 3600, ran.set, log=logging.getLogger("flagsight.test"), failure="x",
        first_at_once=True,
    )  # fmt: skip
    job.start()
    assert ran.wait(10)
    job.stop()  # returns although the next tick is an hour away
    assert not job._thread.is_alive()
