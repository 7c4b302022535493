"""The sealer: turns closed write-ahead segments into published files, then deletes them.

It seals two kinds of segment: one that its own process wrote and has just closed
(``seal_owned``), and orphans, closed segments that no live process owns (``recover_orphans``:
killed writers, hand-offs to a sealer process, earlier failures). A segment is deleted only
after every one of its files was published; until then it stays in ``wal/`` and the events it
holds are safe.

When the object store refuses a file (``LakeUnavailable``: unreachable, timed out, denied),
the sealer backs off: it stops trying any segment until the delay has passed, doubling it from
``RETRY_BASE_S`` up to ``Settings.seal_retry_cap_s`` (with jitter, so that hosts do not retry in step). The
segments wait in ``wal/`` meanwhile; the writer keeps appending to fresh ones. Operators see
it in ``flagsight_event_lake_unreachable``, ``flagsight_event_seal_failures_total`` and the
``flagsight_event_log_backlog_*`` gauges, and in the ``event_lake_unreachable`` /
``event_lake_reachable`` log lines. Any other failure (a local disk, a bug) retries that one
segment after ``seal_interval_s``, as before.

pyarrow is imported only when a segment is actually sealed: workers that hand off to a
sealer process never load it.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from api.eventlog.failures import FailureReporter
from api.eventlog.frames import InvalidFrame
from api.eventlog.segments import (
    Segment,
    claim,
    orphan_paths,
    remove_abandoned_pending,
    remove_segment,
)
from api.infra.objectstore import LakeUnavailable
from api.observability.metrics import Metrics

if TYPE_CHECKING:
    from api.eventlog.sealing import SealedFile
    from api.eventlog.sinks import Sink

log = logging.getLogger("flagsight.eventlog")

RETRY_BASE_S = 1.0
RETRY_CAP_S = 30.0
"""Longest wait between two attempts while the store is down (``FLAGSIGHT_SEAL_RETRY_CAP``):
once it is back, sealing resumes within this (plus one tick)."""


class Backoff:
    """Exponential backoff with jitter after consecutive failures; ``ready`` when to retry."""

    def __init__(
        self,
        base_s: float = RETRY_BASE_S,
        cap_s: float = RETRY_CAP_S,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ):
        self.base_s, self.cap_s = base_s, cap_s
        self._clock, self._jitter = clock, jitter
        self.failures = 0
        self._next = 0.0

    def ready(self) -> bool:
        return self._clock() >= self._next

    def failed(self) -> float:
        """Record a failure; the delay before the next attempt."""
        self.failures += 1
        delay = min(self.cap_s, self.base_s * 2 ** (self.failures - 1))
        delay *= 0.8 + 0.4 * self._jitter()
        self._next = self._clock() + delay
        return delay

    def succeeded(self) -> int:
        """Record a success; how many failures in a row it ends."""
        failures, self.failures, self._next = self.failures, 0, 0.0
        return failures


@dataclass(frozen=True)
class Backlog:
    """Segment files waiting in ``wal/`` (active ones included), as last counted. The age is
    that of the oldest segment holding an event: an idle worker's empty active segment has
    nothing waiting, however old it is."""

    segments: int
    bytes: int
    oldest_age_s: float


def backlog(wal_dir: Path, now: float | None = None) -> Backlog:
    now = time.time() if now is None else now
    count, size, oldest = 0, 0, now
    for path in orphan_paths(wal_dir):
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        count, size = count + 1, size + stat.st_size
        if stat.st_size:
            oldest = min(oldest, stat.st_mtime)
    return Backlog(count, size, max(0.0, now - oldest))


def location_sink(location: str) -> Callable[[], Sink]:
    """A ``ParquetSink`` on ``location`` (a folder, or a URI pyarrow resolves by itself)."""

    def make() -> Sink:
        from api.eventlog.sinks import ParquetSink

        return ParquetSink(location)

    return make


class Sealer:
    """Seals segments of ``wal_dir`` into ``sink``; see the module docstring."""

    def __init__(
        self,
        wal_dir: Path,
        sink: Callable[[], Sink],
        *,
        seal_interval_s: float = 10.0,
        metrics: Metrics | None = None,
        failures: FailureReporter | None = None,
        backoff: Backoff | None = None,
    ):
        self.wal_dir = Path(wal_dir)
        self._make_sink = sink
        self._sink: Sink | None = None
        self._seal_interval_s = seal_interval_s
        self._metrics = metrics
        self._failure = failures or FailureReporter(metrics)
        self.backoff = backoff or Backoff()
        self._retry_after: dict[Path, float] = {}
        self._lock = threading.Lock()  # one pass at a time per process

    @property
    def sink(self) -> Sink:
        if self._sink is None:
            self._sink = self._make_sink()
        return self._sink

    def seal_owned(self, segment: Segment) -> None:
        """Seal and delete a segment this process wrote and closed; on failure (or while the
        store is backed off) close it, so that it waits in ``wal/`` as an orphan."""
        try:
            segment.sync()
            if not segment.written:
                remove_segment(segment.path)
            elif self.backoff.ready():
                self._seal_path(segment.path)
        except Exception as exc:
            self._failed(segment.path, exc, "cannot seal a log segment")
        finally:
            segment.close()  # releases the flock: an unsealed segment is now an orphan

    def recover_orphans(self) -> None:
        """Seal and delete every segment no live process owns (killed writers, hand-offs,
        failed seals), oldest first; then report the backlog.

        Concurrent recoverers are safe: only the holder of a segment's flock seals it, and a
        segment deleted meanwhile is recognised and skipped.
        """
        with self._lock:
            remove_abandoned_pending(self.wal_dir)
            now = time.monotonic()
            for path in orphan_paths(self.wal_dir):
                if not self.backoff.ready():
                    break
                if self._retry_after.get(path, 0.0) > now:
                    continue
                self._recover(path)
            self._report_backlog()

    def _recover(self, path: Path) -> None:
        fd = claim(path)
        if fd is None:
            return
        try:
            os.fsync(fd)
            self._seal_path(path)
        except Exception as exc:
            self._failed(path, exc, "cannot seal an orphan segment")
        finally:
            os.close(fd)

    def _seal_path(self, path: Path) -> None:
        """Publish every file of the segment, then delete it (never before)."""
        from api.eventlog.sealing import seal_segment  # pyarrow, only where sealing happens

        sealed = seal_segment(path, self.sink, self._invalid_frame)
        remove_segment(path)
        self._retry_after.pop(path, None)
        self._published(sealed)
        ended = self.backoff.succeeded()
        if ended:
            log.info(
                "event lake reachable again; sealing resumed",
                extra={"event": "event_lake_reachable", "failed_attempts": ended},
            )
            self._set_unreachable(0)

    def _failed(self, path: Path, exc: Exception, message: str) -> None:
        if isinstance(exc, LakeUnavailable):
            delay = self.backoff.failed()
            self._count_failure("store_unavailable")
            self._set_unreachable(1)
            self._failure(
                "event_lake_unreachable",
                "event lake unreachable; events wait in the write-ahead log",
                exc,
                segment=path.name,
                retry_in_s=round(delay, 2),
                failed_attempts=self.backoff.failures,
            )
            return
        self._count_failure("error")
        self._failure("event_log_seal_failed", message, exc, segment=path.name)
        self._retry_after[path] = time.monotonic() + self._seal_interval_s

    # -- reporting -------------------------------------------------------------------------

    def _published(self, sealed: list[SealedFile]) -> None:
        if self._metrics is not None:
            for item in sealed:
                self._metrics.files_sealed.labels(type=item.event_type).inc()

    def _count_failure(self, reason: str) -> None:
        if self._metrics is not None:
            self._metrics.seal_failures.labels(reason=reason).inc()

    def _set_unreachable(self, value: int) -> None:
        if self._metrics is not None:
            self._metrics.lake_unreachable.set(value)

    def _report_backlog(self) -> None:
        if self._metrics is None:
            return
        waiting = backlog(self.wal_dir)
        self._metrics.backlog_segments.set(waiting.segments)
        self._metrics.backlog_bytes.set(waiting.bytes)
        self._metrics.backlog_age.set(waiting.oldest_age_s)

    def _invalid_frame(self, exc: InvalidFrame) -> None:
        self._failure("event_log_invalid_frame", "skipped an event frame that fits no schema", exc)
