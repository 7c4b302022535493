"""The write-ahead frame format: how one ``append_*`` call is laid down in a segment file.

A frame is one batch of events of one type::

    magic  b"FSW1"             4 bytes
    crc32  of length+payload   4 bytes, little-endian unsigned
    length of payload          4 bytes, little-endian unsigned
    payload                    msgpack array [type_code, body]: for codes 1, 2 and 6 a list
                               of events (evaluations, feedback, tracked events), each an
                               array; for code 4 one EvaluationBatch (code 3: one version-1
                               batch, without rule bytes; read, never written); for code 5
                               one LocalReport

The header is written together with the payload by a single ``write`` so a frame is either
wholly in the page cache or torn at the tail of its segment. A torn or overwritten frame never
decodes: its length runs past the end of the file, its magic is wrong, or its crc (which covers
the length too) does not match. Readers stop at the first such frame, because the writer never
writes after a failed write (it starts a new segment instead).
"""

from __future__ import annotations

import io
import operator
import struct
import typing
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, NamedTuple

import msgspec
from flagsight_core.registry import on_results_changed

from api.eventlog.schema import (
    EVALUATION,
    FEEDBACK,
    OUTCOMES,
    TRACK,
    V1_BATCH_DEFAULTS,
    EvaluationBatch,
    EvaluationBatchV1,
    EvaluationEvent,
    FeedbackEvent,
    LocalReport,
    TrackEvent,
)
from api.native import fastpath

MAGIC = b"FSW1"
HEADER = struct.Struct("<4sII")
_LENGTH = struct.Struct("<I")
_MAGIC_CRC = struct.Struct("<4sI")
_COPY_BELOW = 4096
"""Frames shorter than this have their crc taken over a copy (see ``encode_frame``)."""
MAX_PAYLOAD = 256 * 1024 * 1024
"""Larger lengths are treated as corruption, so garbage never makes a reader allocate GBs."""

TYPE_CODES = {EVALUATION: 1, FEEDBACK: 2, TRACK: 6}
"""The codes of frames holding a list of events of one type (3 to 5 are other forms)."""
TYPE_NAMES = {code: name for name, code in TYPE_CODES.items()}
EVALUATION_BATCH_CODE = 4
"""An ``EvaluationBatch``: evaluation events in columnar form, expanded when decoded."""
V1_EVALUATION_BATCH_CODE = 3
"""A version-1 batch (no rule bytes), still read from logs written before the upgrade."""
LOCAL_REPORT_CODE = 5
"""A ``LocalReport``: a local SDK's reported evaluations as sent, expanded when decoded."""

EVENTS, BATCHES, LOCAL = "events", "batches", "local"
"""The forms of a frame's body: a list of event tuples (codes 1, 2, 6), an ``EvaluationBatch``
(codes 3, 4) or a ``LocalReport`` (code 5)."""

_batch_bodies = getattr(fastpath, "batch_bodies", None)
"""The C scan of ordinary frames for ``iter_runs``, or None (no native module)."""

_encoder = msgspec.msgpack.Encoder()
_envelope = msgspec.msgpack.Decoder(tuple[int, msgspec.Raw])


class Batch(NamedTuple):
    """The events of one decoded frame."""

    event_type: str
    events: list


class InvalidFrame(ValueError):
    """A frame whose crc is right but whose content does not fit its schema (a caller's bug)."""


_HEADER_SIZE = HEADER.size
_encode_into = _encoder.encode_into
_pack_length = _LENGTH.pack_into
_pack_magic_crc = _MAGIC_CRC.pack_into
_crc32 = zlib.crc32
"""Bound once: ``encode_frame`` runs on every evaluate request, where looking each of them
up cost about as much as the encoding itself."""


def encode_frame(type_code: int, body: Sequence[tuple] | EvaluationBatch) -> bytearray:
    """One frame holding ``body``; encoded in place after a reserved header.

    The crc is taken over a copy of length and payload: for frames of a few hundred bytes
    (a single evaluate's) a slice is cheaper than a ``memoryview`` of the buffer.
    """
    buf = bytearray(_HEADER_SIZE)
    _encode_into((type_code, body), buf, _HEADER_SIZE)
    _pack_length(buf, 8, len(buf) - _HEADER_SIZE)
    _pack_magic_crc(
        buf, 0, MAGIC, _crc32(buf[8:]) if len(buf) < _COPY_BELOW else _crc32(memoryview(buf)[8:])
    )
    return buf


def iter_payloads(stream: BinaryIO) -> Iterator[bytes]:
    """Payloads of the complete, crc-valid frames from the start of ``stream``.

    Stops silently at the first torn or corrupt frame: nothing the writer acknowledged can
    follow it (see the module docstring).
    """
    while True:
        header = stream.read(HEADER.size)
        if len(header) < HEADER.size:
            return
        magic, crc, length = HEADER.unpack(header)
        if magic != MAGIC or length > MAX_PAYLOAD:
            return
        payload = stream.read(length)
        if len(payload) < length or zlib.crc32(payload, zlib.crc32(header[8:])) != crc:
            return
        yield payload


class _Decoders(NamedTuple):
    """The body decoders of one representation of events."""

    evaluation_batch: msgspec.msgpack.Decoder
    events: dict[str, msgspec.msgpack.Decoder]
    v1_batch: msgspec.msgpack.Decoder
    upgrade: Callable[[Any], Any]
    """A decoded version-1 batch in the form of a version-2 one."""
    local_report: msgspec.msgpack.Decoder


class _Body(NamedTuple):
    """One decoded frame body."""

    form: str
    event_type: str
    body: Any


def _plain(fields: type) -> Any:
    """The tuple type of a NamedTuple's fields, lists as variadic tuples.

    msgspec validates it exactly as the NamedTuple (same element types, same length), and it
    is cheaper to build. A plain tuple of strings, numbers and bytes is also left to itself by
    the garbage collector (msgspec creates it untracked, or CPython untracks it at its first
    collection); NamedTuples and lists never are, and full collections over chunks of them
    were up to half of the sealer's time.
    """
    hints = [
        tuple[_plain_item(hint.__args__[0]), ...] if typing.get_origin(hint) is list else hint
        for hint in typing.get_type_hints(fields).values()
    ]
    return tuple[tuple(hints)]


def _plain_item(hint: Any) -> Any:
    """A list's item type, itself plain if it is a NamedTuple (a ``LocalReport``'s rows)."""
    return _plain(hint) if isinstance(hint, type) and issubclass(hint, tuple) else hint


_TYPED = _Decoders(
    msgspec.msgpack.Decoder(EvaluationBatch),
    {
        EVALUATION: msgspec.msgpack.Decoder(list[EvaluationEvent]),
        FEEDBACK: msgspec.msgpack.Decoder(list[FeedbackEvent]),
        TRACK: msgspec.msgpack.Decoder(list[TrackEvent]),
    },
    msgspec.msgpack.Decoder(EvaluationBatchV1),
    EvaluationBatchV1.upgraded,
    msgspec.msgpack.Decoder(LocalReport),
)
_PLAIN = _Decoders(
    msgspec.msgpack.Decoder(_plain(EvaluationBatch)),
    {
        EVALUATION: msgspec.msgpack.Decoder(list[_plain(EvaluationEvent)]),
        FEEDBACK: msgspec.msgpack.Decoder(list[_plain(FeedbackEvent)]),
        TRACK: msgspec.msgpack.Decoder(list[_plain(TrackEvent)]),
    },
    msgspec.msgpack.Decoder(_plain(EvaluationBatchV1)),
    lambda batch: batch + V1_BATCH_DEFAULTS,
    msgspec.msgpack.Decoder(_plain(LocalReport)),
)
_SHORT_ENVELOPE = 0x92
"""msgpack's one-byte header of a 2-element array: with a one-byte type code after it, the
body starts at byte 2 and needs no envelope decode (the encoder always writes this form)."""
_BODY_CODES = frozenset(
    {*TYPE_NAMES, EVALUATION_BATCH_CODE, V1_EVALUATION_BATCH_CODE, LOCAL_REPORT_CODE}
)
_VALID = b""
"""The outcome bytes that index ``OUTCOMES``."""


@on_results_changed
def _follow_outcomes() -> None:
    """Follow ``OUTCOMES`` as rule types are registered."""
    global _VALID
    _VALID = bytes(range(len(OUTCOMES)))


_OUTCOMES_MISMATCH = "evaluation batch: outcomes do not match its users"
_USERS, _OUTCOMES, _RULES = map(
    EvaluationBatch._fields.index, ("user_identifiers", "outcomes", "rules")
)


def _decode(payload: bytes | memoryview, decoders: _Decoders) -> _Body:
    """The form, event type and body of one frame; ``InvalidFrame`` if it does not fit its schema.

    The body of a frame in the encoder's form is decoded without an envelope decode; any
    other frame, or one that fails, goes through the envelope as it always did, so that an
    invalid frame is reported in the same words.
    """
    if len(payload) > 2 and payload[0] == _SHORT_ENVELOPE and payload[1] in _BODY_CODES:
        try:
            return _decode_body(payload[1], payload[2:], decoders)
        except msgspec.DecodeError:
            pass  # decoded again below, to be reported in the words of the envelope decode
    try:
        code, raw = _envelope.decode(payload)
        return _decode_body(code, raw, decoders)
    except (msgspec.DecodeError, KeyError) as exc:
        raise _invalid(exc) from exc


def _decode_body(code: int, raw: Any, decoders: _Decoders) -> _Body:
    if code == EVALUATION_BATCH_CODE:
        batch = decoders.evaluation_batch.decode(raw)
        _check_outcomes(batch[_USERS], batch[_OUTCOMES], batch[_RULES])
        return _Body(BATCHES, EVALUATION, batch)
    if code == V1_EVALUATION_BATCH_CODE:
        batch = decoders.upgrade(decoders.v1_batch.decode(raw))
        _check_outcomes(batch[_USERS], batch[_OUTCOMES], batch[_RULES])
        return _Body(BATCHES, EVALUATION, batch)
    if code == LOCAL_REPORT_CODE:
        return _Body(LOCAL, EVALUATION, decoders.local_report.decode(raw))
    event_type = TYPE_NAMES[code]
    return _Body(EVENTS, event_type, decoders.events[event_type].decode(raw))


def _check_outcomes(users: Sequence[str], outcomes: bytes, rules: bytes) -> None:
    """One outcome per user, each an index into ``OUTCOMES``: deleting the valid bytes is a
    C-speed ``max(outcomes) < len(OUTCOMES)``. One rule byte per user, or none (version 1)."""
    if (
        len(outcomes) != len(users)
        or outcomes.translate(None, _VALID)
        or len(rules) not in (0, len(users))
    ):
        raise InvalidFrame(_OUTCOMES_MISMATCH)


def decode_payload(payload: bytes) -> Batch:
    """The typed events of one frame; ``InvalidFrame`` if they do not match their schema."""
    form, event_type, body = _decode(payload, _TYPED)
    if form != EVENTS:
        return Batch(event_type, body.events())
    return Batch(event_type, body)


def decode_evaluation_frame(frame: bytes | bytearray) -> EvaluationBatch:
    """The ``EvaluationBatch`` one whole frame holds, its header and crc checked: how a frame
    encoded elsewhere (``api.native``) is read back; ``InvalidFrame`` if it holds no batch."""
    payloads = list(iter_payloads(io.BytesIO(bytes(frame))))
    if len(payloads) != 1 or len(payloads[0]) != len(frame) - _HEADER_SIZE:
        raise InvalidFrame("not one whole, intact frame")
    body = _decode(payloads[0], _TYPED).body
    if not isinstance(body, EvaluationBatch):
        raise InvalidFrame("the frame holds no evaluation batch")
    return body


class Run(NamedTuple):
    """Consecutive valid frames of one event type and one form, for the sealer."""

    event_type: str
    form: str
    """What ``items`` are: event tuples (``EVENTS``), ``EvaluationBatch`` tuples
    (``BATCHES``, codes 3 and 4) or ``LocalReport`` tuples (``LOCAL``)."""
    items: list[tuple]
    rows: int


_RUN_KINDS = {
    (form, event_type): (event_type, form)
    for form in (EVENTS, BATCHES, LOCAL)
    for event_type in TYPE_CODES
}
"""One ``(event type, form)`` object per kind of run, compared by identity in the loop."""
_LOCAL_ROWS = LocalReport._fields.index("rows")
_BATCH_START = bytes([_SHORT_ENVELOPE, EVALUATION_BATCH_CODE])
_users_of, _outcomes_of = operator.itemgetter(_USERS), operator.itemgetter(_OUTCOMES)
_rules_of = operator.itemgetter(_RULES)


def iter_runs(
    segment: bytes, on_invalid: Callable[[InvalidFrame], None], max_bytes: int
) -> Iterator[Run]:
    """The complete, valid frames of a segment read into memory, in order, grouped in runs.

    What ``iter_payloads`` and ``decode_payload`` yield, in the form the sealer converts to
    Arrow without a Python object per event: a code-4 batch stays one tuple of its fields,
    the events of other frames are plain tuples, both validated exactly as ``decode_payload``
    validates; a frame it would reject goes to ``on_invalid`` and is skipped. A run ends when
    the next frame differs in type or form, or once its frames hold ``max_bytes`` of payload
    (which bounds the Python objects alive at once).

    This loop runs once per request the service answered, and in CPython each bytecode costs
    about as much as the work: it does only the framing and the crc of an ordinary frame (a
    one-batch frame) and keeps its body, and a run of them is decoded and checked by C loops
    (``map``) at its end. With the native module (``api.native``) the framing and crc of a
    stretch of ordinary frames are one C call (``batch_bodies``), which stops at anything
    else for this loop to read as before. Other frames are rarer and decoded one by one.
    """
    view = memoryview(segment)
    unpack, crc32, batch_start, scan = HEADER.unpack_from, zlib.crc32, _BATCH_START, _batch_bodies
    offset, end, size = 0, len(segment), 0
    raws: list[memoryview] = []  # the bodies of a run of ordinary frames, not yet decoded
    run: tuple[str, bool] | None = None  # or that of a run of other frames, decoded in items
    items: list[tuple] = []
    rows = 0
    while end - offset >= HEADER.size:
        found = scan(view, offset, max_bytes - size) if scan is not None else None
        if found and found[0]:  # ordinary frames, framed and crc-checked in C
            bodies, offset, length = found
        else:
            magic, crc, length = unpack(segment, offset)
            start = offset + HEADER.size
            offset = start + length
            if magic != MAGIC or length > MAX_PAYLOAD or offset > end:
                break
            if crc32(view[start - 4 : offset]) != crc:  # the crc covers the length too
                break
            ordinary = segment.startswith(batch_start, start, offset)
            bodies = [view[start + 2 : offset]] if ordinary else None
        size += length
        if bodies:
            if items:
                yield Run(*run, items, rows)
                items, rows = [], 0
            run = None
            raws += bodies
        else:
            if raws:
                yield from _batch_run(raws, on_invalid)
                raws = []
            try:
                form, event_type, body = _decode(view[start:offset], _PLAIN)
            except InvalidFrame as exc:
                on_invalid(exc)
                continue
            kind = _RUN_KINDS[form, event_type]
            if kind is not run:
                if items:
                    yield Run(*run, items, rows)
                    items, rows = [], 0
                run = kind
            if form == EVENTS:
                items += body
                rows += len(body)
            else:
                items.append(body)
                rows += len(body[_USERS if form == BATCHES else _LOCAL_ROWS])
        if size >= max_bytes:
            if raws:
                yield from _batch_run(raws, on_invalid)
                raws = []
            if items:
                yield Run(*run, items, rows)
                items, rows = [], 0
            size = 0
    if raws:
        yield from _batch_run(raws, on_invalid)
    if items:
        yield Run(*run, items, rows)


def _batch_run(raws: list[memoryview], on_invalid: Callable[[InvalidFrame], None]) -> list[Run]:
    """The run of the code-4 bodies ``raws``, decoded and checked without a bytecode per frame;
    one by one (to report each invalid frame in order) only if one of them is invalid."""
    try:
        batches = list(map(_PLAIN.evaluation_batch.decode, raws))
    except msgspec.DecodeError:
        batches = None
    else:
        outcomes = list(map(_outcomes_of, batches))
        users = list(map(len, map(_users_of, batches)))
        if (
            list(map(len, outcomes)) != users
            or list(map(len, map(_rules_of, batches))) != users
            or b"".join(outcomes).translate(None, _VALID)
        ):
            batches = None
    if batches is None:
        batches = _valid_batches(raws, on_invalid)
        users = list(map(len, map(_users_of, batches)))
    return [Run(EVALUATION, BATCHES, batches, sum(users))] if batches else []


def _valid_batches(
    raws: list[memoryview], on_invalid: Callable[[InvalidFrame], None]
) -> list[tuple]:
    """The valid batches among the code-4 bodies ``raws``, the others reported in order."""
    batches = []
    for raw in raws:
        try:  # the whole payload again, for the words ``decode_payload`` would use
            batches.append(_decode(_BATCH_START + bytes(raw), _PLAIN).body)
        except InvalidFrame as exc:
            on_invalid(exc)
    return batches


def _invalid(exc: Exception) -> InvalidFrame:
    """``InvalidFrame`` as ``_decode`` raises it, caused by ``exc``."""
    invalid = InvalidFrame(str(exc))
    invalid.__cause__ = exc
    return invalid
