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
import mmap
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

SUFFIX = ".wal"
PENDING_SUFFIX = ".wal.new"
_CREATE_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
_CREATE_ATTEMPTS = 5


ROOM_STEP = 128 * 1024
"""The file is extended this much at a time (more for a larger frame): a few hundred frames
per step, while an idle segment holds no more disk than one step."""


class Segment:
    """An open segment this process owns (holds the flock on) and appends frames to.

    Frames are copied into a shared mapping of the file: the page cache holds them as soon as
    the copy returns, exactly as it would after a ``write``, so a frame survives this process
    being killed; and a single evaluate's append costs a copy instead of a system call.

    The mapping never runs past room the disk has given: the file is extended with
    ``posix_fallocate`` (``ROOM_STEP`` at a time) before a frame is copied beyond its end, so
    a full disk refuses the extension with ``ENOSPC`` and the frame is never half-stored; a
    store into a hole (``ftruncate``) would instead kill the process with ``SIGBUS``. Bytes
    between the last frame and the end of the room are zeros, which no frame begins with, so
    readers stop there as at the end of the file; ``close`` trims them.

    Appends are serialized by the event log's lock; ``sync`` and ``close`` take the segment's
    own lock so the fsync thread never touches a descriptor that was closed (or reused).
    ``fsync`` writes back pages dirtied through the mapping as it does written ones.
    """

    def __init__(self, path: Path, fd: int):
        self.path = path
        self.fd = fd
        self.written = 0
        self.first_write_at: float | None = None
        self._room = 0
        self._map: mmap.mmap | None = None
        self._synced = 0
        self._closed = False
        self._io_lock = threading.Lock()

    @property
    def stem(self) -> str:
        return self.path.name.removesuffix(SUFFIX)

    def append(self, frame: bytes | bytearray) -> None:
        """Copy a whole frame after the last one; ``OSError`` if the disk has no room for it."""
        start = self.written
        end = start + len(frame)
        if end > self._room:
            self._extend(end)
        self._map[start:end] = frame  # type: ignore[index]
        self.written = end
        if self.first_write_at is None:
            self.first_write_at = time.monotonic()

    def _extend(self, needed: int) -> None:
        """Room for ``needed`` bytes: blocks reserved first, then the mapping grown over them."""
        room = max(needed, self._room + ROOM_STEP)
        os.posix_fallocate(self.fd, self._room, room - self._room)
        if self._map is None:
            self._map = mmap.mmap(self.fd, room)
        else:
            self._map.resize(room)
        self._room = room

    def sync(self) -> None:
        """fsync what was written since the last sync; a no-op once closed."""
        with self._io_lock:
            written = self.written
            if self._closed or written == self._synced:
                return
            os.fsync(self.fd)
            self._synced = written

    def close(self) -> None:
        """Trim the unused room, unmap and close, which releases the flock: from now on it is
        an orphan. A failed trim leaves zeros at the end, which readers stop at."""
        with self._io_lock:
            if self._closed:
                return
            self._closed = True
            if self._map is not None:
                self._map.close()
            if self._room > self.written:
                with contextlib.suppress(OSError):
                    os.ftruncate(self.fd, self.written)
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
