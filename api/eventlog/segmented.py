"""``SegmentedEventLog``: the production event log, one instance per worker process.

Hot path: an ``append_*`` call encodes its events as one frame and ``write``\\s it to this
process's active segment before returning. The page cache survives the process being killed,
so a returned call means the events will be sealed by someone, even if this worker dies.

Background threads (started in the worker, after fork):

* the syncer fsyncs the active segment every ``fsync_interval_s`` (the machine-crash bound);
* the sealing thread rotates the active segment once it has held events for
  ``ROTATE_FRACTION`` of ``seal_interval_s`` (or has grown past ``MAX_SEGMENT_BYTES``), and
  has a ``Sealer`` (``api.eventlog.sealer``) seal closed segments and orphans: segments left
  behind by killed processes, recognised by their free ``flock``.

The pieces: this class is the writer (segments, appends, rotation, fsync); the ``Sealer``
turns closed segments into files through a sink (``api.eventlog.sinks``: a folder or object
storage); the ``SealerLock`` (``api.eventlog.sealer_lock``) says whether a sealer process
does that for the whole server.

Hand-off: given ``sealer_lock``, while a sealer process (``api.server.sealer_process``)
holds that lock this log does not seal: it fsyncs each closed segment and closes it, which
makes it an orphan that the sealer seals within one of its ticks. Workers thus never load
pyarrow (tens of MB each, and a pandas import on the first conversion). If the sealer is
gone, the log seals in-process again, so no segment waits on a dead sealer.

Timing: an event waits at most ``ROTATE_FRACTION × seal_interval_s`` for rotation plus one
sealer tick (≤ ``TICK_FRACTION × seal_interval_s``); the remaining fifth of the interval is
left for writing the files, so the configured ``seal_interval_s`` is the bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from api.eventlog.failures import FailureReporter
from api.eventlog.frames import (
    EVALUATION_BATCH_CODE,
    LOCAL_REPORT_CODE,
    TYPE_CODES,
    encode_frame,
)
from api.eventlog.log import EventLogUnavailable
from api.eventlog.schema import (
    EVALUATION,
    EVENT_TYPES,
    FEEDBACK,
    TRACK,
    EvaluationBatch,
    EvaluationEvent,
    FeedbackEvent,
    LocalReport,
    TrackEvent,
)
from api.eventlog.sealer import RETRY_CAP_S, Backoff, Sealer, location_sink
from api.eventlog.sealer_lock import SealerLock
from api.eventlog.segments import Segment, SegmentNamer, create_segment, remove_segment
from api.observability.metrics import Metrics

if TYPE_CHECKING:
    from api.eventlog.sinks import Sink

ROTATE_FRACTION = 0.7
TICK_FRACTION = 0.1
MAX_TICK_S = 0.5
MAX_SEGMENT_BYTES = 32 * 1024 * 1024
"""Rotate early past this size: bounds the memory and time of sealing one segment."""

_NEW, _RUNNING, _CLOSED = "new", "running", "closed"


class SegmentedEventLog:
    """An ``EventLog`` backed by flocked write-ahead segments sealed into Parquet."""

    def __init__(
        self,
        wal_dir: Path,
        events_location: str,
        *,
        fsync_interval_s: float = 1.0,
        seal_interval_s: float = 10.0,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        sealer_lock: Path | None = None,
        sink: Callable[[], Sink] | None = None,
        retry_cap_s: float = RETRY_CAP_S,
    ):
        """``sink`` builds where sealed files go (default: a ``ParquetSink`` on
        ``events_location``); it is called on the first seal, so pyarrow loads only then."""
        if fsync_interval_s <= 0 or seal_interval_s <= 0:
            raise ValueError("fsync_interval_s and seal_interval_s must be positive")
        self.wal_dir = Path(wal_dir)
        self._failure = FailureReporter(metrics)
        self.sealer = Sealer(
            self.wal_dir,
            sink or location_sink(events_location),
            seal_interval_s=seal_interval_s,
            metrics=metrics,
            failures=self._failure,
            backoff=Backoff(cap_s=retry_cap_s),
        )
        self._sealer_lock = SealerLock(sealer_lock) if sealer_lock is not None else None
        self._fsync_interval_s = fsync_interval_s
        self._rotate_after_s = seal_interval_s * ROTATE_FRACTION
        self._tick_s = min(MAX_TICK_S, seal_interval_s * TICK_FRACTION)
        self._namer = SegmentNamer(clock)
        self._lock = threading.Lock()  # guards _state, _active, _ended and writes
        self._state = _NEW
        self._active: Segment | None = None
        self._ended: list[Segment] = []
        self._seal_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._logged = (
            {t: metrics.events_logged.labels(type=t) for t in EVENT_TYPES} if metrics else {}
        )
        self._unreported = dict.fromkeys(EVENT_TYPES, 0)
        """Appended events not yet added to ``events_logged``: a multi-process counter write
        per append would cost as much as the append itself (see ``flush_counts``)."""

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Open the first segment and start the syncer and sealer (which recovers orphans
        first). Call it in the worker process, after fork: locks and threads do not fork."""
        with self._lock:
            if self._state != _NEW:
                raise RuntimeError(f"event log cannot start when {self._state}")
            self._state = _RUNNING
        try:  # a disk that refuses writes must not stop the worker: evaluate still answers
            self.wal_dir.mkdir(parents=True, exist_ok=True)
            fresh = create_segment(self.wal_dir, self._namer)
        except OSError as exc:
            self._failure("event_log_open_failed", "cannot open a log segment", exc)
        else:
            with self._lock:
                self._active = fresh
        for name, target in (("syncer", self._sync_loop), ("sealer", self._seal_loop)):
            thread = threading.Thread(target=target, name=f"flagsight-eventlog-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        """Stop the threads, then fsync, seal and delete every segment this process wrote.

        A segment that cannot be sealed now (events location unreachable) stays in
        ``wal_dir``, fsynced, and is recovered by the next process to start.
        """
        with self._lock:
            if self._state == _CLOSED:
                return
            self._state = _CLOSED
            if self._active is not None:
                self._ended.append(self._active)
                self._active = None
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.flush_counts()
        self._seal_ended()

    # -- hot path --------------------------------------------------------------------------

    def append_evaluations(self, events: Sequence[EvaluationEvent]) -> None:
        """Return only once the events are in the log; else raise ``EventLogUnavailable``."""
        self._append(EVALUATION, events)

    def append_feedback(self, events: Sequence[FeedbackEvent]) -> None:
        """As ``append_evaluations``."""
        self._append(FEEDBACK, events)

    def append_track(self, events: Sequence[TrackEvent]) -> None:
        """As ``append_evaluations``, for tracked events."""
        self._append(TRACK, events)

    def append_evaluation_batch(self, batch: EvaluationBatch) -> None:
        """As ``append_evaluations``, for one flag's evaluations in columnar form."""
        if batch.user_identifiers:
            self._write(
                EVALUATION, encode_frame(EVALUATION_BATCH_CODE, batch), len(batch.user_identifiers)
            )

    def append_evaluation_frame(self, frame: bytearray, count: int) -> None:
        """As ``append_evaluations``, for ``count`` evaluations already in one frame."""
        self._write(EVALUATION, frame, count)

    def append_local_report(self, report: LocalReport) -> None:
        """As ``append_evaluations``, for the evaluations of one local report, as sent."""
        if report.rows:
            self._write(EVALUATION, encode_frame(LOCAL_REPORT_CODE, report), len(report.rows))

    def _append(self, event_type: str, events: Sequence[tuple]) -> None:
        if not events:
            return
        if not isinstance(events, (list, tuple)):
            events = list(events)
        self._write(event_type, encode_frame(TYPE_CODES[event_type], events), len(events))

    def _write(self, event_type: str, frame: bytearray, count: int) -> None:
        lock = self._lock
        lock.acquire()  # not ``with``: the context manager costs twice as much, every request
        try:
            if self._state != _RUNNING:
                raise EventLogUnavailable(f"event log is {self._state}")
            try:
                segment = self._active or self._open_active_locked()
                segment.append(frame)
                self._unreported[event_type] += count
                failure = None
            except OSError as exc:
                # Torn or not, this segment takes no more frames: nothing valid may follow a
                # torn one. The next append opens a fresh segment, so the log heals itself.
                self._end_active_locked()
                failure = exc
        finally:
            lock.release()
        if failure is not None:
            self._failure("event_log_write_failed", "event log append failed", failure)
            raise EventLogUnavailable(f"event log cannot take writes: {failure}") from failure

    def unready_reason(self) -> str | None:
        """Readiness asks here so that it agrees with feedback's 503. With no segment open
        (the last append or rotation failed: disk full, descriptors exhausted) it takes the
        step the next append would, opening one: a log that failed comes back as soon as it
        can, without waiting for traffic, and reports the error while it cannot."""
        with self._lock:
            if self._state != _RUNNING:
                return f"event log is {self._state}"
            if self._active is not None:
                return None
            try:
                self._open_active_locked()
            except OSError as exc:
                return f"cannot open a log segment: {exc}"
        return None

    def flush_counts(self) -> None:
        """Add the events appended since the last call to ``flagsight_events_logged_total``.

        The syncer calls it every fsync interval and ``/metrics`` before rendering, so the
        figure is current in this process and at most one interval behind in the others.
        """
        with self._lock:
            unreported = self._unreported
            self._unreported = dict.fromkeys(EVENT_TYPES, 0)
        for event_type, count in unreported.items():
            counter = self._logged.get(event_type)
            if counter is not None and count:
                counter.inc(count)

    def _open_active_locked(self) -> Segment:
        self._active = create_segment(self.wal_dir, self._namer)
        return self._active

    def _end_active_locked(self) -> None:
        if self._active is not None:
            self._ended.append(self._active)
            self._active = None

    # -- background work -------------------------------------------------------------------

    def _sync_loop(self) -> None:
        while not self._stop.wait(self._fsync_interval_s):
            self.sync()
            self.flush_counts()

    def sync(self) -> None:
        """fsync every segment holding unsynced frames (the syncer does this periodically)."""
        with self._lock:
            segments = [s for s in (self._active, *self._ended) if s is not None]
        for segment in segments:
            try:
                segment.sync()
            except OSError as exc:
                # After a failed fsync the kernel may have dropped the pages: stop trusting
                # this segment with new frames (they go to a fresh one).
                self._failure("event_log_fsync_failed", "event log fsync failed", exc)
                with self._lock:
                    if self._active is segment:
                        self._end_active_locked()

    def _seal_loop(self) -> None:
        self._guarded(self._recover_unless_handed_off)
        while not self._stop.wait(self._tick_s):
            self._guarded(self._rotate_if_due)
            self._guarded(self._seal_ended)
            self._guarded(self._recover_unless_handed_off)

    def _recover_unless_handed_off(self) -> None:
        if not self.sealer_alive():
            self.recover_orphans()

    def sealer_alive(self) -> bool:
        """Whether a sealer process holds ``sealer_lock`` (then this log hands segments off)."""
        return self._sealer_lock is not None and self._sealer_lock.held_elsewhere()

    def _guarded(self, step: Callable[[], object]) -> None:
        """The sealer must outlive any one failure: report it and go on with the next tick."""
        try:
            step()
        except Exception as exc:
            self._failure("event_log_sealer_failed", "event log background step failed", exc)

    def _rotate_if_due(self) -> None:
        with self._lock:
            active = self._active
            started = active.first_write_at if active is not None else None
            size = active.written if active is not None else 0
        due = started is not None and time.monotonic() - started >= self._rotate_after_s
        if active is None or due or size >= MAX_SEGMENT_BYTES:
            self.rotate()

    def rotate(self) -> None:
        """Switch appends to a fresh segment; the old one waits to be sealed.

        The new file is created outside the lock so appends never wait on file creation.
        """
        try:
            fresh = create_segment(self.wal_dir, self._namer)
        except OSError as exc:
            self._failure("event_log_open_failed", "cannot open a log segment", exc)
            return
        with self._lock:
            if self._state == _RUNNING:
                self._end_active_locked()
                self._active = fresh
                return
        fresh.close()
        remove_segment(fresh.path)

    def seal_now(self) -> None:
        """Rotate and seal what this process has appended so far (tests, tools, shutdown)."""
        self.rotate()
        self._seal_ended()

    def _seal_ended(self) -> None:
        with self._seal_lock:  # so seal_now returns only after a concurrent seal finished
            with self._lock:
                ended, self._ended = self._ended, []
            if ended and self.sealer_alive():
                for segment in ended:
                    self._hand_off(segment)
                return
            for segment in ended:
                self.sealer.seal_owned(segment)

    def _hand_off(self, segment: Segment) -> None:
        """fsync and close: the released flock makes the segment the sealer's to seal."""
        try:
            segment.sync()
        except OSError as exc:
            self._failure(
                "event_log_fsync_failed", "event log fsync failed", exc, segment=segment.path.name
            )
        finally:
            segment.close()

    def recover_orphans(self) -> None:
        """Seal and delete every segment no live process owns (see ``Sealer``)."""
        self.sealer.recover_orphans()
