"""The write-ahead frame format: how one ``append_*`` call is laid down in a segment file.

A frame is one batch of events of one type::

    magic  b"FSW1"             4 bytes
    crc32  of length+payload   4 bytes, little-endian unsigned
    length of payload          4 bytes, little-endian unsigned
    payload                    msgpack array [type_code, body]: for codes 1 and 2 a list of
                               events, each an array; for code 3 one EvaluationBatch

The header is written together with the payload by a single ``write`` so a frame is either
wholly in the page cache or torn at the tail of its segment. A torn or overwritten frame never
decodes: its length runs past the end of the file, its magic is wrong, or its crc (which covers
the length too) does not match. Readers stop at the first such frame, because the writer never
writes after a failed write (it starts a new segment instead).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import BinaryIO, NamedTuple

import msgspec

from api.eventlog.schema import (
    EVALUATION,
    FEEDBACK,
    OUTCOMES,
    EvaluationBatch,
    EvaluationEvent,
    FeedbackEvent,
)

MAGIC = b"FSW1"
HEADER = struct.Struct("<4sII")
MAX_PAYLOAD = 256 * 1024 * 1024
"""Larger lengths are treated as corruption, so garbage never makes a reader allocate GBs."""

TYPE_CODES = {EVALUATION: 1, FEEDBACK: 2}
TYPE_NAMES = {code: name for name, code in TYPE_CODES.items()}
EVALUATION_BATCH_CODE = 3
"""An ``EvaluationBatch``: evaluation events in columnar form, expanded when decoded."""

_encoder = msgspec.msgpack.Encoder()
_envelope = msgspec.msgpack.Decoder(tuple[int, msgspec.Raw])
_batch_decoders = {
    EVALUATION: msgspec.msgpack.Decoder(list[EvaluationEvent]),
    FEEDBACK: msgspec.msgpack.Decoder(list[FeedbackEvent]),
}
_evaluation_batch_decoder = msgspec.msgpack.Decoder(EvaluationBatch)


class Batch(NamedTuple):
    """The events of one decoded frame."""

    event_type: str
    events: list


class InvalidFrame(ValueError):
    """A frame whose crc is right but whose content does not fit its schema (a caller's bug)."""


def encode_frame(type_code: int, body: Sequence[tuple] | EvaluationBatch) -> bytearray:
    """One frame holding ``body``; encoded in place after a reserved header (no copy)."""
    buf = bytearray(HEADER.size)
    _encoder.encode_into((type_code, body), buf, HEADER.size)
    length = len(buf) - HEADER.size
    struct.pack_into("<I", buf, 8, length)
    crc = zlib.crc32(memoryview(buf)[8:])
    struct.pack_into("<4sI", buf, 0, MAGIC, crc)
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


def decode_payload(payload: bytes) -> Batch:
    """The typed events of one frame; ``InvalidFrame`` if they do not match their schema."""
    try:
        code, raw = _envelope.decode(payload)
        if code == EVALUATION_BATCH_CODE:
            batch = _evaluation_batch_decoder.decode(raw)
            if len(batch.outcomes) != len(batch.user_identifiers) or max(
                batch.outcomes, default=0
            ) >= len(OUTCOMES):
                raise InvalidFrame("evaluation batch: outcomes do not match its users")
            return Batch(EVALUATION, batch.events())
        event_type = TYPE_NAMES[code]
        return Batch(event_type, _batch_decoders[event_type].decode(raw))
    except (msgspec.DecodeError, KeyError) as exc:
        raise InvalidFrame(str(exc)) from exc
