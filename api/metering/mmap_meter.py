"""An exact, cross-process meter in a memory-mapped file.

Every gunicorn worker maps the same file (``$FLAGSIGHT_DATA_DIR/run/meter.bin``); a
consume is a read-modify-write of one slot under an exclusive ``lockf`` lock (plus a thread
lock, since POSIX record locks do not exclude threads of one process). The mapping is the
counter itself, so it survives any worker or master being killed; ``flush`` bounds what a
machine crash can lose.

Layout: a 64-byte header (magic, capacity) then ``capacity`` slots of 32 bytes:
organization digest (16 bytes), month ``YYYYMM`` (int32), padding, count (int64).
Slots are found by linear probing and never move, so each process caches their offsets.
"""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import struct
import threading
from pathlib import Path

MAGIC = b"FSMETER1"
_HEADER = struct.Struct("<8sI")
_HEADER_SIZE = 64
_SLOT = struct.Struct("<16siiq")
_SLOT_SIZE = 32
_COUNT = struct.Struct("<q")
_COUNT_OFFSET = 24
DEFAULT_CAPACITY = 1 << 16


class MeterFull(RuntimeError):
    """Every slot is taken: more (organization, month) pairs than the file was sized for."""


class MmapMeter:
    """``Meter`` for one machine: exact across processes and threads, no server needed."""

    def __init__(self, path: Path, capacity: int = DEFAULT_CAPACITY):
        if capacity & (capacity - 1):
            raise ValueError("capacity must be a power of two")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._thread_lock = threading.Lock()
        self._offsets: dict[tuple[str, int], int] = {}
        with self._locked():
            self._capacity = self._initialise(capacity)
        self._map = mmap.mmap(self._fd, _HEADER_SIZE + self._capacity * _SLOT_SIZE)

    def _initialise(self, capacity: int) -> int:
        header = os.pread(self._fd, _HEADER.size, 0)
        if len(header) == _HEADER.size and header.startswith(MAGIC):
            return _HEADER.unpack(header)[1]
        os.ftruncate(self._fd, _HEADER_SIZE + capacity * _SLOT_SIZE)
        os.pwrite(self._fd, _HEADER.pack(MAGIC, capacity), 0)
        return capacity

    def _locked(self) -> _FileLock:
        return _FileLock(self._fd, self._thread_lock)

    def _slot(self, organization_id: str, month: int, create: bool) -> int | None:
        """The slot offset for this pair; caller holds the lock when ``create``."""
        cached = self._offsets.get((organization_id, month))
        if cached is not None:
            return cached
        digest = hashlib.blake2b(organization_id.encode(), digest_size=16).digest()
        mask = self._capacity - 1
        index = (int.from_bytes(digest[:8], "little") ^ month) & mask
        for _ in range(self._capacity):
            offset = _HEADER_SIZE + index * _SLOT_SIZE
            key, slot_month, _pad, _count = _SLOT.unpack_from(self._map, offset)
            if key == digest and slot_month == month:
                self._offsets[(organization_id, month)] = offset
                return offset
            if slot_month == 0:
                if not create:
                    return None
                _SLOT.pack_into(self._map, offset, digest, month, 0, 0)
                self._offsets[(organization_id, month)] = offset
                return offset
            index = (index + 1) & mask
        raise MeterFull(f"meter file holds at most {self._capacity} organization-months")

    def consume(self, organization_id: str, month: int, requested: int, hard_limit: int) -> int:
        # The hot path: the locks taken inline (no context-manager object per call); a cached
        # offset is read before locking, since slots never move once claimed.
        offset = self._offsets.get((organization_id, month))
        thread_lock = self._thread_lock
        thread_lock.acquire()
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
            try:
                if offset is None:
                    offset = self._slot(organization_id, month, create=True)
                    assert offset is not None
                at = offset + _COUNT_OFFSET
                (used,) = _COUNT.unpack_from(self._map, at)
                granted = max(0, min(requested, hard_limit - used))
                if granted:
                    _COUNT.pack_into(self._map, at, used + granted)
                return granted
            finally:
                fcntl.lockf(self._fd, fcntl.LOCK_UN)
        finally:
            thread_lock.release()

    def usage(self, organization_id: str, month: int) -> int:
        with self._locked():
            offset = self._slot(organization_id, month, create=False)
            if offset is None:
                return 0
            return _COUNT.unpack_from(self._map, offset + _COUNT_OFFSET)[0]

    def flush(self) -> None:
        """Write dirty pages to disk: bounds what a machine crash can lose."""
        self._map.flush()

    def close(self) -> None:
        if not self._map.closed:
            self._map.flush()
            self._map.close()
            os.close(self._fd)


class _FileLock:
    """Thread lock, then an exclusive lock on the whole file (the order avoids deadlock)."""

    __slots__ = ("_fd", "_thread_lock")

    def __init__(self, fd: int, thread_lock: threading.Lock):
        self._fd = fd
        self._thread_lock = thread_lock

    def __enter__(self) -> None:
        self._thread_lock.acquire()
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._thread_lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()
