"""An exact, cross-process meter in a memory-mapped file.

Every gunicorn worker maps the same file (``$FLAGSIGHT_DATA_DIR/run/meter.bin``). The mapping
is the counter itself, so it survives any worker or master being killed; ``flush`` bounds what
a machine crash can lose.

Each (organization, month) slot holds ``allocated``: evaluations served plus quota leased to
workers and not spent yet. Changing it takes an exclusive ``lockf`` lock on the file (plus a
thread lock: POSIX record locks do not exclude threads of one process). Far from the hard
threshold a worker leases a block of quota (``leasing.lease_size``: at most 1 % of what
remains, at most ``MAX_LEASE``) and spends it without the file lock; close to the threshold
(``leasing.LEASE_FLOOR``) every evaluation takes the lock, so the last ones are served
exactly in order and never past the threshold. Taking a file lock per request made the workers queue on
each other whenever the holder was descheduled.

A lease's unspent quota is published in a cell of the file, so ``usage`` (allocated minus
unspent) is exact at any moment. Leases go back to the pool every second (``release_leases``)
and at shutdown; the cells of a worker that died are reclaimed by the next process that takes
the lock.

The file is allocated whole when it is opened (``posix_fallocate``), so no page of the
mapping can fault on a full disk; ``flagsight serve`` creates it before the workers start.

Only the current month is ever read (usage, quota, thresholds; past months are in the
warehouse), so a slot of a month before the previous one is reused by the next new
organization-month that probes past it.

Layout: a 64-byte header (magic, capacity), ``capacity`` slots of 32 bytes (organization
digest, month ``YYYYMM``, padding, allocated), then ``LEASE_CELLS`` cells of 24 bytes (pid,
padding, slot offset, unspent). Slots are found by linear probing and never move.
"""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import struct
import threading
from pathlib import Path

import numpy as np

from api.infra.processes import pid_alive
from api.metering import leasing
from api.metering.meter import previous_month

MAGIC = b"FSMETER2"
_OLD_MAGIC = b"FSMETER1"  # the same slots without lease cells: extended in place
_HEADER = struct.Struct("<8sI")
_HEADER_SIZE = 64
_SLOT = struct.Struct("<16siiq")
_SLOT_SIZE = 32
_COUNT = struct.Struct("<q")
_COUNT_OFFSET = 24
_CELL = struct.Struct("<iiqq")
_CELL_DTYPE = np.dtype([("pid", "<i4"), ("pad", "<i4"), ("slot", "<i8"), ("unspent", "<i8")])
_CELL_SIZE = 24
_CELL_UNSPENT_OFFSET = 16
DEFAULT_CAPACITY = 1 << 14
"""Organization-months: 512 KB of slots. Only this month and the last are kept (a slot of an
older month is taken over when a new one needs room), so this holds 8,000 organizations at
once; a file made with more keeps its capacity (its header says it)."""
LEASE_CELLS = 4096
MAX_LEASE = 1_000
"""A file lock is cheap: a lease of this much already takes it off the request path."""


def lease_size(remaining: int) -> int:
    """How much quota to lease when ``remaining`` is left after the request itself."""
    return leasing.lease_size(remaining, MAX_LEASE)


class MeterFull(RuntimeError):
    """Every slot or lease cell is taken: the file was sized for fewer."""


class _Lease:
    __slots__ = ("cell", "slot", "unspent")

    def __init__(self, cell: int, slot: int, unspent: int):
        self.cell = cell
        self.slot = slot
        self.unspent = unspent


class MmapMeter:
    """``Meter`` for one machine: exact across processes and threads, no server needed."""

    def __init__(self, path: Path, capacity: int = DEFAULT_CAPACITY):
        if capacity & (capacity - 1):
            raise ValueError("capacity must be a power of two")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._pid = os.getpid()
        self._thread_lock = threading.Lock()
        self._offsets: dict[tuple[str, int], int] = {}
        self._leases: dict[tuple[str, int], _Lease] = {}
        self._file_locked(self._thread_lock.acquire)
        try:
            self._capacity = self._initialise(capacity)
        finally:
            self._file_unlocked()
        self._cells_at = _HEADER_SIZE + self._capacity * _SLOT_SIZE
        self._map = mmap.mmap(self._fd, self._cells_at + LEASE_CELLS * _CELL_SIZE)
        self._cell_table = np.frombuffer(self._map, _CELL_DTYPE, LEASE_CELLS, self._cells_at)

    def _initialise(self, capacity: int) -> int:
        header = os.pread(self._fd, _HEADER.size, 0)
        if len(header) == _HEADER.size and header[:8] in (MAGIC, _OLD_MAGIC):
            capacity = _HEADER.unpack(header)[1]
        size = _HEADER_SIZE + capacity * _SLOT_SIZE + LEASE_CELLS * _CELL_SIZE
        # Every block allocated now, never sparse: a store into a hole of a mapped file needs
        # a block at that moment, and on a full disk the kernel answers with SIGBUS, which kills
        # the worker. Allocating also fills an old file's holes (and its missing lease cells,
        # as zeros); on a file already whole it changes nothing.
        os.posix_fallocate(self._fd, 0, size)
        os.pwrite(self._fd, _HEADER.pack(MAGIC, capacity), 0)
        return capacity

    # -- locking ----------------------------------------------------------------------------

    def _file_locked(self, acquire_thread_lock) -> None:  # noqa: ANN001 - a lock's acquire
        acquire_thread_lock()
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._thread_lock.release()
            raise

    def _file_unlocked(self) -> None:
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()

    # -- slots and cells (callers hold the file lock) ---------------------------------------

    def _slot(self, organization_id: str, month: int, create: bool) -> int | None:
        cached = self._offsets.get((organization_id, month))
        if cached is not None:
            return cached
        digest = hashlib.blake2b(organization_id.encode(), digest_size=16).digest()
        mask = self._capacity - 1
        index = (int.from_bytes(digest[:8], "little") ^ month) & mask
        oldest_kept = previous_month(month)
        reusable: int | None = None
        for _ in range(self._capacity):
            offset = _HEADER_SIZE + index * _SLOT_SIZE
            key, slot_month, _pad, _count = _SLOT.unpack_from(self._map, offset)
            if key == digest and slot_month == month:
                self._offsets[(organization_id, month)] = offset
                return offset
            if slot_month == 0:
                break
            if reusable is None and slot_month < oldest_kept:
                reusable = offset
            index = (index + 1) & mask
        else:
            offset = None
        if not create:
            return None
        if reusable is not None:  # a month no one reads any more: its slot is taken over
            offset = reusable
            self._forget(offset)
        if offset is None:
            raise MeterFull(f"meter file holds at most {self._capacity} organization-months")
        _SLOT.pack_into(self._map, offset, digest, month, 0, 0)
        self._offsets[(organization_id, month)] = offset
        return offset

    def _forget(self, slot: int) -> None:
        """Drop what refers to ``slot`` before it is reused: leases on it (left only by
        workers that died before they could give them back) and this process's cache."""
        table = self._cell_table
        for index in np.flatnonzero((table["slot"] == slot) & (table["pid"] != 0)):
            _CELL.pack_into(self._map, self._cells_at + int(index) * _CELL_SIZE, 0, 0, 0, 0)
        for key in [key for key, offset in self._offsets.items() if offset == slot]:
            del self._offsets[key]

    def _allocated(self, slot: int) -> int:
        return _COUNT.unpack_from(self._map, slot + _COUNT_OFFSET)[0]

    def _set_allocated(self, slot: int, value: int) -> None:
        _COUNT.pack_into(self._map, slot + _COUNT_OFFSET, value)

    def _reclaim_dead_cells(self) -> None:
        """Give the unspent quota of workers that died back to their slots."""
        table = self._cell_table
        for index in np.flatnonzero(table["pid"]):
            pid, _pad, slot, unspent = (int(v) for v in table[index].tolist())
            if pid != self._pid and not pid_alive(pid):
                self._set_allocated(slot, self._allocated(slot) - unspent)
                _CELL.pack_into(self._map, self._cells_at + int(index) * _CELL_SIZE, 0, 0, 0, 0)

    def _reclaim_dead_cells_of(self, slot: int) -> bool:
        """Reclaim dead workers' leases if any is on ``slot``; whether one was."""
        table = self._cell_table
        if not np.any((table["slot"] == slot) & (table["pid"] != 0) & (table["pid"] != self._pid)):
            return False
        before = self._allocated(slot)
        self._reclaim_dead_cells()
        return self._allocated(slot) != before

    def _new_cell(self, slot: int, unspent: int) -> int:
        free = np.flatnonzero(self._cell_table["pid"] == 0)
        if not len(free):
            raise MeterFull(f"meter file holds at most {LEASE_CELLS} leases")
        offset = self._cells_at + int(free[0]) * _CELL_SIZE
        _CELL.pack_into(self._map, offset, self._pid, 0, slot, unspent)
        return offset

    def _return_lease(self, key: tuple[str, int]) -> None:
        lease = self._leases.pop(key, None)
        if lease is not None:
            self._set_allocated(lease.slot, self._allocated(lease.slot) - lease.unspent)
            _CELL.pack_into(self._map, lease.cell, 0, 0, 0, 0)

    # -- the Meter protocol -----------------------------------------------------------------

    def consume(self, organization_id: str, month: int, requested: int, hard_limit: int) -> int:
        key = (organization_id, month)
        thread_lock = self._thread_lock
        thread_lock.acquire()
        try:
            lease = self._leases.get(key)
            if lease is not None and lease.unspent >= requested:
                lease.unspent -= requested  # the hot path: no file lock, no system call
                _COUNT.pack_into(self._map, lease.cell + _CELL_UNSPENT_OFFSET, lease.unspent)
                return requested
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
            try:
                return self._consume_locked(key, requested, hard_limit)
            finally:
                fcntl.lockf(self._fd, fcntl.LOCK_UN)
        finally:
            thread_lock.release()

    def _consume_locked(self, key: tuple[str, int], requested: int, hard_limit: int) -> int:
        self._return_lease(key)
        slot = self._slot(*key, create=True)
        assert slot is not None
        allocated = self._allocated(slot)
        granted = max(0, min(requested, hard_limit - allocated))
        if granted < requested and self._reclaim_dead_cells_of(slot):
            allocated = self._allocated(slot)  # quota a dead worker held is usable again
            granted = max(0, min(requested, hard_limit - allocated))
        leased = lease_size(hard_limit - allocated - granted)
        self._set_allocated(slot, allocated + granted + leased)
        if leased:
            self._leases[key] = _Lease(self._new_cell(slot, leased), slot, leased)
        return granted

    def refund(self, organization_id: str, month: int, count: int) -> None:
        if count <= 0:
            return
        self._file_locked(self._thread_lock.acquire)
        try:
            slot = self._slot(organization_id, month, create=False)
            if slot is not None:
                self._set_allocated(slot, max(0, self._allocated(slot) - count))
        finally:
            self._file_unlocked()

    def usage(self, organization_id: str, month: int, *, exact: bool = False) -> int:
        """Evaluations served: allocated minus every live lease's unspent quota (always exact:
        the count is in this host's file)."""
        self._file_locked(self._thread_lock.acquire)
        try:
            slot = self._slot(organization_id, month, create=False)
            if slot is None:
                return 0
            self._reclaim_dead_cells()
            table = self._cell_table
            unspent = int(table["unspent"][(table["pid"] != 0) & (table["slot"] == slot)].sum())
            return self._allocated(slot) - unspent
        finally:
            self._file_unlocked()

    def release_leases(self) -> None:
        """Give every lease of this process back, so no quota sits idle in one worker."""
        if not self._leases:
            return
        self._file_locked(self._thread_lock.acquire)
        try:
            for key in list(self._leases):
                self._return_lease(key)
        finally:
            self._file_unlocked()

    def flush(self) -> None:
        """Return leases and write dirty pages to disk: bounds what a machine crash can lose."""
        self.release_leases()
        self._map.flush()

    def close(self) -> None:
        if not self._map.closed:
            self.release_leases()
            self._map.flush()
            del self._cell_table  # a view into the mapping: it must go before the mapping
            self._map.close()
            os.close(self._fd)
