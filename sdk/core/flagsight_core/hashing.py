"""Percentage bucketing, the one place it is defined.

``bucket = murmur3_x86_32(utf8(flagKey + ":" + userIdentifier), seed=0) mod 10000``, unsigned.
Any client can reproduce it, and a user's bucket for one flag says nothing about another flag.

A host may hash many identifiers at once its own way (``use_batch_hashing``), with the same
results: the service plugs in its native module (``api.native.fastpath``), which the core may
not import, so that a bulk request of 10,000 users hashes them in one C call each for its
percentage rules and its segments' tables, rather than encoding each identifier and calling
mmh3 for it (about half of a plain 10,000-user request's work in Python). mmh3 itself hashes
one buffer a call; ``tests/native/test_fastpath.py`` holds the two ways to equal answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import mmh3
import numpy as np

BUCKETS = 10_000


class BatchHashing(Protocol):
    """Many identifiers hashed in one call: what a host may plug in (``use_batch_hashing``)."""

    def buckets(self, prefix: str, identifiers: list[str], /) -> bytes:
        """``bucket`` of each identifier, ``prefix`` being the flag key and ``":"``, as
        native-order ``uint16``s."""
        ...

    def identifier_hashes(self, identifiers: list[str], /) -> bytes:
        """``segments.identifier_hash`` of each identifier, as native-order ``uint64``s."""
        ...


_batch: list[BatchHashing | None] = [None]


def use_batch_hashing(batch: BatchHashing | None) -> None:
    """Set (None: clear) how many identifiers are hashed at once (``buckets``,
    ``segments``' tables). The service sets its native module before it serves; an
    application's SDK sets none and hashes with mmh3."""
    _batch[0] = batch


def batch_hashing() -> BatchHashing | None:
    """The host's batch hashing, if it set one."""
    return _batch[0]


def bucket(flag_key: str, user_identifier: str) -> int:
    """The user's bucket for this flag, in ``0..9999``."""
    # Bytes, not str: mmh3 crashes the interpreter on a str holding a lone surrogate.
    data = f"{flag_key}:{user_identifier}".encode("utf-8", "surrogatepass")
    return mmh3.hash(data, 0, False) % BUCKETS


def threshold(percentage: float) -> int:
    """Buckets below this number are in the rollout (``round(P * 100)``)."""
    return round(percentage * 100)


def buckets(flag_key: str, user_identifiers: Sequence[str]) -> np.ndarray:
    """``bucket`` for many users of one flag, as an array.

    The 4-byte little-endian digests are joined and read as one uint32 array, so no Python
    int is made per user (several times faster than calling ``bucket`` in a loop).
    """
    prefix = f"{flag_key}:"
    batch = _batch[0]
    if batch is not None and type(user_identifiers) is list:
        return np.frombuffer(batch.buckets(prefix, user_identifiers), dtype=np.uint16)
    data = [(prefix + user).encode("utf-8", "surrogatepass") for user in user_identifiers]
    digests = b"".join(map(mmh3.mmh3_32_digest, data))
    return np.frombuffer(digests, dtype="<u4") % BUCKETS
