"""Segment files: the per-process write-ahead files in ``wal_dir`` and who owns them.

Ownership is an exclusive ``flock`` held for the segment's whole life, so a segment whose lock
can be taken is not being written by any live process: it is an orphan, safe to seal. The
kernel drops the lock when its holder dies, however it dies.

A segment is created under a pending name (``.<stem>.wal.new``, which orphan scans ignore),
locked, and only then renamed to ``<stem>.wal``; otherwise a scanner could lock, seal and
delete the fresh empty file in the instant between its creation and its owner's lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

SUFFIX = ".wal"
PENDING_SUFFIX = ".wal.new"
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
_CREATE_ATTEMPTS = 5


class ShortWrite(OSError):
    """``write`` stored only part of a frame (disk full mid-write): the segment is torn."""


class Segment:
    """An open segment this process owns (holds the flock on) and appends frames to.

    Appends are serialized by the event log's lock; ``sync`` and ``close`` take the segment's
    own lock so the fsync thread never touches a descriptor that was closed (or reused).
    """

    def __init__(self, path: Path, fd: int):
        self.path = path
        self.fd = fd
        self.written = 0
        self.first_write_at: float | None = None
        self._synced = 0
        self._closed = False
        self._io_lock = threading.Lock()

    @property
    def stem(self) -> str:
        return self.path.name.removesuffix(SUFFIX)

    def append(self, frame: bytes | bytearray) -> None:
        """One ``write`` of a whole frame; O_APPEND puts it at the end even after a fork."""
        n = os.write(self.fd, frame)
        self.written += n
        if self.first_write_at is None:
            self.first_write_at = time.monotonic()
        if n != len(frame):
            raise ShortWrite(f"wrote {n} of {len(frame)} bytes to {self.path.name}")

    def sync(self) -> None:
        """fsync what was written since the last sync; a no-op once closed."""
        with self._io_lock:
            written = self.written
            if self._closed or written == self._synced:
                return
            os.fsync(self.fd)
            self._synced = written

    def close(self) -> None:
        """Close the descriptor, which releases the flock: from now on it is an orphan."""
        with self._io_lock:
            if not self._closed:
                self._closed = True
                os.close(self.fd)


class SegmentNamer:
    """``<host>-<pid>-<start ns>-<seq>``: unique across hosts sharing a lake, restarts and pids."""

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self._host = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:64] or "host"
        self._start_ns = int(clock() * 1e9)
        self._seq = 0
        self._lock = threading.Lock()

    def next_stem(self) -> str:
        with self._lock:
            self._seq += 1
            return f"{self._host}-{os.getpid()}-{self._start_ns}-{self._seq:06d}"


def create_segment(wal_dir: Path, namer: SegmentNamer) -> Segment:
    """A new, empty, locked segment file whose directory entry is durable."""
    for attempt in range(_CREATE_ATTEMPTS):
        stem = namer.next_stem()
        pending = wal_dir / f".{stem}{PENDING_SUFFIX}"
        fd = os.open(pending, _CREATE_FLAGS, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            final = wal_dir / f"{stem}{SUFFIX}"
            os.rename(pending, final)
        except (BlockingIOError, FileNotFoundError):
            # A scanner cleaned up the pending file before we locked it: take another name.
            os.close(fd)
            if attempt == _CREATE_ATTEMPTS - 1:
                raise
            continue
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(pending)
            raise
        try:
            fsync_dir(wal_dir)
        except OSError:
            os.close(fd)
            raise
        return Segment(final, fd)
    raise AssertionError("unreachable")


def orphan_paths(wal_dir: Path) -> Iterator[Path]:
    """Closed-looking segment files, oldest name first (the lock decides if they are orphans)."""
    try:
        names = sorted(os.listdir(wal_dir))
    except FileNotFoundError:
        return
    for name in names:
        if name.endswith(SUFFIX) and not name.startswith("."):
            yield wal_dir / name


def claim(path: Path) -> int | None:
    """A read descriptor holding ``path``'s flock, or None if someone owns it or it is gone.

    A segment deleted between our ``open`` and our ``flock`` (its owner sealed it) shows as
    a link count of zero: it must not be sealed again.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_nlink == 0:
            raise FileNotFoundError(path)
    except (BlockingIOError, FileNotFoundError):
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def remove_abandoned_pending(wal_dir: Path) -> None:
    """Delete pending files whose creator died before renaming them (they hold no frames)."""
    try:
        names = os.listdir(wal_dir)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(".") and name.endswith(PENDING_SUFFIX):
            fd = claim(wal_dir / name)
            if fd is not None:
                try:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(wal_dir / name)
                finally:
                    os.close(fd)


def fsync_dir(path: Path | str) -> None:
    """Make renames and new entries in a directory survive a machine crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_segment(path: Path) -> None:
    """Delete a segment (a vanished file was already removed: fine)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
