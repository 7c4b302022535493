"""Percentage bucketing, the one place it is defined.

``bucket = murmur3_x86_32(utf8(flagKey + ":" + userIdentifier), seed=0) mod 10000``, unsigned.
Any client can reproduce it, and a user's bucket for one flag says nothing about another flag.
"""

from __future__ import annotations

from collections.abc import Sequence

import mmh3
import numpy as np

BUCKETS = 10_000


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
    data = [(prefix + user).encode("utf-8", "surrogatepass") for user in user_identifiers]
    digests = b"".join(map(mmh3.mmh3_32_digest, data))
    return np.frombuffer(digests, dtype="<u4") % BUCKETS
