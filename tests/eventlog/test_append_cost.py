"""The hot path stays cheap: appends are on every request. Bounds are ~15x the measured cost
(about 3 µs per single event, 2.5 ms per 10,000 events) so only a real regression fails."""

from __future__ import annotations

import statistics
import time

from tests.eventlog.support import evaluation


def _median_s(call, repeat: int, number: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            call()
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)


def test_single_event_append_costs_microseconds(make_log):
    log = make_log()
    one = [evaluation(1)]
    assert _median_s(lambda: log.append_evaluations(one), repeat=7, number=1000) < 50e-6


def test_ten_thousand_event_append_costs_milliseconds(make_log):
    log = make_log()
    batch = [evaluation(n) for n in range(10_000)]
    assert _median_s(lambda: log.append_evaluations(batch), repeat=7, number=1) < 40e-3
