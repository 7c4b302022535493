"""``SegmentedEventLog``: the production event log, one instance per worker process.

Hot path: an ``append_*`` call encodes its events as one frame and ``write``\\s it to this
process's active segment before returning. The page cache survives the process being killed,
so a returned call means the events will be sealed by someone, even if this worker dies.

Background threads (started in the worker, after fork):

* the syncer fsyncs the active segment every ``fsync_interval_s`` (the machine-crash bound);
* the sealer rotates the active segment once it has held events for ``ROTATE_FRACTION`` of
  ``seal_interval_s`` (or has grown past ``MAX_SEGMENT_BYTES``), seals closed segments into Parquet and deletes them, and seals orphans:
  segments left behind by killed processes, recognised by their free ``flock``.

Hand-off: given ``sealer_lock``, while a sealer process (``api.eventlog.sealer_process``)
holds that file's ``flock`` this log does not seal: it fsyncs each closed segment and closes
it, which makes it an orphan that the sealer seals within one of its ticks. Workers thus never
load pyarrow (tens of MB each, and a pandas import on the first conversion). If the sealer is
gone, the log seals in-process again, so no segment waits on a dead sealer.

Timing: an event waits at most ``ROTATE_FRACTION × seal_interval_s`` for rotation plus one
sealer tick (≤ ``TICK_FRACTION × seal_interval_s``); the remaining fifth of the interval is
left for writing the files, so the configured ``seal_interval_s`` is the bound.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from api.eventlog.frames import EVALUATION_BATCH_CODE, TYPE_CODES, InvalidFrame, encode_frame
from api.eventlog.log import EventLogUnavailable
from api.eventlog.schema import (
    EVALUATION,
    EVENT_TYPES,
    FEEDBACK,
    EvaluationBatch,
    EvaluationEvent,
    FeedbackEvent,
)
from api.eventlog.segments import (
    Segment,
    SegmentNamer,
    claim,
    create_segment,
    orphan_paths,
    remove_abandoned_pending,
)
from api.observability.metrics import Metrics

if TYPE_CHECKING:
    from api.eventlog.sealing import ParquetSink, SealedFile

log = logging.getLogger("flagsight.eventlog")

ROTATE_FRACTION = 0.7
TICK_FRACTION = 0.1
MAX_TICK_S = 0.5
MAX_SEGMENT_BYTES = 32 * 1024 * 1024
"""Rotate early past this size: bounds the memory and time of sealing one segment."""
WARNING_INTERVAL_S = 10.0
"""At most one warning per kind per this many seconds: a full disk must not flood the logs."""

_NEW, _RUNNING, _CLOSED = "new", "running", "closed"


class _Throttled:
    """Logs the first failure of a kind, then at most one per interval with a count."""

    def __init__(self, interval_s: float):
        self._interval_s = interval_s
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()

    def warning(self, kind: str, message: str, exc: BaseException, **fields: object) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(kind, -self._interval_s) < self._interval_s:
                self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
                return
            self._last[kind] = now
            suppressed = self._suppressed.pop(kind, 0)
        extra = {
            "event": kind,
            "error": str(exc),
            "error_type": type(exc).__name__,
            "errno": getattr(exc, "errno", None),
            "suppressed": suppressed,
            **fields,
        }
        log.warning(message, extra=extra)


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
    ):
        if fsync_interval_s <= 0 or seal_interval_s <= 0:
            raise ValueError("fsync_interval_s and seal_interval_s must be positive")
        self.wal_dir = Path(wal_dir)
        self._events_location = events_location
        self._sink: ParquetSink | None = None
        self._sealer_lock = sealer_lock
        self._fsync_interval_s = fsync_interval_s
        self._seal_interval_s = seal_interval_s
        self._rotate_after_s = seal_interval_s * ROTATE_FRACTION
        self._tick_s = min(MAX_TICK_S, seal_interval_s * TICK_FRACTION)
        self._metrics = metrics
        self._namer = SegmentNamer(clock)
        self._lock = threading.Lock()  # guards _state, _active, _ended and writes
        self._state = _NEW
        self._active: Segment | None = None
        self._ended: list[Segment] = []
        self._seal_lock = threading.Lock()
        self._retry_after: dict[Path, float] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._throttle = _Throttled(WARNING_INTERVAL_S)
        self._logged = (
            {t: metrics.events_logged.labels(type=t) for t in EVENT_TYPES} if metrics else {}
        )
        self._unreported = dict.fromkeys(EVENT_TYPES, 0)
        """Appended events not yet added to ``events_logged``: a multi-process counter write
        per append would cost as much as the append itself (see ``flush_counts``)."""

    @property
    def sink(self) -> ParquetSink:
        """Where sealed files go; built (and pyarrow imported) on first use."""
        if self._sink is None:
            from api.eventlog.sealing import ParquetSink

            self._sink = ParquetSink(self._events_location)
        return self._sink

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

    def append_evaluation_batch(self, batch: EvaluationBatch) -> None:
        """As ``append_evaluations``, for one flag's evaluations in columnar form."""
        if batch.user_identifiers:
            self._write(
                EVALUATION, encode_frame(EVALUATION_BATCH_CODE, batch), len(batch.user_identifiers)
            )

    def _append(self, event_type: str, events: Sequence[tuple]) -> None:
        if not events:
            return
        if not isinstance(events, (list, tuple)):
            events = list(events)
        self._write(event_type, encode_frame(TYPE_CODES[event_type], events), len(events))

    def _write(self, event_type: str, frame: bytearray, count: int) -> None:
        with self._lock:
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
        if failure is not None:
            self._failure("event_log_write_failed", "event log append failed", failure)
            raise EventLogUnavailable(f"event log cannot take writes: {failure}") from failure

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
        if self._sealer_lock is None:
            return False
        try:
            fd = os.open(self._sealer_lock, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # also drops the shared lock if we got it
        return False

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
        _remove(fresh.path)

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
                self._seal_own(segment)

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

    def _seal_own(self, segment: Segment) -> None:
        try:
            segment.sync()
            if segment.written:
                self._publish(_seal(segment.path, self.sink, self._invalid_frame))
            _remove(segment.path)
        except Exception as exc:
            self._failure(
                "event_log_seal_failed", "cannot seal a log segment", exc, segment=segment.path.name
            )
            self._retry_after[segment.path] = time.monotonic() + self._seal_interval_s
        finally:
            segment.close()  # releases the flock: an unsealed segment is now an orphan

    def recover_orphans(self) -> None:
        """Seal and delete every segment no live process owns (killed writers, failed seals).

        Concurrent recoverers are safe: only the holder of a segment's flock seals it, and a
        segment deleted meanwhile is recognised and skipped.
        """
        remove_abandoned_pending(self.wal_dir)
        now = time.monotonic()
        for path in orphan_paths(self.wal_dir):
            if self._retry_after.get(path, 0.0) > now:
                continue
            fd = claim(path)
            if fd is None:
                continue
            try:
                os.fsync(fd)
                self._publish(_seal(path, self.sink, self._invalid_frame))
                _remove(path)
                self._retry_after.pop(path, None)
            except Exception as exc:
                self._failure(
                    "event_log_seal_failed", "cannot seal an orphan segment", exc, segment=path.name
                )
                self._retry_after[path] = now + self._seal_interval_s
            finally:
                os.close(fd)

    # -- reporting -------------------------------------------------------------------------

    def _publish(self, sealed: list[SealedFile]) -> None:
        if self._metrics is not None:
            for item in sealed:
                self._metrics.files_sealed.labels(type=item.event_type).inc()

    def _invalid_frame(self, exc: InvalidFrame) -> None:
        self._failure("event_log_invalid_frame", "skipped an event frame that fits no schema", exc)

    def _failure(self, kind: str, message: str, exc: BaseException, **fields: object) -> None:
        if self._metrics is not None:
            self._metrics.event_log_errors.inc()
        self._throttle.warning(kind, message, exc, **fields)


def _seal(path: Path, sink: ParquetSink, on_invalid: Callable[[InvalidFrame], None]) -> list:
    from api.eventlog.sealing import seal_segment  # pyarrow, only where sealing happens

    return seal_segment(path, sink, on_invalid)


def _remove(path: Path) -> None:
    """Delete a sealed segment (a vanished file was already removed: fine)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
