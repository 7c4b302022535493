"""A worker-like child process for the durability tests (run as a script, never imported).

``write WAL EVENTS TAG BATCH PAUSE_MS``: appends batches of evaluation events forever, writing
the number of acknowledged batches to stdout after each append returns, pausing between
batches; the test SIGKILLs it.

``recover WAL EVENTS GO``: waits until the file GO exists (so several recoverers start
together), then starts and closes a log, which seals every orphan segment.
"""

from __future__ import annotations

import os
import sys
import time
from itertools import count
from pathlib import Path

from api.eventlog import SegmentedEventLog
from api.eventlog.schema import EvaluationEvent


def event(tag: str, batch: int, index: int) -> EvaluationEvent:
    at_us = time.time_ns() // 1000
    return EvaluationEvent(
        f"{tag}-{batch}-{index}", at_us, "org", "env", "flag", f"user-{index}", True,
        "STATIC", None, None, "key", "v1", 0, None, None,
    )  # fmt: skip


def write(wal: Path, events: str, tag: str, batch_size: int, pause_s: float) -> None:
    log = SegmentedEventLog(wal, events, fsync_interval_s=0.05, seal_interval_s=0.2)
    log.start()
    for batch in count(1):
        log.append_evaluations([event(tag, batch, i) for i in range(batch_size)])
        os.write(1, f"{batch}\n".encode())
        time.sleep(pause_s)


def recover(wal: Path, events: str, go: Path) -> None:
    os.write(1, b"ready\n")
    while not go.exists():
        time.sleep(0.001)
    log = SegmentedEventLog(wal, events)
    log.start()
    log.close()


if __name__ == "__main__":
    mode, wal_dir, location, *rest = sys.argv[1:]
    if mode == "write":
        write(Path(wal_dir), location, rest[0], int(rest[1]), float(rest[2]) / 1000)
    else:
        recover(Path(wal_dir), location, Path(rest[0]))
