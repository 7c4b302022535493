"""Sealing: turning one closed segment into Hive-partitioned Parquet files, idempotently.

A segment yields at most one file per (event type, UTC date), named after the segment::

    <events>/event_type=<type>/date=YYYY-MM-DD/<segment stem>.parquet

The bytes depend only on the segment's content (row order is frame order, fixed writer
options), so sealing a segment again after a crash rewrites identical files under the same
names: an event lands in exactly one file however often sealing is retried. How a file is
made visible whole (rename on disk, one PUT in object storage) is the sink's business
(``api.eventlog.sinks``).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from flagsight_core.ids import bulk_ids
from flagsight_core.model import ARM_CONTROL, ARM_TREATMENT, NOT_EVALUATED
from flagsight_core.registry import on_results_changed

from api.eventlog.frames import BATCHES, LOCAL, InvalidFrame, Run, iter_runs
from api.eventlog.schema import (
    EVALUATION,
    EVENT_TYPES,
    OUTCOMES,
    SCHEMA_VERSION,
    SCHEMAS,
    SOURCE_LOCAL,
    EvaluationBatch,
    LocalReport,
    LocalRow,
)
from api.eventlog.sinks import Sink

log = logging.getLogger("flagsight.eventlog")

_US_PER_DAY = 86_400 * 1_000_000
_EPOCH = dt.date(1970, 1, 1)
_SHARED_STRINGS = ("organization_id", "environment_id", "flag_key", "sdk", "api_key_id", "source")
"""The string columns an ``EvaluationBatch`` holds once for all its users, in its field order."""
_OUTCOME_FIELDS = ("value", "matched_rule_type", "error_type")
_USERS = EvaluationBatch._fields.index("user_identifiers")


@dataclass(frozen=True)
class SealedFile:
    event_type: str
    date: str
    path: str
    rows: int


_ROW_TYPES = {event_type: pa.struct(list(SCHEMAS[event_type])[1:]) for event_type in EVENT_TYPES}
"""Each schema minus ``schema_version``: the fields of the event tuples, in order."""
_STRING = pa.string()
_BATCH_TYPE = pa.struct(
    [
        ("evaluation_id_prefix", _STRING),
        ("evaluated_at", _ROW_TYPES[EVALUATION].field("evaluated_at").type),
        *(_ROW_TYPES[EVALUATION].field(name) for name in _SHARED_STRINGS),
        ("user_identifiers", pa.list_(_STRING)),
        ("outcomes", pa.binary()),
        ("rules", pa.binary()),
        ("split_rule", pa.int16()),
        ("split_percentage", pa.float64()),
    ]
)
"""The fields of an ``EvaluationBatch`` tuple, in order."""
_LOCAL_ROW_TYPE = pa.struct(
    [
        ("evaluation_id", _STRING),
        ("evaluated_at_ms", pa.int64()),
        *(_ROW_TYPES[EVALUATION].field(name) for name in LocalRow._fields[2:]),
    ]
)
_LOCAL_TYPE = pa.struct(
    [
        *(_ROW_TYPES[EVALUATION].field(name) for name in LocalReport._fields[:-1]),
        ("rows", pa.list_(_LOCAL_ROW_TYPE)),
    ]
)
"""The fields of a ``LocalReport`` tuple, in order, its rows' too."""
_EVALUATED_AT = _ROW_TYPES[EVALUATION].field("evaluated_at").type


CHUNK_EVENTS = 2048
"""Rows converted to Arrow at a time. A conversion costs ~60 µs whatever its size, so much
smaller chunks cost more per row; larger ones keep more decoded frames alive at once, which
are cheapest while CPython recycles their memory and before they reach the garbage
collector's older generations: chunks of 4096 rows or more sealed 5-15% slower (holding a
whole segment's events as Python objects made allocation and the collector dominate
sealing, 4-8x)."""

RUN_BYTES = 64 * 1024
"""Payload decoded at a time (``iter_runs``), for the same reason: its Python objects are a
few times its size, and larger runs were slower."""

Columns = list[pa.Array]
"""One chunk of an event type: its schema's columns after ``schema_version``, equal lengths."""


def read_segment(
    path: Path, on_invalid: Callable[[InvalidFrame], None]
) -> dict[str, list[Columns]]:
    """Events of every complete, valid frame of a segment, by type, as Arrow column chunks.

    A crc-valid frame that does not fit its schema was appended by a buggy caller; it is
    reported and skipped so one bad batch cannot block its segment (and every event in it)
    from ever being sealed. The segment is read whole: it is bounded (``MAX_SEGMENT_BYTES``)
    and smaller than the Arrow columns built from it.
    """
    converters = {event_type: _Converter(event_type) for event_type in EVENT_TYPES}
    with open(path, "rb") as stream:
        segment = stream.read()
    for run in iter_runs(segment, on_invalid, RUN_BYTES):
        converters[run.event_type].add(run)
    return {event_type: converter.finish() for event_type, converter in converters.items()}


class _Converter:
    """One event type's frames, turned into Arrow columns a chunk at a time.

    A batch (code 4) is never expanded into events: its shared fields are converted once and
    repeated by Arrow, so a 10,000-user batch costs little more than its user identifiers.
    Chunks keep frame order even where event lists (codes 1, 2, 6) and batches mix.
    """

    def __init__(self, event_type: str):
        self.event_type = event_type
        self.chunks: list[Columns] = []
        self._batches: list[tuple] = []
        self._batch_rows = 0
        self._events: list[tuple] = []
        self._inserts: list[tuple[int, int]] = []
        """(batch rows before it, rows) of each run of events, to restore frame order."""

    def add(self, run: Run) -> None:
        if run.form == LOCAL:  # a report's thousands of rows make a chunk of their own
            self._flush()
            if run.rows:
                self.chunks.append(_local_columns(run.items))
            return
        if run.form == BATCHES:
            self._batches += run.items
            self._batch_rows += run.rows
        else:
            self._inserts.append((self._batch_rows, run.rows))
            self._events += run.items
        if self._batch_rows + len(self._events) >= CHUNK_EVENTS:
            self._flush()

    def finish(self) -> list[Columns]:
        self._flush()
        return self.chunks

    def _flush(self) -> None:
        batches, events, inserts = self._batches, self._events, self._inserts
        if not self._batch_rows:  # none, or only batches of no users
            batches = []
        self._batches, self._batch_rows, self._events, self._inserts = [], 0, [], []
        if not batches and not events:
            return
        if not events:
            self.chunks.append(_batch_columns(batches))
        elif not batches:
            self.chunks.append(_event_columns(self.event_type, events))
        else:
            self.chunks.append(
                _merge(_batch_columns(batches), _event_columns(self.event_type, events), inserts)
            )


def _event_columns(event_type: str, events: list[tuple]) -> Columns:
    """Event tuples as one Arrow array per field.

    One struct conversion, then its children: it reads each tuple once, while converting
    transposed columns (``zip(*events)``) walks the chunk once per field (~1.7x slower).
    """
    return pa.array(events, type=_ROW_TYPES[event_type]).flatten()


def _batch_columns(batches: list[tuple]) -> Columns:
    """The evaluation columns of ``batches``' users, equal to those of their ``events()``.

    Per user only the identifier is converted; the outcome byte indexes ``OUTCOMES``' columns
    and the shared fields are converted once per batch and repeated with a ``take``.
    """
    (prefix, evaluated_at, *shared, users, outcomes, rules, split_rule, split_percentage) = (
        pa.array(batches, _BATCH_TYPE).flatten()
    )
    counts = np.diff(users.offsets.to_numpy())
    if (counts == 1).all():  # one user each, as in ordinary traffic
        evaluation_id = pc.binary_join_element_wise(prefix, bulk_ids("", 1)[0], "")
    else:
        owners = np.repeat(np.arange(len(batches)), counts)
        prefix, evaluated_at, split_rule, split_percentage, *shared = (
            column.take(owners)
            for column in (prefix, evaluated_at, split_rule, split_percentage, *shared)
        )
        evaluation_id = pc.binary_join_element_wise(prefix, _id_suffixes(counts), "")
    codes = _bytes_of(outcomes)
    columns = dict(zip(_SHARED_STRINGS, shared, strict=True))
    columns.update(_arm_columns(rules, counts, split_rule, split_percentage))
    columns.update(
        zip(_OUTCOME_FIELDS, (column.take(codes) for column in _outcome_columns()), strict=True)
    )
    columns.update(
        evaluation_id=evaluation_id, evaluated_at=evaluated_at, user_identifier=users.flatten()
    )
    return [columns[field.name] for field in _ROW_TYPES[EVALUATION]]


def _local_columns(reports: list[tuple]) -> Columns:
    """The evaluation columns of ``reports``' rows, equal to those of their ``events()``:
    the rows' fields are converted as they are, the shared ones once per report and repeated
    with a ``take``, the times scaled to microseconds and the percentage kept only with an
    arm, as arrays."""
    *shared, rows = pa.array(reports, _LOCAL_TYPE).flatten()
    owners = np.repeat(np.arange(len(reports)), np.diff(rows.offsets.to_numpy()))
    shared_names = LocalReport._fields[:-1]
    columns = {name: column.take(owners) for name, column in zip(shared_names, shared, strict=True)}
    row_columns = dict(zip(LocalRow._fields, rows.flatten().flatten(), strict=True))
    at_ms = row_columns.pop("evaluated_at_ms")
    columns.update(row_columns)
    columns["evaluated_at"] = pc.multiply(at_ms, 1000).cast(_EVALUATED_AT)
    columns["source"] = pa.repeat(pa.scalar(SOURCE_LOCAL, _STRING), len(at_ms))
    columns["rollout_percentage"] = pc.if_else(
        columns["arm"].is_valid(), columns["rollout_percentage"], pa.scalar(None, pa.float64())
    )
    return [columns[field.name] for field in _ROW_TYPES[EVALUATION]]


def _arm_columns(
    rules: pa.BinaryArray, counts: np.ndarray, split_rule: pa.Array, split_percentage: pa.Array
) -> dict[str, pa.Array]:
    """``rule_index``, ``arm`` and ``rollout_percentage`` per user (``schema.arm_of``, over
    arrays). A version-1 batch has no rule bytes: its users' arms are unknown (NULL)."""
    rule = _bytes_of(rules).astype(np.int16)
    known = np.ones(len(split_rule), dtype=bool)
    if len(rule) != len(split_rule):  # some batches of version 1 (read from an old log)
        lengths = pc.binary_length(rules).to_numpy(zero_copy_only=False)
        has_rules = np.repeat(lengths > 0, counts)
        rule = np.full(len(split_rule), NOT_EVALUATED, dtype=np.int16)
        rule[has_rules] = _bytes_of(rules)
        known = has_rules
    split = split_rule.to_numpy(zero_copy_only=False).astype(np.int16)
    decided = known & (rule < NOT_EVALUATED)
    in_arm = known & (split >= 0) & (rule != NOT_EVALUATED) & (rule >= split)
    treatment = in_arm & (rule == split)
    arm = pa.DictionaryArray.from_arrays(
        pa.array(np.where(treatment, 0, 1).astype(np.int8)), _ARMS
    ).dictionary_decode()
    return {
        "rule_index": pa.array(rule, mask=~decided),
        "arm": pc.if_else(pa.array(in_arm), arm, pa.scalar(None, _STRING)),
        "rollout_percentage": pc.if_else(
            pa.array(in_arm), split_percentage, pa.scalar(None, pa.float64())
        ),
    }


_ARMS = pa.array([ARM_TREATMENT, ARM_CONTROL], type=_STRING)


@functools.cache
def _outcome_columns() -> tuple[pa.Array, ...]:
    """The outcome fields of each outcome code: a batch's outcome bytes index these. Built on
    first use, as a conversion imports pandas (~1 s of CPU) and importing this module
    should not."""
    return tuple(
        pa.array(column, type=_ROW_TYPES[EVALUATION].field(name).type)
        for column, name in zip(zip(*OUTCOMES, strict=True), _OUTCOME_FIELDS, strict=True)
    )


on_results_changed(_outcome_columns.cache_clear)  # built again when rule types are registered


def _bytes_of(values: pa.BinaryArray) -> np.ndarray:
    """The concatenated bytes of a binary array (a batch's outcome codes, one per user)."""
    _, offsets, data = values.buffers()
    bounds = np.frombuffer(offsets, np.int32, count=len(values) + 1, offset=4 * values.offset)
    first, last = int(bounds[0]), int(bounds[-1])
    if first == last:
        return np.zeros(0, dtype=np.uint8)
    return np.frombuffer(data, np.uint8, count=last - first, offset=first)


def _id_suffixes(counts: np.ndarray) -> pa.Array:
    """What ``bulk_ids`` appends to each user's prefix: the user's index in its batch."""
    starts = np.cumsum(counts) - counts
    indices = np.arange(counts.sum()) - np.repeat(starts, counts)
    most = max(int(counts.max()), 1 << 16)  # a table per power of two: 65536 in practice
    return _suffix_table(1 << (most - 1).bit_length()).take(indices)


@functools.cache
def _suffix_table(size: int) -> pa.Array:
    """``bulk_ids("", size)``, built once: ids of a batch's users are its prefix and these."""
    return pa.array(bulk_ids("", size), type=_STRING)


def _merge(
    batch_columns: Columns, event_columns: Columns, inserts: list[tuple[int, int]]
) -> Columns:
    """Batch rows and event rows of one chunk back in frame order.

    ``inserts`` holds, for each run of event rows in order, the batch rows that preceded it
    and its own rows. Rare (evaluations are appended as batches), so a ``take`` per column.
    """
    before, sizes = (np.array(column, dtype=np.int64) for column in zip(*inserts, strict=True))
    batch_rows, event_rows = len(batch_columns[0]), len(event_columns[0])
    ends = np.concatenate(([0], np.cumsum(sizes)))
    order = np.empty(batch_rows + event_rows, dtype=np.int64)
    batch_index = np.arange(batch_rows)
    events_before = ends[np.searchsorted(before, batch_index, side="right")]
    order[batch_index + events_before] = batch_index
    order[np.repeat(before, sizes) + np.arange(event_rows)] = batch_rows + np.arange(event_rows)
    return [
        pa.concat_arrays([batches, events]).take(order)
        for batches, events in zip(batch_columns, event_columns, strict=True)
    ]


def build_table(event_type: str, chunks: list[Columns]) -> pa.Table:
    """Column chunks as one contiguous table of exactly ``SCHEMAS[event_type]``."""
    columns = [pa.concat_arrays(parts) for parts in zip(*chunks, strict=True)]
    version = pa.array(np.full(len(columns[0]), SCHEMA_VERSION, dtype=np.int16))
    return pa.Table.from_arrays([version, *columns], schema=SCHEMAS[event_type])


def split_by_date(table: pa.Table) -> list[tuple[str, pa.Table]]:
    """``(YYYY-MM-DD, rows of that UTC date)`` in date order, row order kept within a date.

    The date is that of the schema's first time column: ``evaluated_at``, ``received_at``
    (feedback) or ``occurred_at`` (tracked events)."""
    days = table.column(_time_column(table.schema)).cast(pa.int64()).to_numpy() // _US_PER_DAY
    unique = np.unique(days)
    if len(unique) == 1:
        return [(_date_name(int(unique[0])), table)]
    return [(_date_name(int(day)), table.filter(pa.array(days == day))) for day in unique]


def _time_column(schema: pa.Schema) -> int:
    """The index of the first timestamp column of ``schema``."""
    return next(i for i, field in enumerate(schema) if pa.types.is_timestamp(field.type))


def _date_name(day: int) -> str:
    return (_EPOCH + dt.timedelta(days=day)).isoformat()


def seal_segment(
    path: Path,
    sink: Sink,
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
