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

**Salted tables.** A table shipped to a local SDK (``GET /v1/ruleset``) holds, for each member,
not its hash but ``salted_key``: keyed BLAKE2b of that hash (64 bits) under the environment's
16-byte salt, which ships with it (``SaltedMembership``, made by ``salted``). Anyone holding a
key can still test guessed identifiers against their environment's table (an SDK must decide
membership without asking); what the salt takes away is a table of guessed identifiers' hashes
made once and used against every environment: each salt needs the guesses hashed again. A
keyed hash of the stored hash, rather than of the identifier, lets the service salt the
tables it holds without keeping identifiers.

**Segments by conditions** (contract 12). A segment is its listed members, its excluded
members and its conditions on the user's attributes (``conditions.in_segment`` says how they
combine). A segment without conditions is its listed members alone (an exclusion only stops a
user the conditions would take), so it stays a ``SegmentMembership``: the fast path of every
caller, the native one included, is unchanged. A segment with conditions is a
``DefinedSegment``: a ``SegmentMembership`` of its listed members (what a caller that knows only
tables reads, its table and its count) that decides by its whole definition, a user's
attributes included (``includes``, ``includes_many``); ``identifier in segment`` decides for
a user without attributes. ``segment_of`` makes the one or the other. The native path decides
a ``DefinedSegment`` by its ``native_plan`` (its two tables and ``conditions.hold_plan``), the
same walk as ``includes``, in C.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container, Iterable, Sequence

import mmh3
import numpy as np

from flagsight_core.conditions import (
    Condition,
    all_hold,
    all_hold_columns,
    all_hold_many,
    hold_plan,
)
from flagsight_core.context import (
    NO_ATTRIBUTES,
    AttributeColumns,
    EvaluationContext,
    EvaluationContexts,
)
from flagsight_core.hashing import batch_hashing

_EMPTY = 0
_MIN_CAPACITY = 8
SALT_BYTES = 16


def identifier_hash(identifier: str) -> int:
    """The unsigned 64-bit hash the table stores for ``identifier`` (never 0)."""
    return mmh3.hash64(identifier.encode("utf-8", "surrogatepass"), signed=False)[0] or 1


def _hashes(identifiers: Sequence[str]) -> np.ndarray:
    """``identifier_hash`` of each identifier, as one array.

    The 16-byte little-endian digests are joined and viewed as uint64 pairs, whose first
    halves are the hashes: no Python int is made per identifier, which makes this several
    times faster than calling ``identifier_hash`` in a loop.
    """
    batch = batch_hashing()
    if batch is not None and type(identifiers) is list:
        return np.frombuffer(batch.identifier_hashes(identifiers), dtype=np.uint64)
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

    def _probe(self, wanted: int) -> bool:
        """Whether ``wanted`` (a key, never 0) is in the table (``__contains__`` writes this
        out: it runs on every evaluation of a segment rule, where a call costs)."""
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
        """``identifier in self`` for each identifier, as a boolean array (bulk evaluation)."""
        return self._holds(_hashes(identifiers))

    def _holds(self, wanted: np.ndarray) -> np.ndarray:
        """Whether each key is in the table. Every key's probe advances together, one slot per
        round; with a load factor of at most 0.5 nearly all of them end in the first round or
        two."""
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

    def keys(self) -> np.ndarray:
        """The stored keys (every non-empty slot), in table order."""
        return self._table[self._table != _EMPTY]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self._size}, capacity={self._table.size})"


def salted_key(key: int, keyed: hashlib._Hash) -> int:  # type: ignore[name-defined]
    """``key`` (an identifier's hash) under a salt: ``keyed`` is BLAKE2b keyed with it
    (``hashlib.blake2b(key=salt, digest_size=8)``), copied, never updated itself."""
    mac = keyed.copy()
    mac.update(key.to_bytes(8, "little"))
    return int.from_bytes(mac.digest(), "little") or 1


def _keyed(salt: bytes) -> hashlib._Hash:  # type: ignore[name-defined]
    if len(salt) != SALT_BYTES:
        raise ValueError(f"a segment salt is {SALT_BYTES} bytes")
    return hashlib.blake2b(key=salt, digest_size=8)


class SaltedMembership(SegmentMembership):
    """A membership whose table holds salted keys (the module docstring): an identifier is
    hashed, then salted, then looked up."""

    __slots__ = ("_salted",)

    def __init__(self, table: np.ndarray, salt: bytes):
        super().__init__(table)
        self._salted = _keyed(salt)

    @classmethod
    def from_table(cls, raw: bytes, salt: bytes) -> SaltedMembership:
        """The membership of a shipped table; ``ValueError`` for bytes that are not one."""
        return cls(SegmentMembership.from_bytes(raw)._table, salt)

    def __contains__(self, identifier: object) -> bool:
        if not isinstance(identifier, str):
            return False
        return self._probe(salted_key(identifier_hash(identifier), self._salted))

    def contains_many(self, identifiers: Sequence[str]) -> np.ndarray:
        keyed = self._salted
        wanted = [salted_key(int(key), keyed) for key in _hashes(identifiers).tolist()]
        return self._holds(np.array(wanted, dtype=np.uint64))


def salted(membership: SegmentMembership, salt: bytes) -> SaltedMembership:
    """``membership`` with every key salted: the table a ruleset ships. One BLAKE2b per
    member, so the service does it once per ruleset version, off its event loop. A
    ``DefinedSegment`` comes back as one, both its lists salted, its conditions as they are."""
    if isinstance(membership, DefinedSegment):
        return membership.salted(salt)  # type: ignore[return-value]
    keyed = _keyed(salt)
    keys = np.array([salted_key(key, keyed) for key in membership.keys().tolist()], dtype=np.uint64)
    table = np.zeros(_capacity(keys.size), dtype=np.uint64)
    _fill(table, keys)
    return SaltedMembership(table, salt)


_NO_MEMBERS = SegmentMembership.build(())


class DefinedSegment(SegmentMembership):
    """A segment by its definition (contract 12): a user listed in ``listed`` is in; otherwise
    one listed in ``excluded`` is out; otherwise the user is in when every condition holds
    (``conditions.in_segment``). Made by ``segment_of`` for a segment with conditions.

    As a ``SegmentMembership`` it is the table of its listed members (``to_bytes``, ``keys``,
    ``len``); ``identifier in segment`` and ``contains_many`` decide for users without
    attributes, ``includes`` and ``includes_many`` with theirs. Never raises for a string.
    """

    __slots__ = ("_all_hold", "_hashed_alike", "conditions", "excluded", "listed", "native_plan")

    def __init__(
        self,
        listed: SegmentMembership,
        excluded: SegmentMembership,
        conditions: tuple[Condition, ...],
    ):
        super().__init__(listed._table)
        self.listed = listed
        """The members listed in ``userIdentifiers`` (a table, salted or not)."""
        self.excluded = excluded
        """The members listed in ``excludedUserIdentifiers`` (salted as ``listed`` is)."""
        self.conditions = conditions
        """What a user neither listed nor excluded must satisfy, every one (never empty)."""
        self._all_hold = all_hold(conditions)
        self.native_plan = (listed, excluded, hold_plan(conditions))
        """What the native path (``api.native``) decides the segment by, as ``includes``
        does: the two lists and the conditions' ``hold_plan``."""
        self._hashed_alike = (
            type(listed) is SegmentMembership and type(excluded) is SegmentMembership
        )
        """Whether both lists key a user by ``identifier_hash`` alone (not salted): a user's
        hash then serves both."""

    def includes(self, ctx: EvaluationContext) -> bool:
        """Whether the user of ``ctx`` is in the segment (its identifier and attributes):
        ``conditions.in_segment``, in the order that asks the fewest tables. A user the
        conditions take is in unless excluded and not listed; one they do not take is in
        only when listed."""
        user = ctx.user
        if not self._all_hold(ctx.attributes, user):
            return user in self.listed
        if not len(self.excluded) or user not in self.excluded:
            return True
        return user in self.listed

    def includes_many(self, contexts: EvaluationContexts) -> np.ndarray:
        """``includes`` for each user, as a boolean array: the conditions a column at a time
        (``conditions.all_hold_many``), then the exclusions asked of the users they take and
        the listed members of the others, each identifier hashed once for both tables."""
        users = contexts.users
        given = contexts.attributes
        if isinstance(given, AttributeColumns):  # the service's decoder: a column per name
            found = all_hold_columns(self.conditions, given.reader(users), users)
        else:
            if given:
                get = given.get
                attributes = [get(user) or NO_ATTRIBUTES for user in users]
            else:
                attributes = [NO_ATTRIBUTES] * len(users)
            found = all_hold_many(self.conditions, attributes, users)
        asked = len(self.excluded) or len(self.listed)  # neither list: no identifier hashed
        keys = _hashes(users) if asked and self._hashed_alike and len(users) else None
        if len(self.excluded):
            taken = np.flatnonzero(found)
            if taken.size:
                found[taken] = ~self._contains(self.excluded, users, keys, taken)
        if len(self.listed):
            others = np.flatnonzero(~found)
            if others.size:
                found[others] = self._contains(self.listed, users, keys, others)
        return found

    @staticmethod
    def _contains(
        table: SegmentMembership, users: Sequence[str], keys: np.ndarray | None, at: np.ndarray
    ) -> np.ndarray:
        """Whether the users at ``at`` are in ``table``: by their hashes when given."""
        if keys is not None:
            return table._holds(keys[at])
        return table.contains_many([users[i] for i in at.tolist()])

    def __contains__(self, identifier: object) -> bool:
        if not isinstance(identifier, str):
            return False
        return self.includes(EvaluationContext(identifier, NO_ATTRIBUTES))

    def contains_many(self, identifiers: Sequence[str]) -> np.ndarray:
        return self.includes_many(EvaluationContexts(identifiers))

    def salted(self, salt: bytes) -> DefinedSegment:
        """This segment with both lists salted (``salted``): what a ruleset ships."""
        return DefinedSegment(
            salted(self.listed, salt), salted(self.excluded, salt), self.conditions
        )

    @property
    def is_salted(self) -> bool:
        """Whether its lists hold salted keys (a ruleset's)."""
        return isinstance(self.listed, SaltedMembership)

    @property
    def nbytes(self) -> int:
        return self.listed.nbytes + self.excluded.nbytes

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(listed={len(self.listed)}, excluded={len(self.excluded)},"
            f" conditions={len(self.conditions)})"
        )


def segment_of(
    listed: SegmentMembership,
    excluded: SegmentMembership | None = None,
    conditions: tuple[Condition, ...] = (),
) -> SegmentMembership:
    """The segment of these lists and conditions: ``listed`` itself when there are no
    conditions (the exclusions then change nothing), else a ``DefinedSegment``."""
    if not conditions:
        return listed
    return DefinedSegment(listed, _NO_MEMBERS if excluded is None else excluded, conditions)


def member(members: Container[str], ctx: EvaluationContext) -> bool:
    """Whether the user of ``ctx`` is in a segment: by its definition when it has conditions,
    else by its identifier (any container of identifiers serves)."""
    if type(members) is DefinedSegment:
        return members.includes(ctx)
    return ctx.user in members


def members_of(members: Container[str], contexts: EvaluationContexts) -> np.ndarray:
    """``member`` for each user, as a boolean array: one call where the segment offers it
    (``SegmentMembership.contains_many``, ``DefinedSegment.includes_many``)."""
    if type(members) is DefinedSegment:
        return members.includes_many(contexts)
    users = contexts.users
    contains_many = getattr(members, "contains_many", None)
    if contains_many is not None:
        return contains_many(users)
    return np.fromiter((user in members for user in users), dtype=bool, count=len(users))
