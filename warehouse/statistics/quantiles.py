"""Always-valid comparison of two arms' quantiles (p95 latency) as one two-sample test.

For an arm of ``n`` users and a hypothesised q-quantile ``xi``, the count of its users at or
below ``xi``, ``S(xi)``, is Binomial(n, q) revealed one user at a time when ``xi`` is the true
quantile of a continuous distribution, and the beta-binomial mixture ``M_n(S)`` (``quantiles``)
is a nonnegative martingale with mean 1 (Howard & Ramdas 2022). The two arms' users are
independent, so for the true pair ``(xi_T, xi_C)`` the product ``M_T(S_T(xi_T)) M_C(S_C(xi_C))``
is a nonnegative martingale too, and by Ville's inequality it ever reaches ``1/alpha`` with
probability at most ``alpha``. A difference ``delta`` is rejected when *every* pair with
``xi_T - xi_C = delta`` has a product of at least ``1/alpha``; what is not rejected is the
confidence sequence for the difference of the two quantiles.

Why a product, not the union of two one-arm intervals (the method this replaces): a union
splits ``alpha`` between the arms and adds their half-widths, so it needs about twice the
users of a two-sample test for the same width. The product lets the evidence of both arms add
(in log terms), so widths combine like standard errors, in quadrature, at the full ``alpha``.

The arms are given as *cells*: a value range and the users whose value lies in it. Exact
values are cells of width 0; the pipeline's latency histograms give one cell per bucket
(``histogram.LatencyHistogram.cells``). Where a hypothesised ``xi`` falls inside a cell, its
count is only known to lie between the cell's two cumulative counts, and the smallest mixture
over that range is used: reading from a histogram only widens the interval (by at most the
bucket's width, 1 %), it never narrows it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from flagsight_core.contract import WithheldReason
from numpy.typing import NDArray
from scipy.special import betaln

from warehouse.statistics.boundaries import tuning_constant
from warehouse.statistics.decisions import (
    CONFIDENCE,
    MIN_USERS_WITH_FEEDBACK,
    Comparison,
    check_confidence,
    compared,
    withheld,
)

TWO_SAMPLE_DESIGN_USERS = 2_000
"""Users per arm at which each arm's mixture is tightest (its Beta prior's concentration is set
from it with Howard et al.'s tuning rule). docs/statistics.md has the study behind it."""


@dataclass(frozen=True)
class ArmCells:
    """One arm's per-user values as ascending, non-overlapping cells, and its estimate."""

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    counts: NDArray[np.int64]
    estimate: float | None

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @classmethod
    def of_values(cls, values: Sequence[float], q: float) -> ArmCells:
        """Exact values (tests, small data): one zero-width cell per distinct value, and the
        nearest-rank q-quantile as the estimate."""
        distinct, counts = np.unique(np.asarray(values, dtype=np.float64), return_counts=True)
        rank = quantile_estimate_rank(int(counts.sum()), q)
        estimate = None if rank is None else float(np.repeat(distinct, counts)[rank])
        return cls(distinct, distinct, counts.astype(np.int64), estimate)


def quantile_estimate_rank(n: int, q: float) -> int | None:
    """0-based index of the nearest-rank q-quantile, ``ceil(q n) - 1``, among ``n`` values."""
    check_quantile(q)
    if n <= 0:
        return None
    return max(math.ceil(round(q * n, 9)) - 1, 0)


def check_quantile(q: float) -> float:
    """A quantile strictly between 0 and 1, or ValueError (a caller's bug)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    return q


def _mixture(n: int, q: float, alpha: float) -> Callable[[NDArray[np.int64]], NDArray]:
    """``s -> log M_n(s)``, the beta-binomial mixture of an arm of ``n`` users, vectorized."""
    k = max(TWO_SAMPLE_DESIGN_USERS / tuning_constant(alpha) - 1.0, 1.0)
    a, b = k * q, k * (1.0 - q)
    log_q, log_not_q = math.log(q), math.log1p(-q)

    def log_mixture(s: NDArray[np.int64]) -> NDArray:
        s = np.asarray(s, dtype=np.float64)
        return betaln(a + s, b + n - s) - betaln(a, b) - s * log_q - (n - s) * log_not_q

    return log_mixture


def _argmin(log_mixture: Callable[[NDArray[np.int64]], NDArray], n: int) -> int:
    """The count minimising the (convex) log mixture: bisection on its forward difference."""
    low, high = 0, n
    while low < high:
        middle = (low + high) // 2
        step = log_mixture(np.array([middle, middle + 1]))
        if step[1] >= step[0]:
            high = middle
        else:
            low = middle + 1
    return low


@dataclass(frozen=True)
class _Regions:
    """Where a hypothesised quantile can fall, in ascending order: below the first cell, in
    each cell, between cells, above the last; each with its value range and the least log
    mixture over the counts it allows, made monotone on each side of the minimum by running
    minima (lowering a value only accepts more, so the interval only widens)."""

    low: NDArray[np.float64]
    high: NDArray[np.float64]
    evidence: NDArray[np.float64]
    lowest: int

    @classmethod
    def of(cls, arm: ArmCells, q: float, alpha: float) -> _Regions:
        n = arm.n
        cumulative = np.concatenate(([0], np.cumsum(arm.counts)))
        cells = len(arm.counts)
        low = np.empty(2 * cells + 1)
        high = np.empty(2 * cells + 1)
        fewest = np.empty(2 * cells + 1, dtype=np.int64)
        most = np.empty(2 * cells + 1, dtype=np.int64)
        # Gaps (even positions): between cell j-1's top and cell j's bottom, count fixed.
        low[0::2] = np.concatenate(([0.0], arm.upper))
        high[0::2] = np.concatenate((arm.lower, [np.inf]))
        fewest[0::2] = most[0::2] = cumulative
        # Cells (odd positions): anywhere inside, so the count is anywhere between.
        low[1::2], high[1::2] = arm.lower, arm.upper
        fewest[1::2], most[1::2] = cumulative[:-1], cumulative[1:]
        log_mixture = _mixture(n, q, alpha)
        best = _argmin(log_mixture, n)
        evidence = log_mixture(np.clip(best, fewest, most))
        lowest = int(np.argmin(evidence))
        evidence[: lowest + 1] = np.minimum.accumulate(evidence[: lowest + 1])
        evidence[lowest:] = np.minimum.accumulate(evidence[lowest:][::-1])[::-1]
        return cls(low, high, evidence, lowest)

    def last_below(self, threshold: NDArray[np.float64]) -> NDArray[np.int64]:
        """Per threshold, the highest region whose evidence is below it."""
        right = self.evidence[self.lowest :]
        return self.lowest + np.searchsorted(right, threshold, side="left") - 1

    def first_below(self, threshold: NDArray[np.float64]) -> NDArray[np.int64]:
        """Per threshold, the lowest region whose evidence is below it."""
        left = self.evidence[self.lowest :: -1]
        return self.lowest - np.searchsorted(left, threshold, side="left") + 1


def quantile_difference_interval(
    treatment: ArmCells, control: ArmCells, q: float, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """The confidence sequence's interval for ``xi_T - xi_C`` at this read (ms); an end may
    be infinite when the data cannot yet bound it."""
    alpha = 1.0 - check_confidence(confidence)
    check_quantile(q)
    t = _Regions.of(treatment, q, alpha)
    c = _Regions.of(control, q, alpha)
    room = math.log(1.0 / alpha) - t.evidence  # what control may add for the pair to stay
    accepted = room > c.evidence[c.lowest]
    if not accepted.any():
        return math.nan, math.nan  # no pair survives: cannot happen with data, kept safe
    room = room[accepted]
    lower = np.min(t.low[accepted] - c.high[c.last_below(room)])
    upper = np.max(t.high[accepted] - c.low[c.first_below(room)])
    return float(lower), float(upper)


def compare_quantiles(
    treatment: ArmCells,
    control: ArmCells,
    q: float,
    *,
    confidence: float = CONFIDENCE,
    withheld_reason: str | None = None,
) -> Comparison:
    """Treatment minus control of the q-quantile (ms), always valid; higher is worse.

    Withheld below the minimum sample (users with a latency, per arm) and while an end of the
    interval is still unbounded (too few users above or below the quantile).
    """
    difference = None
    if treatment.estimate is not None and control.estimate is not None:
        difference = treatment.estimate - control.estimate
    if withheld_reason is not None:
        return withheld(difference, confidence, withheld_reason)
    if min(treatment.n, control.n) < MIN_USERS_WITH_FEEDBACK:
        return withheld(difference, confidence, WithheldReason.BELOW_MINIMUM_SAMPLE)
    lower, upper = quantile_difference_interval(treatment, control, q, confidence)
    if not (math.isfinite(lower) and math.isfinite(upper)):
        return withheld(difference, confidence, WithheldReason.QUANTILE_UNBOUNDED)
    return compared(difference, (lower, upper), confidence, higher_is_worse=True)
