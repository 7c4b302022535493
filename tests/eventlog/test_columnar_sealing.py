"""Columnar sealing: the same tables, reports and Parquet bytes as expanding every event.

The reference is the sealer as it was before it built Arrow columns from frames directly:
each payload through ``decode_payload`` (as then written), its events as tuples, one struct
conversion per event type; a local report's rows as the events the service wrote for them
before it kept reports as sent. Segments mix every frame form, every event type, batches of no,
one and many users, local reports, every outcome, two UTC dates and invalid frames, and are
sealed with
the production chunk sizes and with tiny ones (so every chunk and run boundary is crossed).
"""

from __future__ import annotations

import hashlib
import io
import itertools
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import msgspec
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.eventlog import frames as frame_format
from api.eventlog import sealing
from api.eventlog.frames import (
    EVALUATION_BATCH_CODE,
    HEADER,
    LOCAL_REPORT_CODE,
    MAGIC,
    TYPE_CODES,
    TYPE_NAMES,
    V1_EVALUATION_BATCH_CODE,
    Batch,
    InvalidFrame,
    decode_payload,
    encode_frame,
    iter_payloads,
)
from api.eventlog.schema import (
    EVALUATION,
    EVENT_TYPES,
    FEEDBACK,
    OUTCOMES,
    SCHEMA_VERSION,
    SCHEMAS,
    SOURCE_LOCAL,
    TRACK,
    EvaluationBatch,
    EvaluationBatchV1,
    EvaluationEvent,
    FeedbackEvent,
    LocalReport,
    LocalRow,
    TrackEvent,
)
from api.eventlog.sealing import build_table, read_segment, seal_segment, split_by_date
from api.eventlog.sinks import ParquetSink
from tests.eventlog.support import LAST_US_OF_DAY, evaluation, feedback, track

DAY_US = 86_400 * 1_000_000

# -- the reference: decode_payload and the struct conversion, as they were ------------------

_envelope = msgspec.msgpack.Decoder(tuple[int, msgspec.Raw])
_reference_decoders = {
    EVALUATION: msgspec.msgpack.Decoder(list[EvaluationEvent]),
    FEEDBACK: msgspec.msgpack.Decoder(list[FeedbackEvent]),
    TRACK: msgspec.msgpack.Decoder(list[TrackEvent]),
}
_reference_batch_decoder = msgspec.msgpack.Decoder(EvaluationBatch)
_reference_v1_batch_decoder = msgspec.msgpack.Decoder(EvaluationBatchV1)
_reference_local_decoder = msgspec.msgpack.Decoder(LocalReport)


def reference_local_events(report: LocalReport) -> list[EvaluationEvent]:
    """The events the service appended for a report's rows before it kept them as sent."""
    return [
        EvaluationEvent(
            row.evaluation_id,
            row.evaluated_at_ms * 1000,
            report.organization_id,
            report.environment_id,
            row.flag_key,
            row.user_identifier,
            row.value,
            row.matched_rule_type,
            row.error_type,
            report.sdk,
            report.api_key_id,
            SOURCE_LOCAL,
            row.rule_index,
            row.arm,
            row.rollout_percentage if row.arm is not None else None,
        )  # fmt: skip
        for row in report.rows
    ]


def reference_decode(payload: bytes) -> Batch:
    """``decode_payload`` before the columnar path (with version-2 batches: their events()
    expand the arms one user at a time, with ``schema.arm_of``)."""
    try:
        code, raw = _envelope.decode(payload)
        if code in (EVALUATION_BATCH_CODE, V1_EVALUATION_BATCH_CODE):
            if code == EVALUATION_BATCH_CODE:
                batch = _reference_batch_decoder.decode(raw)
            else:
                batch = _reference_v1_batch_decoder.decode(raw).upgraded()
            if (
                len(batch.outcomes) != len(batch.user_identifiers)
                or max(batch.outcomes, default=0) >= len(OUTCOMES)
                or len(batch.rules) not in (0, len(batch.user_identifiers))
            ):
                raise InvalidFrame("evaluation batch: outcomes do not match its users")
            return Batch(EVALUATION, batch.events())
        if code == LOCAL_REPORT_CODE:
            return Batch(EVALUATION, reference_local_events(_reference_local_decoder.decode(raw)))
        event_type = TYPE_NAMES[code]
        return Batch(event_type, _reference_decoders[event_type].decode(raw))
    except (msgspec.DecodeError, KeyError) as exc:
        raise InvalidFrame(str(exc)) from exc


def reference_tables(segment: bytes) -> tuple[dict[str, pa.Table], list[str]]:
    """Tables of a segment's events, and what was reported invalid, the old way."""
    events: dict[str, list] = {event_type: [] for event_type in EVENT_TYPES}
    invalid = []
    for payload in iter_payloads(io.BytesIO(segment)):
        try:
            batch = reference_decode(payload)
        except InvalidFrame as exc:
            invalid.append(str(exc))
            continue
        events[batch.event_type].extend(batch.events)
    tables = {}
    for event_type, rows in events.items():
        if rows:
            schema = SCHEMAS[event_type]
            columns = pa.array(rows, type=pa.struct(list(schema)[1:])).flatten()
            version = pa.array(np.full(len(rows), SCHEMA_VERSION, dtype=np.int16))
            tables[event_type] = pa.Table.from_arrays([version, *columns], schema=schema)
    return tables, invalid


def sealed_tables(segment: Path) -> tuple[dict[str, pa.Table], list[str]]:
    invalid: list[str] = []
    chunks = read_segment(segment, lambda exc: invalid.append(str(exc)))
    tables = {t: build_table(t, c) for t, c in chunks.items() if c}
    return tables, invalid


def digests(events: Path) -> dict[str, str]:
    return {
        p.relative_to(events).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(events.rglob("*"))
        if p.is_file()
    }


@contextmanager
def chunking(chunk_events: int, run_bytes: int) -> Iterator[None]:
    with (
        mock.patch.object(sealing, "CHUNK_EVENTS", chunk_events),
        mock.patch.object(sealing, "RUN_BYTES", run_bytes),
    ):
        yield


CHUNKINGS = {"production": (sealing.CHUNK_EVENTS, sealing.RUN_BYTES), "tiny": (3, 200)}
SCANS = {"python": None} | (
    {"native": frame_format._batch_bodies} if frame_format._batch_bodies else {}
)
"""The frame loop's two forms: Python alone, and the C scan of ordinary frames (when built)."""


def assert_seals_like_reference(tmp_path: Path, frames: list[bytes]) -> list[str]:
    """Same tables, same reports and byte-identical files; returns the reports."""
    segment_bytes = b"".join(frames)
    wal = tmp_path / "wal"
    wal.mkdir(parents=True, exist_ok=True)
    segment = wal / "host-1-1-000001.wal"
    segment.write_bytes(segment_bytes)
    expected, expected_invalid = reference_tables(segment_bytes)

    reference_sink = ParquetSink(str(tmp_path / "reference"))
    for event_type, table in expected.items():
        for date, part in split_by_date(table):
            reference_sink.publish(part, event_type, date, "host-1-1-000001")

    for (name, (chunk_events, run_bytes)), (scan_name, scan) in itertools.product(
        CHUNKINGS.items(), SCANS.items()
    ):
        name = f"{name}, {scan_name}"
        with (
            chunking(chunk_events, run_bytes),
            mock.patch.object(frame_format, "_batch_bodies", scan),
        ):
            tables, invalid = sealed_tables(segment)
            assert tables.keys() == expected.keys(), name
            for event_type, table in tables.items():
                assert table.schema.equals(SCHEMAS[event_type], check_metadata=True), name
                assert table.equals(expected[event_type]), (name, event_type)
                assert all(c.num_chunks == 1 for c in table.columns), name
            assert invalid == expected_invalid, name
            events = tmp_path / f"events-{chunk_events}-{scan_name}"
            seal_segment(segment, ParquetSink(str(events)), lambda exc: None)
            assert digests(events) == digests(tmp_path / "reference"), name
    return expected_invalid


# -- frames -------------------------------------------------------------------------------


def raw_frame(payload: bytes) -> bytes:
    """A frame with a valid crc around any payload (encode_frame only writes good ones)."""
    length = struct.pack("<I", len(payload))
    return struct.pack("<4sI", MAGIC, zlib.crc32(length + payload)) + length + payload


def events_frame(event_type: str, events: list[tuple]) -> bytes:
    return bytes(encode_frame(TYPE_CODES[event_type], events))


def batch_frame(batch: EvaluationBatch) -> bytes:
    return bytes(encode_frame(EVALUATION_BATCH_CODE, batch))


def long_envelope(code: int, body: object) -> bytes:
    """The same frame with its type code as a msgpack uint8: valid, but not the encoder's
    form, so it is decoded through the envelope."""
    return raw_frame(b"\x92\xcc" + bytes([code]) + msgspec.msgpack.encode(body))


def make_batch(
    n: int,
    users: list[str],
    outcomes: bytes,
    *,
    at_us: int = LAST_US_OF_DAY,
    sdk: str | None = None,
) -> EvaluationBatch:
    """Users' rule bytes cycle through every arm of a flag whose split rule is its rule 1."""
    rules = bytes((0, 1, 2, 254, 255)[i % 5] for i in range(len(users)))
    return EvaluationBatch(
        f"prefix-{n:036d}-ab",
        at_us,
        f"org-{n % 3}",
        f"env-{n % 2}",
        f"flag.{n % 4}",
        sdk,
        f"key-{n % 2}",
        ("v1", "v1-bulk", "ofrep", "ofrep-bulk")[n % 4],
        users,
        outcomes,
        rules,
        1 if n % 3 else -1,
        25.5 if n % 3 else None,
    )


def local_frame(report: LocalReport) -> bytes:
    return bytes(encode_frame(LOCAL_REPORT_CODE, report))


def make_report(n: int, rows: int, *, at_us: int = LAST_US_OF_DAY) -> LocalReport:
    """Rows through every outcome, in and out of an arm, with and without a percentage."""
    return LocalReport(
        f"org-{n % 3}",
        f"env-{n % 2}",
        None if n % 2 else "python/1.2.3",
        f"key-{n % 2}",
        [
            LocalRow(
                f"prefix-{n:036d}-ab{i:04x}",
                at_us // 1000 + i % 2,
                f"flag.{i % 4}",
                f"u{i}",
                *OUTCOMES[i % len(OUTCOMES)],
                (None, 0, 3)[i % 3],
                (None, "treatment", "control")[i % 3],
                (None, 12.5)[i % 2],
            )  # fmt: skip
            for i in range(rows)
        ],
    )


def v1_frame(batch: EvaluationBatch) -> bytes:
    """``batch`` as version 1 wrote it (frame code 3, no rule bytes)."""
    v1 = EvaluationBatchV1(*batch[: len(EvaluationBatchV1._fields)])
    return raw_frame(b"\x92\x03" + msgspec.msgpack.encode(v1))


def every_outcome(n: int) -> bytes:
    return bytes((n + i) % len(OUTCOMES) for i in range(len(OUTCOMES)))


# -- examples -----------------------------------------------------------------------------


def test_a_mixed_segment_seals_exactly_as_expanded_events(tmp_path: Path) -> None:
    frames = []
    for n in range(30):
        at = LAST_US_OF_DAY + (n % 3) - 1  # the last microsecond of a day, and the next day
        sdk = None if n % 2 else "python/1.2.3"
        frames.append(
            batch_frame(make_batch(n, [f"üser-{n}"], bytes([n % len(OUTCOMES)]), at_us=at, sdk=sdk))
        )
        if n % 5 == 0:
            users = [f"u-{n}-{i}" for i in range(len(OUTCOMES))]
            frames.append(batch_frame(make_batch(n, users, every_outcome(n), at_us=at, sdk=sdk)))
        if n % 7 == 0:
            frames.append(events_frame(EVALUATION, [evaluation(n, at), evaluation(n + 1, at)]))
        if n % 4 == 0:
            frames.append(events_frame(FEEDBACK, [feedback(i, at) for i in range(n, n + 5)]))
        if n % 3 == 0:
            frames.append(events_frame(TRACK, [track(i, at) for i in range(n, n + n % 4 + 1)]))
        if n == 13:  # a batch whose outcomes do not fit its users, in the middle
            frames.append(batch_frame(make_batch(n, ["a", "b"], bytes([1]))))
        if n == 17:  # a batch of version 1, from a log written before the upgrade
            frames.append(v1_frame(make_batch(n, ["v1-a", "v1-b"], bytes([5, 0]))))
        if n % 6 == 0:  # local reports, one of them across midnight
            frames.append(local_frame(make_report(n, (n % 4) * 40, at_us=at)))
    invalid = assert_seals_like_reference(tmp_path, frames)
    assert invalid == ["evaluation batch: outcomes do not match its users"]


INVALID_FRAMES = {
    "outcomes shorter than users": batch_frame(make_batch(1, ["a", "b"], bytes([1]))),
    "outcomes longer than users": batch_frame(make_batch(1, ["a"], bytes([1, 2]))),
    "rules shorter than users": batch_frame(
        make_batch(1, ["a", "b"], b"\x01\x01")._replace(rules=b"\x00")
    ),
    "an outcome past OUTCOMES": batch_frame(make_batch(1, ["a", "b"], bytes([1, len(OUTCOMES)]))),
    "a field of the wrong type": raw_frame(
        b"\x92\x03"
        + msgspec.msgpack.encode(("p", "not a time", "o", "e", "f", None, "k", "s", [], b""))
    ),
    "a batch of too few fields": raw_frame(b"\x92\x03" + msgspec.msgpack.encode(("p", 1))),
    "bytes after the body": raw_frame(
        bytes(encode_frame(EVALUATION_BATCH_CODE, make_batch(1, ["a"], b"\x01")))[HEADER.size :]
        + b"\xc0"
    ),
    "a truncated body": raw_frame(
        bytes(encode_frame(EVALUATION_BATCH_CODE, make_batch(1, ["a"], b"\x01")))[HEADER.size : -3]
    ),
    "events that are not events": events_frame(EVALUATION, [("not", "an", "event")]),
    "a tracked event without its value": events_frame(TRACK, [track(1)[:6] + track(1)[7:]]),
    "a local row of the wrong type": raw_frame(
        b"\x92\x05"
        + msgspec.msgpack.encode(("o", "e", None, "k", [("id", "not a time", *("f",) * 8)]))
    ),
    "a local row of too few fields": raw_frame(
        b"\x92\x05" + msgspec.msgpack.encode(("o", "e", None, "k", [("id", 1)]))
    ),
    "an unknown type code": raw_frame(msgspec.msgpack.encode((9, []))),
    "not msgpack": raw_frame(b"\xc1\xc1\xc1"),
    "an empty payload": raw_frame(b""),
    "only the envelope": raw_frame(b"\x92\x03"),
}


@pytest.mark.parametrize("name", list(INVALID_FRAMES))
def test_an_invalid_frame_is_reported_in_the_same_words_and_skipped(
    tmp_path: Path, name: str
) -> None:
    good = [batch_frame(make_batch(n, [f"u{n}"], bytes([n]))) for n in range(4)]
    frames = [*good[:2], INVALID_FRAMES[name], *good[2:]]
    invalid = assert_seals_like_reference(tmp_path, frames)
    assert len(invalid) == 1


def test_frames_outside_the_encoders_form_are_decoded_through_the_envelope(
    tmp_path: Path,
) -> None:
    batch = make_batch(5, ["x", "y", "z"], bytes([0, 5, 10]), sdk="go/1")
    frames = [
        batch_frame(make_batch(1, ["a"], b"\x01")),
        long_envelope(EVALUATION_BATCH_CODE, batch),
        long_envelope(TYPE_CODES[EVALUATION], [evaluation(3)]),
        batch_frame(make_batch(2, ["b"], b"\x02")),
        long_envelope(TYPE_CODES[FEEDBACK], [feedback(4)]),
        long_envelope(TYPE_CODES[TRACK], [track(5)]),
    ]
    assert assert_seals_like_reference(tmp_path, frames) == []


def test_batches_of_no_users_add_no_rows(tmp_path: Path) -> None:
    frames = [
        batch_frame(make_batch(0, [], b"")),
        batch_frame(make_batch(1, ["a"], b"\x01")),
        batch_frame(make_batch(2, [], b"")),
        events_frame(EVALUATION, [evaluation(3)]),
        batch_frame(make_batch(4, [], b"")),
    ]
    assert_seals_like_reference(tmp_path, frames)
    frames = [batch_frame(make_batch(0, [], b"")), events_frame(FEEDBACK, [feedback(1)])]
    assert_seals_like_reference(tmp_path, frames)


def test_local_reports_of_no_rows_add_none_and_keep_frame_order(tmp_path: Path) -> None:
    frames = [
        local_frame(make_report(0, 0)),
        batch_frame(make_batch(1, ["a"], b"\x01")),
        local_frame(make_report(2, 3)),
        events_frame(EVALUATION, [evaluation(3)]),
        local_frame(make_report(4, 0)),
        batch_frame(make_batch(5, ["b"], b"\x02")),
        local_frame(make_report(6, 10_000)),
    ]
    assert_seals_like_reference(tmp_path, frames)


def test_ids_of_a_batch_past_65536_users_have_five_hex_digits(tmp_path: Path) -> None:
    users = [f"u{i}" for i in range(70_000)]
    outcomes = bytes(i % len(OUTCOMES) for i in range(len(users)))
    frames = [
        batch_frame(make_batch(1, users, outcomes)),
        batch_frame(make_batch(2, ["a"], b"\x03")),
    ]
    assert_seals_like_reference(tmp_path, frames)


# -- any segment --------------------------------------------------------------------------

texts = st.text(max_size=6)
times = st.integers(LAST_US_OF_DAY - DAY_US, LAST_US_OF_DAY + DAY_US)
optional = st.none() | texts

evaluation_events = st.builds(
    EvaluationEvent,
    texts,
    times,
    texts,
    texts,
    texts,
    texts,
    st.booleans(),
    optional,
    optional,
    optional,
    texts,
    texts,
    st.none() | st.integers(0, 253),
    st.none() | st.sampled_from(["treatment", "control"]),
    st.none() | st.floats(0, 100),
)
feedback_events = st.builds(
    FeedbackEvent,
    texts,
    times,
    texts,
    texts,
    st.booleans(),
    st.none() | st.integers(-5, 5) | st.floats(allow_nan=False),  # ints decode as floats
    optional,
    texts,
)


@st.composite
def batches(draw: st.DrawFn) -> EvaluationBatch:
    users = draw(st.lists(texts, max_size=5))
    outcomes = bytes(
        draw(st.lists(st.integers(0, len(OUTCOMES) - 1), min_size=len(users), max_size=len(users)))
    )
    rules = bytes(draw(st.lists(st.integers(0, 255), min_size=len(users), max_size=len(users))))
    return EvaluationBatch(
        draw(texts),
        draw(times),
        draw(texts),
        draw(texts),
        draw(texts),
        draw(optional),
        draw(texts),
        draw(texts),
        users,
        outcomes,
        rules,
        draw(st.integers(-1, 4)),
        draw(st.none() | st.floats(0, 100)),
    )


local_rows = st.builds(
    LocalRow,
    texts,
    st.integers((LAST_US_OF_DAY - DAY_US) // 1000, (LAST_US_OF_DAY + DAY_US) // 1000),
    texts,
    texts,
    st.booleans(),
    optional,
    optional,
    st.none() | st.integers(0, 253),
    st.none() | st.sampled_from(["treatment", "control"]),
    st.none() | st.floats(0, 100),
)
local_reports = st.builds(
    LocalReport, texts, texts, optional, texts, st.lists(local_rows, max_size=5)
)


@st.composite
def bad_batches(draw: st.DrawFn) -> bytes:
    batch = draw(batches())
    if draw(st.booleans()):
        return batch_frame(batch._replace(outcomes=batch.outcomes + b"\x00"))
    return batch_frame(
        batch._replace(outcomes=bytes([len(OUTCOMES)]) * len(batch.outcomes) or b"\xff")
    )


frames_ = st.one_of(
    batches().map(batch_frame),
    batches().map(batch_frame),  # ordinary traffic: mostly batches
    st.lists(evaluation_events, min_size=1, max_size=4).map(lambda e: events_frame(EVALUATION, e)),
    st.lists(feedback_events, max_size=4).map(lambda e: events_frame(FEEDBACK, e)),
    batches().map(lambda b: long_envelope(EVALUATION_BATCH_CODE, b)),
    batches().map(v1_frame),
    local_reports.map(local_frame),
    bad_batches(),
    st.binary(max_size=12).map(raw_frame),
)


@st.composite
def endings(draw: st.DrawFn) -> list[bytes]:
    """How a segment can end besides its last whole frame: zeros (blocks a machine crash left
    allocated but unwritten), a frame torn by its writer's death, a damaged frame with whole
    ones after it (never read)."""
    frame = bytearray(draw(frames_))
    kind = draw(st.sampled_from(["none", "zeros", "torn", "damaged"]))
    if kind == "zeros":
        return [bytes(draw(st.integers(1, 300)))]
    if kind == "torn":
        return [bytes(frame[: draw(st.integers(0, len(frame) - 1))])]
    if kind == "damaged":
        frame[draw(st.integers(0, len(frame) - 1))] ^= 1 << draw(st.integers(0, 7))
        return [bytes(frame), *draw(st.lists(frames_, max_size=3))]
    return []


@settings(max_examples=150, deadline=None)
@given(frames=st.lists(frames_, max_size=25), ending=endings())
def test_any_segment_seals_exactly_as_expanded_events(
    tmp_path_factory, frames: list[bytes], ending: list[bytes]
) -> None:
    assert_seals_like_reference(tmp_path_factory.mktemp("segment"), frames + ending)


@settings(max_examples=300, deadline=None)
@given(frame=frames_)
def test_decode_payload_is_unchanged(frame: bytes) -> None:
    (payload,) = list(iter_payloads(io.BytesIO(frame)))
    try:
        expected = reference_decode(payload)
    except InvalidFrame as exc:
        with pytest.raises(InvalidFrame) as raised:
            decode_payload(payload)
        assert str(raised.value) == str(exc)
    else:
        batch = decode_payload(payload)
        assert batch == expected
        assert [type(e) for e in batch.events] == [type(e) for e in expected.events]
