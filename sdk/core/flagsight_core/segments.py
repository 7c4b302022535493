"""Segment membership: a compact, read-only set of user identifiers with O(1) lookups.

A segment may hold 1,000,000 identifiers and every worker keeps every segment in memory, so a
Python ``set`` of strings (about 100 bytes per identifier) is too heavy. ``SegmentMembership``
keeps only a 64-bit hash of each identifier in a numpy open-addressing table (linear probing,
load factor at most 0.5): 16 bytes per identifier at worst, 8 MiB to 16 MiB for a million.

Hash: the first 64 bits of MurmurHash3 x64-128 (seed 0) of the identifier's UTF-8 bytes. A
hash of 0 marks an empty slot, so a hash that happens to be 0 is stored as 1.

Collisions: the table stores hashes, not identifiers, so a non-member is reported as a member
when its hash equals a member's hash. For a segment of ``n`` identifiers that probability is
about ``n / 2**64`` per lookup: 5.4e-14 for a million members, i.e. one wrong answer in roughly
18 trillion lookups of non-members. Members are never reported missing.

Identifiers are always encoded to bytes before hashing (``surrogatepass``): ``mmh3`` given a
``str`` holding a lone surrogate crashes the interpreter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import mmh3
import numpy as np

_EMPTY = 0
_MIN_CAPACITY = 8


def identifier_hash(identifier: str) -> int:
    """The unsigned 64-bit hash the table stores for ``identifier`` (never 0)."""
    return mmh3.hash64(identifier.encode("utf-8", "surrogatepass"), signed=False)[0] or 1


def _hashes(identifiers: Sequence[str]) -> np.ndarray:
    """``identifier_hash`` of each identifier, as one array.

    The 16-byte little-endian digests are joined and viewed as uint64 pairs, whose first
    halves are the hashes: no Python int is made per identifier, which makes this several
    times faster than calling ``identifier_hash`` in a loop.
    """
    encoded = [s.encode("utf-8", "surrogatepass") for s in identifiers]
    digests = b"".join(map(mmh3.mmh3_x64_128_digest, encoded))
    values = np.frombuffer(digests, dtype="<u8")[::2].astype(np.uint64)
    values[values == _EMPTY] = 1
    return values


def _capacity(count: int) -> int:
    """The smallest power of two that keeps the load factor at or below 0.5."""
    return max(_MIN_CAPACITY, 1 << max(0, 2 * count - 1).bit_length())


def _fill(table: np.ndarray, keys: np.ndarray) -> None:
    """Insert every key with linear probing, all keys of one probe step at a time.

    Each round writes every pending key whose slot is empty; where several pending keys want
    the same slot one of them lands there, and the rest (like keys whose slot was taken
    before) move one slot on. Equal keys land together, so duplicates are stored once.
    """
    mask = np.uint64(table.size - 1)
    position = (keys & mask).astype(np.int64)
    pending = np.arange(keys.size)
    while pending.size:
        slots = position[pending]
        free = table[slots] == _EMPTY
        table[slots[free]] = keys[pending[free]]
        placed = table[slots] == keys[pending]
        pending = pending[~placed]
        position[pending] = (position[pending] + 1) & (table.size - 1)


class SegmentMembership:
    """An immutable ``Container[str]``: ``identifier in membership`` in O(1), no strings kept."""

    __slots__ = ("_mask", "_size", "_slots", "_table")

    def __init__(self, table: np.ndarray):
        if table.dtype != np.uint64 or table.size & (table.size - 1):
            raise ValueError("table must be uint64 with a power-of-two size")
        self._table = table
        self._table.flags.writeable = False
        self._slots = memoryview(table)  # indexing a memoryview gives a plain int, quickly
        self._mask = table.size - 1
        self._size = int(np.count_nonzero(table))

    @classmethod
    def build(cls, identifiers: Iterable[str]) -> SegmentMembership:
        """A membership of ``identifiers`` (duplicates are counted once)."""
        ids = identifiers if isinstance(identifiers, Sequence) else list(identifiers)
        keys = _hashes(ids)
        table = np.zeros(_capacity(keys.size), dtype=np.uint64)
        _fill(table, keys)
        return cls(table)

    def __contains__(self, identifier: object) -> bool:
        if not isinstance(identifier, str):
            return False
        # ``identifier_hash``, written out: this runs on every evaluation of a segment rule
        wanted = mmh3.hash64(identifier.encode("utf-8", "surrogatepass"), signed=False)[0] or 1
        slots, mask = self._slots, self._mask
        index = wanted & mask
        while True:
            found = slots[index]
            if found == wanted:
                return True
            if found == _EMPTY:
                return False
            index = (index + 1) & mask

    def contains_many(self, identifiers: Sequence[str]) -> np.ndarray:
        """``identifier in self`` for each identifier, as a boolean array (bulk evaluation).

        Every identifier's probe advances together, one slot per round; with a load factor of
        at most 0.5 nearly all of them end in the first round or two.
        """
        wanted = _hashes(identifiers)
        found = np.zeros(wanted.size, dtype=bool)
        position = (wanted & np.uint64(self._mask)).astype(np.int64)
        pending = np.arange(wanted.size)
        while pending.size:
            slots = self._table[position[pending]]
            hit = slots == wanted[pending]
            found[pending[hit]] = True
            pending = pending[~hit & (slots != _EMPTY)]
            position[pending] = (position[pending] + 1) & self._mask
        return found

    def to_bytes(self) -> bytes:
        """The table as little-endian uint64 slots: what a ruleset ships (``from_bytes``).

        Hashes, not identifiers: an application holding the ruleset can test membership but
        cannot list a segment's users."""
        return self._table.astype("<u8", copy=False).tobytes()

    @classmethod
    def from_bytes(cls, raw: bytes) -> SegmentMembership:
        """The membership ``to_bytes`` wrote; ``ValueError`` for bytes that are not a table."""
        if len(raw) % 8:
            raise ValueError("a membership table is a whole number of 8-byte slots")
        return cls(np.frombuffer(raw, dtype="<u8").astype(np.uint64))

    def __len__(self) -> int:
        """Distinct identifier hashes held (equals distinct identifiers but for collisions)."""
        return self._size

    @property
    def nbytes(self) -> int:
        """Memory held by the table."""
        return int(self._table.nbytes)

    def __repr__(self) -> str:
        return f"SegmentMembership(size={self._size}, capacity={self._table.size})"
