"""Always-valid bounds on a quantile (p95 latency) and the comparison of two arms' quantiles.

For the true q-quantile ``xi`` of a continuous distribution, the number of a user's values at
or below it, ``S_n = #{X_i <= xi}``, is a Binomial(n, q) count revealed one user at a time.
A confidence sequence on that count is one on ``xi``: whenever ``S_n`` lies in ``[lo, hi]``,
``xi`` lies between the order statistics ``X_(lo)`` and ``X_(hi+1)`` (Howard & Ramdas 2022).

The count's sequence is the beta-binomial mixture: the likelihood ratio of Bernoulli(p) against
Bernoulli(q), averaged over a Beta prior on ``p`` centred at ``q``, is a nonnegative martingale
under the truth, so by Ville's inequality it never reaches ``1/alpha`` with probability at
least ``1 - alpha``. Unlike the proportion sequence this one is exact (nonasymptotic) for any
continuous distribution: no normal approximation, no variance estimate.

The caller reads two order statistics per arm (at ``quantile_ci_ranks``) plus the estimate,
so DuckDB never ships a whole arm to Python.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from warehouse.statistics.boundaries import tuning_constant
from warehouse.statistics.decisions import (
    CONFIDENCE,
    MIN_USERS_WITH_FEEDBACK,
    Comparison,
    WithheldReason,
    check_confidence,
    compared,
    withheld,
)

QUANTILE_DESIGN_USERS = 1_000
"""Users per arm at which the quantile sequence is tightest (the Beta prior's concentration is
set from it with Howard et al.'s tuning rule). Latency has no natural effect unit shared by all
flags, so the sequence is tuned to the sample size at which the proportion sequence also makes
its typical decisions."""


def arm_confidence(confidence: float = CONFIDENCE) -> float:
    """Per-arm level whose union bound gives ``confidence`` for the difference of two arms.

    Every function here takes the *comparison's* level (``CONFIDENCE``, one number for the
    whole health answer) and bounds each arm at this split level itself, so no caller can feed
    95 % arm bounds into what must be a 95 % difference.
    """
    return 1.0 - (1.0 - check_confidence(confidence)) / 2.0


@dataclass(frozen=True, slots=True)
class QuantileSummary:
    """One arm's quantile: its point estimate and always-valid bounds (ms), over ``n`` users.

    ``confidence`` is the comparison level the bounds were computed for (each arm at
    ``arm_confidence(confidence)``); when given, ``compare_quantiles`` checks it matches.
    """

    n: int
    estimate: float | None
    lower: float | None
    upper: float | None
    confidence: float | None = None


def quantile_estimate_rank(n: int, q: float) -> int | None:
    """0-based index of the point estimate: the nearest-rank quantile, ``ceil(q n) - 1``.

    An observed value (no interpolation), so it always lies between the bounds' order
    statistics, and the difference of two arms' estimates always lies in their interval.
    """
    _check_quantile(q)
    if n <= 0:
        return None
    return max(math.ceil(round(q * n, 9)) - 1, 0)


@lru_cache(maxsize=16_384)
def quantile_ci_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """0-based indices into the ascending per-user values bounding the q-quantile.

    ``confidence`` is the level of the comparison the bounds feed: the q-quantile lies in
    ``[values[lower], values[upper]]`` at every ``n`` simultaneously with probability
    ``arm_confidence(confidence)`` (0.975 for 0.95), so two arms' bounds hold together with
    probability ``confidence``. None when ``n`` is too small for both bounds to exist (a p95
    needs 174 users at the default level).
    """
    _check_quantile(q)
    if n < 1:
        return None
    count_range = _count_range(n, q, 1.0 - arm_confidence(confidence))
    if count_range is None:
        return None
    low_count, high_count = count_range
    if low_count < 1 or high_count > n - 1:
        return None
    return low_count - 1, high_count


def _count_range(n: int, q: float, alpha: float) -> tuple[int, int] | None:
    """The counts ``s`` of values below the quantile that the mixture does not reject.

    ``log M_n(s)`` is convex in ``s`` (a sum of log-gamma terms minus a linear one), so the
    accepted counts form an interval around its minimum: three integer bisections find it.
    """
    log_martingale = _beta_binomial_log_martingale(n, q, alpha)
    threshold = math.log(1.0 / alpha)
    lowest = _first(0, n, lambda s: log_martingale(s + 1) >= log_martingale(s))
    if log_martingale(lowest) >= threshold:
        return None
    low = _first(0, lowest, lambda s: log_martingale(s) < threshold)
    high = _first(lowest, n + 1, lambda s: log_martingale(s) >= threshold) - 1
    return low, high


def _beta_binomial_log_martingale(n: int, q: float, alpha: float) -> Callable[[int], float]:
    """``s -> log`` of the Beta-mixed likelihood ratio after ``n`` users with ``s`` below.

    Prior Beta(k q, k (1 - q)), mean ``q``, with ``k + 1 = QUANTILE_DESIGN_USERS /
    tuning_constant(alpha)``: the beta-binomial counterpart of the normal mixture tuned to be
    tightest at the design sample (Howard & Ramdas 2022; Howard et al. 2021).
    """
    k = max(QUANTILE_DESIGN_USERS / tuning_constant(alpha) - 1.0, 1.0)
    a, b = k * q, k * (1.0 - q)
    log_prior = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    log_posterior_total = math.lgamma(a + b + n)
    log_q, log_not_q = math.log(q), math.log1p(-q)

    def log_martingale(s: int) -> float:
        log_marginal = math.lgamma(a + s) + math.lgamma(b + n - s) - log_posterior_total
        return log_marginal - log_prior - s * log_q - (n - s) * log_not_q

    return log_martingale


def _first(low: int, high: int, predicate: Callable[[int], bool]) -> int:
    """Smallest integer in ``[low, high)`` where a monotone predicate holds, else ``high``."""
    while low < high:
        middle = (low + high) // 2
        if predicate(middle):
            high = middle
        else:
            low = middle + 1
    return low


def quantile_summary(
    sorted_values: Sequence[float], q: float, confidence: float = CONFIDENCE
) -> QuantileSummary:
    """One arm's summary from its ascending per-user values (tests and small data)."""
    n = len(sorted_values)
    if any(sorted_values[i] > sorted_values[i + 1] for i in range(n - 1)):
        raise ValueError("sorted_values must be in ascending order")
    rank = quantile_estimate_rank(n, q)
    estimate = None if rank is None else float(sorted_values[rank])
    ranks = quantile_ci_ranks(n, q, confidence)
    if ranks is None:
        return QuantileSummary(n, estimate, None, None, confidence)
    lower, upper = (float(sorted_values[i]) for i in ranks)
    return QuantileSummary(n, estimate, lower, upper, confidence)


def compare_quantiles(
    treatment: QuantileSummary,
    control: QuantileSummary,
    *,
    confidence: float = CONFIDENCE,
    withheld_reason: str | None = None,
) -> Comparison:
    """Treatment minus control of a quantile (ms), always valid; higher is worse.

    Each arm's bounds hold at ``arm_confidence(confidence)``, so both hold together with
    probability ``confidence`` and the true difference lies in
    ``[T.lower - C.upper, T.upper - C.lower]`` at every read. The minimum sample counts the
    users with a latency in each arm.
    """
    for arm in (treatment, control):
        if arm.confidence is not None and not math.isclose(arm.confidence, confidence):
            raise ValueError(f"arm bounds for {arm.confidence}, comparison at {confidence}")
    difference = None
    if treatment.estimate is not None and control.estimate is not None:
        difference = treatment.estimate - control.estimate
    if withheld_reason is not None:
        return withheld(difference, confidence, withheld_reason)
    if min(treatment.n, control.n) < MIN_USERS_WITH_FEEDBACK:
        return withheld(difference, confidence, WithheldReason.BELOW_MINIMUM_SAMPLE)
    bounds = (treatment.lower, treatment.upper, control.lower, control.upper)
    if any(bound is None for bound in bounds):
        return withheld(difference, confidence, WithheldReason.QUANTILE_UNBOUNDED)
    t_lower, t_upper, c_lower, c_upper = bounds
    ci = (t_lower - c_upper, t_upper - c_lower)
    return compared(difference, ci, confidence, higher_is_worse=True)


def _check_quantile(q: float) -> None:
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
