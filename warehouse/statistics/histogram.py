"""Per-arm latency histograms with relative-error buckets: quantiles and their bounds.

The health of a flag environment needs, per arm, three percentiles of its users' mean
latencies and the distribution around its p95 (for ``quantiles.compare_quantiles``). Sorting
every user of a touched arm made each run cost what the whole history cost. Instead the fold
keeps a count of users per logarithmic bucket (DDSketch's mapping, Masson et al. 2019), updated
by each user's move between buckets, so a run reads a few hundred counts per arm.

Bucket ``i`` holds the values in ``(GAMMA**(i-1), GAMMA**i]``, ``GAMMA = (1 + a) / (1 - a)``
with ``a = RELATIVE_ACCURACY``; its representative ``2 GAMMA**i / (GAMMA + 1)`` is within
``a`` relative error of every value in it. So a percentile read from the histogram is within
``a`` (0.5 %) of the exact one: the order statistics it interpolates are each replaced by a
value within ``a`` of them. Values at or below ``SMALLEST_MS`` share the bucket ``ZERO_BUCKET``
(``[0, GAMMA**ZERO_BUCKET]``, just above ``SMALLEST_MS``), whose error is absolute (at most
about ``SMALLEST_MS``), not relative.

The p95 comparison stays valid, not approximate: each bucket is handed to it as a *cell*
spanning the bucket's edges (``cells``), and the comparison assumes nothing about where in its
cell a value lies, so its interval contains the one exact values would give (it is at most
about ``2 a`` wider, relatively).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np
from numpy.typing import ArrayLike

from warehouse.statistics.quantiles import ArmCells

RELATIVE_ACCURACY = 0.005
GAMMA = (1.0 + RELATIVE_ACCURACY) / (1.0 - RELATIVE_ACCURACY)
LOG_GAMMA = math.log(GAMMA)
SMALLEST_MS = 0.01
ZERO_BUCKET = math.ceil(math.log(SMALLEST_MS) / LOG_GAMMA)
_EDGE_SLACK = 1e-9
"""Edges are widened by this relative amount, so a value that floating point put on the
wrong side of a bucket boundary (SQL's ``ln`` against Python's) still lies inside them."""


def bucket_of(ms: float) -> int:
    """The bucket of a latency (ms): what the SQL macro ``latency_bucket`` computes."""
    if ms <= SMALLEST_MS:
        return ZERO_BUCKET
    return math.ceil(math.log(ms) / LOG_GAMMA)


def buckets_of(ms: ArrayLike) -> np.ndarray:
    """``bucket_of`` over an array (simulations and tests)."""
    values = np.asarray(ms, dtype=np.float64)
    safe = np.maximum(values, SMALLEST_MS)
    return np.where(values <= SMALLEST_MS, ZERO_BUCKET, np.ceil(np.log(safe) / LOG_GAMMA)).astype(
        np.int64
    )


def bucket_sql(argument: str) -> str:
    """The same mapping as a DuckDB expression over ``argument`` (NULL stays NULL)."""
    return (
        f"CASE WHEN {argument} IS NULL THEN NULL WHEN {argument} <= {SMALLEST_MS!r} "
        f"THEN {ZERO_BUCKET} ELSE CAST(ceil(ln({argument}) / {LOG_GAMMA!r}) AS INTEGER) END"
    )


def lower_edge(bucket: int) -> float:
    if bucket <= ZERO_BUCKET:
        return 0.0
    return GAMMA ** (bucket - 1) * (1.0 - _EDGE_SLACK)


def upper_edge(bucket: int) -> float:
    """The zero bucket's too is ``GAMMA**ZERO_BUCKET``: the values just above ``SMALLEST_MS``
    (up to about 0.01005 ms) map to it as well."""
    return GAMMA ** max(bucket, ZERO_BUCKET) * (1.0 + _EDGE_SLACK)


def representative(bucket: int) -> float:
    if bucket <= ZERO_BUCKET:
        return SMALLEST_MS / 2.0
    return 2.0 * GAMMA**bucket / (GAMMA + 1.0)


@dataclass(frozen=True)
class LatencyHistogram:
    """One arm's users counted per bucket, ascending by bucket."""

    buckets: tuple[tuple[int, int], ...]
    _cumulative: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_cumulative", tuple(accumulate(u for _, u in self.buckets)))

    @classmethod
    def of(cls, counts: Iterable[tuple[int, int]]) -> LatencyHistogram:
        """From ``(bucket, users)`` pairs in any order; empty buckets dropped."""
        merged: dict[int, int] = {}
        for bucket, users in counts:
            if users < 0:
                raise ValueError(f"bucket {bucket} has {users} users")
            merged[bucket] = merged.get(bucket, 0) + users
        return cls(tuple(sorted((b, u) for b, u in merged.items() if u)))

    @classmethod
    def of_sorted(cls, buckets: Iterable[int], users: Iterable[int]) -> LatencyHistogram:
        """From buckets in ascending order, each once, and their (positive) user counts."""
        pairs = tuple(zip(buckets, users, strict=True))
        if any(a[0] >= b[0] for a, b in zip(pairs, pairs[1:], strict=False)):
            raise ValueError("buckets must be ascending and distinct")
        if any(u <= 0 for _, u in pairs):
            raise ValueError("bucket counts must be positive")
        return cls(pairs)

    @classmethod
    def of_values(cls, values: ArrayLike) -> LatencyHistogram:
        buckets, users = np.unique(buckets_of(values), return_counts=True)
        return cls(tuple(zip(buckets.tolist(), users.tolist(), strict=True)))

    def plus(self, other: LatencyHistogram) -> LatencyHistogram:
        """Both histograms' users together (histograms merge by adding counts)."""
        return LatencyHistogram.of((*self.buckets, *other.buckets))

    @property
    def n(self) -> int:
        return self._cumulative[-1] if self._cumulative else 0

    def bucket_at(self, rank: int) -> int:
        """The bucket holding the 0-based ``rank``-th smallest value."""
        if not 0 <= rank < self.n:
            raise IndexError(f"rank {rank} outside 0..{self.n - 1}")
        return self.buckets[bisect_right(self._cumulative, rank)][0]

    def quantile(self, q: float) -> float | None:
        """The q-quantile interpolated between order statistics as DuckDB's ``quantile_cont``
        does, each order statistic read as its bucket's representative."""
        n = self.n
        if n == 0:
            return None
        position = q * (n - 1)
        below, above = math.floor(position), math.ceil(position)
        low = representative(self.bucket_at(below))
        high = representative(self.bucket_at(above))
        return low + (position - below) * (high - low)

    def cells(self, q: float) -> ArmCells:
        """The arm for ``quantiles.compare_quantiles``: one cell per bucket, spanning the
        bucket's edges, with the interpolated q-quantile as the estimate."""
        buckets = np.array([b for b, _ in self.buckets], dtype=np.float64)
        counts = np.array([u for _, u in self.buckets], dtype=np.int64)
        lower = np.where(
            buckets <= ZERO_BUCKET, 0.0, GAMMA ** (buckets - 1.0) * (1.0 - _EDGE_SLACK)
        )  # lower_edge and upper_edge, vectorized
        upper = GAMMA ** np.maximum(buckets, ZERO_BUCKET) * (1.0 + _EDGE_SLACK)
        return ArmCells(lower, upper, counts, self.quantile(q))
