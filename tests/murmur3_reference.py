"""An independent, pure-Python murmur3_x86_32, written from the algorithm's description.

Tests compare the service's bucketing (which uses the mmh3 C extension) with this, so a wrong
seed, sign or encoding in the service would show.
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _MASK
    blocks = len(data) // 4
    for i in range(blocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = _rotl((k * c1) & _MASK, 15)
        h ^= (k * c2) & _MASK
        h = (_rotl(h, 13) * 5 + 0xE6546B64) & _MASK
    tail = data[4 * blocks :]
    k = 0
    for shift, byte in zip((0, 8, 16), tail, strict=False):
        k |= byte << shift
    if tail:
        k = _rotl((k * c1) & _MASK, 15)
        h ^= (k * c2) & _MASK
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h


def reference_bucket(flag_key: str, user_identifier: str) -> int:
    return murmur3_x86_32(f"{flag_key}:{user_identifier}".encode()) % 10_000
