"""Sealing a segment: only whole, valid frames; the same files however often it runs."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from api.eventlog.frames import HEADER, TYPE_CODES, encode_frame
from api.eventlog.schema import EVALUATION, FEEDBACK
from api.eventlog.sealer import Backlog
from api.eventlog.sealing import seal_segment
from api.eventlog.sinks import ParquetSink
from tests.eventlog.support import LAST_US_OF_DAY, evaluation, evaluation_ids, feedback, query


def _frames(*batches: list) -> list[bytes]:
    return [bytes(encode_frame(TYPE_CODES[EVALUATION], batch)) for batch in batches]


def _write_segment(wal: Path, frames: list[bytes], name: str = "host-1-1-000001.wal") -> Path:
    wal.mkdir(parents=True, exist_ok=True)
    path = wal / name
    path.write_bytes(b"".join(frames))
    return path


def _truncate_mid_payload(frames: list[bytes]) -> list[bytes]:
    return [*frames[:-1], frames[-1][: len(frames[-1]) - 3]]


def _truncate_mid_header(frames: list[bytes]) -> list[bytes]:
    return [*frames[:-1], frames[-1][: HEADER.size - 2]]


def _flip(frame: bytes, offset: int) -> bytes:
    return frame[:offset] + bytes([frame[offset] ^ 0x01]) + frame[offset + 1 :]


DAMAGE = {
    # the writer died (or the disk filled) in the middle of the last frame
    "truncated payload": _truncate_mid_payload,
    "truncated header": _truncate_mid_header,
    # a machine crash can leave a zero-filled tail after the last synced frame
    "zero tail": lambda frames: [*frames[:-1], bytes(len(frames[-1]))],
    # bit rot in the third frame: it and everything after it are dropped
    "bad crc": lambda frames: [*frames[:2], _flip(frames[2], 4), *frames[3:]],
    "bad payload": lambda frames: [*frames[:2], _flip(frames[2], len(frames[2]) - 1), *frames[3:]],
    "bad length": lambda frames: [*frames[:2], _flip(frames[2], 8), *frames[3:]],
    "bad magic": lambda frames: [*frames[:2], _flip(frames[2], 0), *frames[3:]],
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_only_complete_valid_frames_before_the_damage_are_sealed(tmp_path, damage):
    batches = [[evaluation(n)] for n in range(2)] + [[evaluation(n) for n in range(2, 6)]]
    if damage.startswith("bad"):
        batches.append([evaluation(9)])  # a valid frame after a corrupt one is not trusted
    segment = _write_segment(tmp_path / "wal", DAMAGE[damage](_frames(*batches)))
    seal_segment(segment, ParquetSink(str(tmp_path / "events")))
    assert sorted(evaluation_ids(tmp_path / "events")) == ["e-0", "e-1"]


def test_a_frame_that_fits_no_schema_is_reported_and_skipped(tmp_path, caplog):
    bad = bytes(encode_frame(TYPE_CODES[EVALUATION], [("not", "an", "event")]))
    good = _frames([evaluation(1)], [evaluation(2)])
    segment = _write_segment(tmp_path / "wal", [good[0], bad, good[1]])
    with caplog.at_level(logging.ERROR, logger="flagsight.eventlog"):
        seal_segment(segment, ParquetSink(str(tmp_path / "events")))
    assert sorted(evaluation_ids(tmp_path / "events")) == ["e-1", "e-2"]
    assert [r.event for r in caplog.records] == ["invalid_frame"]


def _digest(events: Path) -> dict[str, str]:
    return {
        p.relative_to(events).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(events.rglob("*"))
        if p.is_file()
    }


def test_resealing_rewrites_identical_files_and_no_duplicates(tmp_path):
    frames = [
        bytes(encode_frame(TYPE_CODES[EVALUATION], [evaluation(n, LAST_US_OF_DAY + n % 2)]))
        for n in range(50)
    ] + [bytes(encode_frame(TYPE_CODES[FEEDBACK], [feedback(n) for n in range(7)]))]
    segment = _write_segment(tmp_path / "wal", frames)
    events = tmp_path / "events"
    sink = ParquetSink(str(events))

    first = seal_segment(segment, sink)
    before = _digest(events)
    assert len(before) == 3  # evaluation on two dates, feedback on one; no temporaries left
    # A crash after the first rename: a file is missing, the segment is still there.
    Path(first[-1].path).unlink()
    seal_segment(segment, sink)
    seal_segment(segment, sink)
    assert _digest(events) == before

    ids = evaluation_ids(events)
    assert len(ids) == len(set(ids)) == 50
    fb = query(
        f"SELECT count(*) AS n FROM read_parquet('{events}/event_type=feedback/*/*.parquet')"
    )
    assert fb.column("n").to_pylist() == [7]


def test_big_segments_are_split_into_bounded_row_groups(tmp_path):
    batch = [evaluation(n) for n in range(10)]
    segment = _write_segment(tmp_path / "wal", _frames(*[batch] * 5))
    [sealed] = seal_segment(segment, ParquetSink(str(tmp_path / "events"), row_group_rows=16))
    assert pq.ParquetFile(sealed.path).metadata.num_row_groups == 4
    assert sealed.rows == 50


def test_rows_keep_append_order_across_frames_types_and_chunks(tmp_path):
    # 20,000 one-event and bulk frames of both types interleaved: several Arrow chunks each.
    frames, expected = [], {EVALUATION: [], FEEDBACK: []}
    for n in range(0, 20_000, 1000):
        event_type, make = (EVALUATION, evaluation) if n % 3000 else (FEEDBACK, feedback)
        batches = [[make(n)], [make(i) for i in range(n + 1, n + 1000)]]
        for batch in batches:
            frames.append(bytes(encode_frame(TYPE_CODES[event_type], batch)))
            expected[event_type] += [e.evaluation_id for e in batch]
    segment = _write_segment(tmp_path / "wal", frames)
    sealed = seal_segment(segment, ParquetSink(str(tmp_path / "events")))
    for item in sealed:
        assert (
            pq.read_table(item.path).column("evaluation_id").to_pylist()
            == expected[item.event_type]
        )
    assert sorted(item.event_type for item in sealed) == [EVALUATION, FEEDBACK]


def test_the_backlog_age_counts_segments_holding_events_not_an_idle_workers_empty_one(
    tmp_path,
) -> None:
    """An idle worker keeps an empty active segment for hours: nothing waits in it, so it must
    not push ``flagsight_event_log_backlog_age_seconds`` past its alert (docs/events.md)."""
    import os

    from api.eventlog.sealer import backlog

    now = 1_800_000_000.0
    idle = tmp_path / "idle-worker.wal"
    idle.write_bytes(b"")
    os.utime(idle, (now - 3_600, now - 3_600))
    assert backlog(tmp_path, now) == Backlog(1, 0, 0.0)
    waiting = tmp_path / "busy-worker.wal"
    waiting.write_bytes(b"x" * 10)
    os.utime(waiting, (now - 30, now - 30))
    assert backlog(tmp_path, now) == Backlog(2, 10, 30.0)
