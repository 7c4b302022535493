"""Fixtures for the event log tests: real directories, metrics, started logs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from api.eventlog import SegmentedEventLog
from api.observability.metrics import Metrics


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """(wal_dir, events_dir) of a fresh data directory."""
    return tmp_path / "wal", tmp_path / "events"


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def make_log(
    dirs: tuple[Path, Path], metrics: Metrics
) -> Iterator[Callable[..., SegmentedEventLog]]:
    """Build started logs on the fixture directories; any left open are closed at teardown."""
    logs: list[SegmentedEventLog] = []

    def make(**options: object) -> SegmentedEventLog:
        options.setdefault("metrics", metrics)
        log = SegmentedEventLog(dirs[0], str(dirs[1]), **options)  # type: ignore[arg-type]
        log.start()
        logs.append(log)
        return log

    yield make
    for log in logs:
        log.close()
