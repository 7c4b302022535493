"""A segment's frames go into room reserved on disk ahead of them: readers stop at the unused
room's zeros (a killed owner leaves them), and closing trims it so the file is its frames."""

from __future__ import annotations

import io
import os
from pathlib import Path

from api.eventlog.frames import EVALUATION_BATCH_CODE, TYPE_CODES, encode_frame, iter_payloads
from api.eventlog.schema import EVALUATION, EvaluationBatch
from api.eventlog.segments import ROOM_STEP, SegmentNamer, create_segment
from tests.eventlog.support import evaluation


def _frames(count: int, events: int = 1) -> list[bytearray]:
    return [
        encode_frame(TYPE_CODES[EVALUATION], [evaluation(n * events + k) for k in range(events)])
        for n in range(count)
    ]


def test_frames_sit_in_reserved_room_that_readers_stop_at_and_close_trims(tmp_path: Path):
    segment = create_segment(tmp_path, SegmentNamer(lambda: 1.0))
    assert segment.path.stat().st_size == 0  # an idle segment holds no room
    frames = _frames(3)
    for frame in frames:
        segment.append(frame)
    held = segment.path.read_bytes()  # what a reader sees if the owner is killed now
    assert len(held) == ROOM_STEP
    assert os.stat(segment.path).st_blocks * 512 >= ROOM_STEP  # reserved, not a hole
    assert held[segment.written :] == bytes(ROOM_STEP - segment.written)
    assert list(iter_payloads(io.BytesIO(held))) == [bytes(f[12:]) for f in frames]
    segment.close()
    assert segment.path.read_bytes() == b"".join(frames)


def test_a_frame_larger_than_a_step_gets_room_of_its_own_size(tmp_path: Path):
    segment = create_segment(tmp_path, SegmentNamer(lambda: 1.0))
    small, big = _frames(1)[0], _frames(1, events=3 * ROOM_STEP // 100)[0]
    assert len(big) > 2 * ROOM_STEP
    segment.append(small)
    segment.append(big)
    segment.append(small)
    assert segment.path.stat().st_size >= len(small) * 2 + len(big)
    segment.close()
    payloads = list(iter_payloads(io.BytesIO(segment.path.read_bytes())))
    assert payloads == [bytes(small[12:]), bytes(big[12:]), bytes(small[12:])]


def test_a_batch_frame_round_trips_through_the_mapping(tmp_path: Path):
    """The columnar frame of a single evaluate, as the request path appends it, synced."""
    batch = EvaluationBatch(
        "AQAAAAAAAAChAAAAAAAAAAEAAb0pOmV1Ym9r5e1xUQ", 1_764_000_000_000_000, "org_1", "env_1",
        "f", None, "key_1", "evaluate", ["u"], b"\x05", b"\x01", 1, 25.0,
    )  # fmt: skip
    frame = encode_frame(EVALUATION_BATCH_CODE, batch)
    segment = create_segment(tmp_path, SegmentNamer(lambda: 1.0))
    segment.append(frame)
    segment.sync()
    segment.close()
    assert segment.path.read_bytes() == bytes(frame)
