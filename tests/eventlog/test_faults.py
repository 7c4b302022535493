"""A disk that refuses writes: appends raise EventLogUnavailable, are counted and logged, and
the log heals by itself once the disk does. Acknowledged events are all sealed, others never."""

from __future__ import annotations

import errno
import json
import logging
import os
import resource
import subprocess
from pathlib import Path

import pytest

from api.eventlog import EventLogUnavailable, SegmentedEventLog
from api.observability.logging import JsonFormatter
from tests.eventlog.support import evaluation, evaluation_ids

real_write = os.write
real_open = os.open


def _errors(metrics) -> float:
    return metrics.registry.get_sample_value("flagsight_event_log_errors_total")


def _failing_write(fd: int, data: bytes) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


def _short_write(fd: int, data: bytes) -> int:
    """What a filling disk does: part of the frame lands, the rest does not."""
    return real_write(fd, bytes(data)[: len(data) // 2])


def _warnings(caplog) -> list[dict]:
    return [
        json.loads(JsonFormatter().format(r))
        for r in caplog.records
        if r.name == "flagsight.eventlog" and r.levelno == logging.WARNING
    ]


@pytest.mark.parametrize("fault", [_failing_write, _short_write], ids=["enospc", "short-write"])
def test_a_failed_write_raises_is_counted_logged_and_heals(
    make_log, dirs, metrics, monkeypatch, caplog, fault
):
    log = make_log()
    log.append_evaluations([evaluation(1)])
    with monkeypatch.context() as patch, caplog.at_level(logging.WARNING):
        patch.setattr(os, "write", fault)
        with pytest.raises(EventLogUnavailable):
            log.append_evaluations([evaluation(n) for n in range(100, 110)])
    assert _errors(metrics) == 1
    [warning] = _warnings(caplog)
    assert warning["event"] == "event_log_write_failed"
    assert warning["level"] == "warning"

    log.append_evaluations([evaluation(2)])  # the fault cleared: a fresh segment takes it
    log.close()
    assert sorted(evaluation_ids(dirs[1])) == ["e-1", "e-2"]
    assert list(dirs[0].iterdir()) == []


def test_an_unwritable_wal_dir_keeps_refusing_until_it_is_writable_again(
    make_log, dirs, metrics, monkeypatch
):
    wal = str(dirs[0])

    def refuse_wal(path, flags, *args, **kwargs):
        if str(path).startswith(wal):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    log = make_log(fsync_interval_s=3600, seal_interval_s=3600)  # no background step counts
    with monkeypatch.context() as patch:  # a failure of its own meanwhile: appends only
        patch.setattr(os, "write", _failing_write)
        patch.setattr(os, "open", refuse_wal)
        for n in range(3):  # the first fails writing, the next ones cannot open a segment
            with pytest.raises(EventLogUnavailable):
                log.append_evaluations([evaluation(n)])
    assert _errors(metrics) == 3
    log.append_evaluations([evaluation(7)])
    log.close()
    assert evaluation_ids(dirs[1]) == ["e-7"]


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A real 1 MiB tmpfs, when this test runs as root with mount rights; skipped otherwise."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    mounted = os.geteuid() == 0 and (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
            capture_output=True,
        ).returncode
        == 0
    )
    if not mounted:
        pytest.skip("cannot mount a tmpfs here; the monkeypatched faults cover the boundary")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=True)


def _fill(disk: Path, leave: int) -> Path:
    """Fill the disk, then free ``leave`` bytes."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (1 << 16, 1 << 12):
            try:
                while True:
                    os.write(fd, bytes(chunk))
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def test_a_really_full_disk_refuses_then_heals(tiny_disk, tmp_path, metrics, caplog):
    log = SegmentedEventLog(
        tiny_disk / "wal", str(tmp_path / "events"), seal_interval_s=60, metrics=metrics
    )
    log.start()
    try:
        log.append_evaluations([evaluation(1)])
        filler = _fill(tiny_disk, leave=16 * 1024)
        # ~1 MB frame into 16 KiB of room: a real short write, leaving a torn frame behind.
        with pytest.raises(EventLogUnavailable), caplog.at_level(logging.WARNING):
            log.append_evaluations([evaluation(n, tag="big") for n in range(10_000)])
        assert [w["error_type"] for w in _warnings(caplog)] == ["ShortWrite"]
        _fill(tiny_disk, leave=0)
        with pytest.raises(EventLogUnavailable):
            log.append_evaluations([evaluation(2)])
        assert _errors(metrics) == 2
        filler.unlink()
        log.append_evaluations([evaluation(3)])
    finally:
        log.close()
    assert sorted(evaluation_ids(tmp_path / "events")) == ["e-1", "e-3"]
    assert [p.name for p in (tiny_disk / "wal").iterdir()] == []


def test_out_of_descriptors_the_log_says_it_is_unready_and_comes_back_without_traffic(
    make_log, dirs, monkeypatch
):
    """What ``/readyz`` asks: the log reports the failure feedback would meet, and once
    descriptors are free again it opens a segment itself, with no append needed first.
    The open segment keeps taking frames while descriptors run out; a failed write ends it,
    and only then does every append need a descriptor it cannot get."""
    log = make_log()
    log.append_evaluations([evaluation(1)])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held: list[int] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 32, hard))
    try:
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as exc:
            assert exc.errno == errno.EMFILE
        log.rotate()  # cannot open a fresh segment: the open one goes on
        assert log.unready_reason() is None
        log.append_evaluations([evaluation(2)])
        with monkeypatch.context() as patch:
            patch.setattr(os, "write", _failing_write)
            with pytest.raises(EventLogUnavailable):
                log.append_evaluations([evaluation(3)])
        reason = log.unready_reason()
        assert reason is not None and "Too many open files" in reason
        with pytest.raises(EventLogUnavailable):
            log.append_evaluations([evaluation(4)])
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert log.unready_reason() is None
    log.append_evaluations([evaluation(5)])
    log.close()
    assert log.unready_reason() == "event log is closed"
    assert sorted(evaluation_ids(dirs[1])) == ["e-1", "e-2", "e-5"]
