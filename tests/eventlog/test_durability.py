"""Acknowledged events survive SIGKILL and are sealed exactly once, by whoever recovers them."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from api.eventlog import SegmentedEventLog
from api.eventlog.frames import TYPE_CODES, encode_frame
from api.eventlog.schema import EVALUATION
from api.eventlog.segments import SegmentNamer, create_segment
from tests.eventlog.support import (
    LAST_US_OF_DAY,
    evaluation,
    evaluation_ids,
    spawn_child,
)


def _acks_until_killed(child: subprocess.Popen[bytes], run_s: float) -> int:
    """Read acknowledgements for ``run_s`` after the first, SIGKILL the child mid-stream, and
    return the last batch it acknowledged (it wrote the ack only after append returned)."""
    assert child.stdout is not None
    acked = 0
    first = None
    while first is None or time.monotonic() - first < run_s:
        line = child.stdout.readline()
        assert line, "the writer died on its own"
        acked = int(line)
        first = first or time.monotonic()
    os.kill(child.pid, signal.SIGKILL)
    for line in child.stdout.read().split():
        acked = int(line)
    assert child.wait() == -signal.SIGKILL
    return acked


@pytest.mark.parametrize(("batch_size", "pause_ms", "run_s"), [(1, 0, 0.6), (250, 2, 0.9)])
def test_every_acknowledged_event_survives_sigkill_exactly_once(
    make_log, dirs, batch_size, pause_ms, run_s
):
    wal, events = dirs
    child = spawn_child("write", str(wal), str(events), "k", str(batch_size), str(pause_ms))
    try:
        acked = _acks_until_killed(child, run_s)
    finally:
        child.kill()
        child.wait()
    assert acked > 3

    # The child sealed some segments itself (0.2 s interval); the rest are orphans now.
    make_log().close()

    per_batch = Counter(int(event_id.split("-")[1]) for event_id in evaluation_ids(events))
    copies = Counter(evaluation_ids(events))
    assert set(copies.values()) == {1}, "an event was sealed twice"
    assert all(per_batch[b] == batch_size for b in range(1, acked + 1)), "acknowledged loss"
    # The batch in flight at the kill is all there or not at all; nothing was written after it.
    assert per_batch[acked + 1] in (0, batch_size)
    assert max(per_batch) <= acked + 1
    assert sorted(p.name for p in wal.iterdir()) == []


def _orphan_segments(wal: Path, count: int, per_segment: int) -> set[str]:
    """Segments whose writer is gone: written, then closed (which drops the flock)."""
    wal.mkdir(parents=True)
    namer = SegmentNamer(time.time)
    ids = set()
    for s in range(count):
        segment = create_segment(wal, namer)
        batch = [
            evaluation(n, at_us=LAST_US_OF_DAY + n % 2, tag=f"s{s}") for n in range(per_segment)
        ]
        segment.append(encode_frame(TYPE_CODES[EVALUATION], batch))
        segment.close()
        ids.update(e.evaluation_id for e in batch)
    return ids


def test_concurrent_recovery_by_two_processes_seals_each_event_once(dirs):
    wal, events = dirs
    expected = _orphan_segments(wal, count=24, per_segment=200)
    go = wal.parent / "go"
    children = [spawn_child("recover", str(wal), str(events), str(go)) for _ in range(2)]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        go.touch()
        for child in children:
            assert child.wait(timeout=60) == 0
    finally:
        for child in children:
            child.kill()
            child.wait()

    ids = evaluation_ids(events)
    assert len(ids) == len(expected)
    assert set(ids) == expected
    assert list(wal.iterdir()) == []
    assert len(list(events.rglob("*.parquet"))) == 24 * 2  # two dates per segment


def test_recovery_never_takes_a_live_writers_segment(make_log, dirs):
    writer = make_log()
    writer.append_evaluations([evaluation(1)])
    other = SegmentedEventLog(dirs[0], str(dirs[1]))
    other.recover_orphans()  # same process, other descriptor: the flock still excludes it
    assert evaluation_ids(dirs[1]) == []
    writer.append_evaluations([evaluation(2)])
    writer.close()
    assert sorted(evaluation_ids(dirs[1])) == ["e-1", "e-2"]
