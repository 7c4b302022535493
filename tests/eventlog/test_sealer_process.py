"""Hand-off to a sealer process: workers close rotated segments, the sealer seals them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from api.eventlog import SegmentedEventLog
from api.eventlog.reading import read_events
from api.eventlog.schema import EVALUATION
from api.eventlog.sealer_lock import SealerLock, sealer_lock_path
from api.server.sealer_process import run
from api.settings import Settings
from tests.eventlog.support import REPO, evaluation


def _settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path, seal_interval_s=1.0)


def _log(settings: Settings) -> SegmentedEventLog:
    log = SegmentedEventLog(
        settings.wal_dir,
        settings.events_location,
        seal_interval_s=settings.seal_interval_s,
        sealer_lock=sealer_lock_path(settings),
    )
    log.start()
    return log


def _sealed_ids(settings: Settings) -> set[str]:
    table = read_events(settings.events_location, EVALUATION)
    return set(table.column("evaluation_id").to_pylist())


def test_while_a_sealer_holds_the_lock_segments_are_handed_off(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    lock = SealerLock(sealer_lock_path(settings))
    lock.acquire()
    log = _log(settings)
    try:
        assert log.sealer_alive()
        log.append_evaluations([evaluation(n) for n in range(3)])
        log.seal_now()
        assert _sealed_ids(settings) == set()
        assert [p.stat().st_size > 0 for p in settings.wal_dir.glob("*.wal")].count(True) == 1
    finally:
        lock.release()
    try:
        stop = threading.Event()
        stop.set()  # one pass, then the last ones
        run(settings, stop, master_pid=os.getpid())
    finally:
        log.close()
    assert _sealed_ids(settings) == {f"e-{n}" for n in range(3)}
    assert all(p.stat().st_size == 0 for p in settings.wal_dir.glob("*.wal"))


def test_without_a_sealer_the_log_seals_in_process(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    log = _log(settings)
    try:
        assert not log.sealer_alive()
        log.append_evaluations([evaluation(1)])
        log.seal_now()
        assert _sealed_ids(settings) == {"e-1"}
    finally:
        log.close()


def test_the_sealer_process_seals_within_the_interval_and_stops_on_sigterm(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    env = {**os.environ, "FLAGSIGHT_DATA_DIR": str(tmp_path), "FLAGSIGHT_SEAL_INTERVAL": "1"}
    sealer = subprocess.Popen(
        [sys.executable, "-m", "api.server.sealer_process", str(os.getpid())], cwd=REPO, env=env
    )
    log = _log(settings)
    try:
        deadline = time.monotonic() + 20
        while not log.sealer_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.sealer_alive()
        log.append_evaluations([evaluation(7)])
        deadline = time.monotonic() + 5
        while not _sealed_ids(settings) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _sealed_ids(settings) == {"e-7"}
        assert time.monotonic() < deadline
    finally:
        sealer.terminate()
        assert sealer.wait(30) == 0
        log.close()
    assert not log.sealer_alive()
