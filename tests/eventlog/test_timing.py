"""Events become readable within the seal interval, and no reader ever meets a partial file."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from tests.eventlog.support import evaluation
from tests.support.timing import PROMPTLY_S

SEAL_INTERVAL_S = 1.0
POLL_S = 0.005
SLACK_S = PROMPTLY_S
"""Past the seal interval, for a loaded machine (``tests/support/timing.py``); about 0.15 s
on an idle one. A log that sealed only when closed would still fail."""


class MarkerWatch:
    """Reads every visible ``*.parquet`` file with DuckDB in a loop, as an analyst would, and
    notes when each marker event first shows up and any read error."""

    def __init__(self, events: Path):
        self.events = events
        self.seen_at: dict[str, float] = {}
        self.errors: list[BaseException] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with duckdb.connect() as con:
            while not self.stop.is_set():
                files = sorted(str(p) for p in self.events.rglob("*.parquet"))
                if files:
                    try:
                        ids = con.execute(
                            "SELECT DISTINCT evaluation_id FROM read_parquet(?) "
                            "WHERE evaluation_id LIKE 'marker-%'",
                            [files],
                        ).fetchall()
                    except duckdb.Error as exc:  # a half-written file lands here
                        self.errors.append(exc)
                        return
                    now = time.monotonic()
                    for (event_id,) in ids:
                        self.seen_at.setdefault(event_id, now)
                time.sleep(POLL_S)


@contextmanager
def watching(events: Path) -> Iterator[MarkerWatch]:
    watch = MarkerWatch(events)
    thread = threading.Thread(target=watch.run)
    thread.start()
    try:
        yield watch
    finally:
        watch.stop.set()
        thread.join()


def _append_markers(log, rounds: int, bulk: int, pause_s: float) -> dict[str, float]:
    appended_at = {}
    for n in range(rounds):
        if bulk:
            log.append_evaluations([evaluation(i, tag=f"bulk{n}") for i in range(bulk)])
        log.append_evaluations([evaluation(n, tag="marker")])
        appended_at[f"marker-{n}"] = time.monotonic()
        time.sleep(pause_s)
    return appended_at


def _wait_for(watch: MarkerWatch, appended_at: dict[str, float], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while len(watch.seen_at) < len(appended_at) and time.monotonic() < deadline:
        if watch.errors:
            return
        time.sleep(POLL_S)


def test_events_are_readable_within_the_seal_interval(make_log, dirs):
    log = make_log(seal_interval_s=SEAL_INTERVAL_S, fsync_interval_s=0.1)
    with watching(dirs[1]) as watch:
        appended_at = _append_markers(log, rounds=25, bulk=100, pause_s=0.1)
        _wait_for(watch, appended_at, SEAL_INTERVAL_S + SLACK_S)
    assert watch.errors == []
    assert set(watch.seen_at) == set(appended_at)
    delays = {k: watch.seen_at[k] - t for k, t in appended_at.items()}
    assert max(delays.values()) <= SEAL_INTERVAL_S + SLACK_S, delays


def test_no_reader_ever_opens_a_half_written_file(make_log, dirs):
    # Big segments (10,000 events per 0.1 s) make each file take long enough to write that
    # publishing under the final name is caught by the reader (checked by breaking it).
    log = make_log(seal_interval_s=SEAL_INTERVAL_S, fsync_interval_s=0.1)
    with watching(dirs[1]) as watch:
        appended_at = _append_markers(log, rounds=25, bulk=10_000, pause_s=0.1)
        _wait_for(watch, appended_at, SEAL_INTERVAL_S * 3)
    assert watch.errors == []
    assert set(watch.seen_at) == set(appended_at)
