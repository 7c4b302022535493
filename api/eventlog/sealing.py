"""Sealing: turning one closed segment into Hive-partitioned Parquet files, idempotently.

A segment yields at most one file per (event type, UTC date), named after the segment::

    <events>/<type>/date=YYYY-MM-DD/<segment stem>.parquet

The bytes depend only on the segment's content (row order is frame order, fixed writer
options), so sealing a segment again after a crash rewrites identical files under the same
names: an event lands in exactly one file however often sealing is retried. Each file is
written under a hidden temporary name in its final directory and renamed once closed, so a
reader globbing ``*.parquet`` never opens a half-written file.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from api.eventlog.frames import InvalidFrame, decode_payload, iter_payloads
from api.eventlog.schema import EVENT_TYPES, SCHEMA_VERSION, SCHEMAS
from api.eventlog.segments import fsync_dir

log = logging.getLogger("flagsight.eventlog")

ROW_GROUP_ROWS = 128 * 1024
"""One row group for a normal segment; very busy segments get several of this size."""
COMPRESSION = "zstd"
_US_PER_DAY = 86_400 * 1_000_000
_EPOCH = dt.date(1970, 1, 1)
_TIME_COLUMN = 2  # evaluated_at / received_at, right after schema_version


def filesystem_for(location: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and base path for a URI (``s3://…``, ``file://…``) or local path."""
    if "://" in location:
        return pafs.FileSystem.from_uri(location)
    return pafs.LocalFileSystem(), str(Path(location).resolve())


@dataclass(frozen=True)
class SealedFile:
    event_type: str
    date: str
    path: str
    rows: int


class ParquetSink:
    """Publishes tables as whole files under an events location (local or remote)."""

    def __init__(self, location: str, *, row_group_rows: int = ROW_GROUP_ROWS):
        self.filesystem, self.base = filesystem_for(location)
        self.row_group_rows = row_group_rows
        self._local = isinstance(self.filesystem, pafs.LocalFileSystem)

    def publish(self, table: pa.Table, event_type: str, date: str, stem: str) -> str:
        """Write ``table`` to its final name atomically; durable on return for local disks."""
        directory = f"{self.base}/{event_type}/date={date}"
        final = f"{directory}/{stem}.parquet"
        temporary = f"{directory}/.{stem}.parquet.tmp"
        self.filesystem.create_dir(directory, recursive=True)
        pq.write_table(
            table,
            temporary,
            filesystem=self.filesystem,
            compression=COMPRESSION,
            row_group_size=self.row_group_rows,
        )
        if self._local:
            _fsync_file(temporary)
        self.filesystem.move(temporary, final)
        if self._local:
            # The rename and any new partition directories must outlive a machine crash
            # before the segment that could rebuild them is deleted.
            for path in (directory, f"{self.base}/{event_type}", self.base):
                fsync_dir(path)
        return final


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_ROW_TYPES = {event_type: pa.struct(list(SCHEMAS[event_type])[1:]) for event_type in EVENT_TYPES}
"""Each schema minus ``schema_version``: the fields of the event tuples, in order."""


CHUNK_EVENTS = 8192
"""Events converted to Arrow at a time: enough to amortize a conversion call over the
one-event frames of ordinary traffic, few enough that the Python objects die young (holding
a whole segment's events as tuples made the garbage collector dominate sealing, 4-8x)."""


def read_segment(
    path: Path, on_invalid: Callable[[InvalidFrame], None]
) -> dict[str, list[pa.StructArray]]:
    """Events of every complete, valid frame of a segment, by type, as Arrow chunks.

    A crc-valid frame that does not fit its schema was appended by a buggy caller; it is
    reported and skipped so one bad batch cannot block its segment (and every event in it)
    from ever being sealed.
    """
    chunks: dict[str, list[pa.StructArray]] = {event_type: [] for event_type in EVENT_TYPES}
    pending: dict[str, list] = {event_type: [] for event_type in EVENT_TYPES}

    def flush(event_type: str) -> None:
        if pending[event_type]:
            rows = pa.array(pending[event_type], type=_ROW_TYPES[event_type])
            chunks[event_type].append(rows)
            pending[event_type] = []

    with open(path, "rb") as stream:
        for payload in iter_payloads(stream):
            try:
                batch = decode_payload(payload)
            except InvalidFrame as exc:
                on_invalid(exc)
                continue
            pending[batch.event_type].extend(batch.events)
            if len(pending[batch.event_type]) >= CHUNK_EVENTS:
                flush(batch.event_type)
    for event_type in EVENT_TYPES:
        flush(event_type)
    return chunks


def build_table(event_type: str, chunks: list[pa.StructArray]) -> pa.Table:
    """Frame chunks as one contiguous table of exactly ``SCHEMAS[event_type]``."""
    rows = pa.chunked_array(chunks, type=_ROW_TYPES[event_type]).combine_chunks()
    version = pa.array(np.full(len(rows), SCHEMA_VERSION, dtype=np.int16))
    return pa.Table.from_arrays([version, *rows.flatten()], schema=SCHEMAS[event_type])


def split_by_date(table: pa.Table) -> list[tuple[str, pa.Table]]:
    """``(YYYY-MM-DD, rows of that UTC date)`` in date order, row order kept within a date."""
    days = table.column(_TIME_COLUMN).cast(pa.int64()).to_numpy() // _US_PER_DAY
    unique = np.unique(days)
    if len(unique) == 1:
        return [(_date_name(int(unique[0])), table)]
    return [(_date_name(int(day)), table.filter(pa.array(days == day))) for day in unique]


def _date_name(day: int) -> str:
    return (_EPOCH + dt.timedelta(days=day)).isoformat()


def seal_segment(
    path: Path,
    sink: ParquetSink,
    on_invalid: Callable[[InvalidFrame], None] | None = None,
) -> list[SealedFile]:
    """Write a segment's events as Parquet; the caller holds its flock and deletes it after.

    Safe to repeat: a second run over the same segment replaces each file with identical bytes.
    """
    stem = path.name.removesuffix(".wal")
    by_type = read_segment(path, on_invalid or _log_invalid)
    sealed = []
    for event_type, chunks in by_type.items():
        if not chunks:
            continue
        for date, table in split_by_date(build_table(event_type, chunks)):
            target = sink.publish(table, event_type, date, stem)
            sealed.append(SealedFile(event_type, date, target, table.num_rows))
    return sealed


def _log_invalid(exc: InvalidFrame) -> None:
    log.error("skipped an invalid event frame", extra={"event": "invalid_frame", "error": str(exc)})


def remove_segment(path: Path) -> None:
    """Delete a sealed segment (a vanished file was already removed: fine)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
