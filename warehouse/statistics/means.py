"""Always-valid comparison of per-user means: the count, sum and mean metrics (contract 13).

Per user, ``y`` is the metric's numerator (how many events, or the sum of their values), ``d``
its denominator (the user's event count for kind "mean", else 1) and ``x`` the same metric's
value in the 7 days before the user's first exposure (0 when none). Each arm is summarised by
its sufficient statistics (``MeanMoments``, one SQL aggregate each), so the warehouse sends
ten numbers per arm, never a row per user.

**The interval.** Treatment minus control of the arm means (count, sum) or of the arms' ratios
of sums ``sum(y) / sum(d)`` (kind "mean", linearised by the delta method: a user contributes
``(y - R d) / mean(d)``), with the plug-in variance ``s_T^2 / n_T + s_C^2 / n_C`` of the
users' (linearised) values, bounded by the two-sided normal mixture
(``boundaries.normal_mixture_radius``) at every read. With the mixture's spread a fixed
multiple of the per-user standard deviation this is the Gaussian-mixture asymptotic confidence
sequence of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (2024, arXiv:2103.06476), whose
theory covers exactly this: averages of independent per-user (influence) values, regression
adjusted ones included, in a randomized experiment.

**What it assumes.** Users independent, each arm a random sample of the exposed users (the
bucket), the per-user values of **finite variance**, and enough users for the plug-in variance
to have converged: the guarantee is asymptotic (coverage tends to the nominal level as the
users grow), not exact. Heavy tails (revenue: most users spend nothing, a few spend a lot) slow
that convergence, which is what ``MIN_USERS_FOR_MEANS``, ``MIN_CARRYING_USERS`` and the
refusal of an arm without spread protect, and what the simulations measure on log-normal and
zero-inflated log-normal values (docs/statistics.md, "Metrics: conversion, count, sum, mean").
No exact sequence backs it up as one does for proportions: for values with no known bound,
none can exist (Bahadur & Savage 1956: no non-trivial interval for a mean holds over every
distribution of finite variance).

**Variance reduction** (CUPED, Deng, Xu, Kohavi & Walker 2013): the difference is adjusted by
``theta`` times the arms' difference of pre-exposure means, which randomization makes 0 in
expectation, so the estimate stays unbiased for any fixed ``theta`` and its variance is that of
``v - theta x``. ``theta`` is estimated from both arms pooled: the within-arm slope of ``v`` on
``x`` that makes the difference's variance least, each arm weighted by its share of that
variance (Deng et al.'s pooled slope when the arms are equal). The adjustment therefore never
widens the interval; an ``x`` that carries nothing leaves it as it was (``variance_reduction``
0). Estimating ``theta`` from the data costs nothing asymptotically (it converges, and the
asymptotic sequence needs only the variance estimate to converge), as for the anytime-valid
regression adjustment of Lindon, Ham, Tingley & Bojinov (2022, arXiv:2210.08589).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
from flagsight_core.contract import WithheldReason
from numpy.typing import ArrayLike, NDArray

from warehouse.statistics.boundaries import information_for_radius, normal_mixture_radius
from warehouse.statistics.decisions import (
    CONFIDENCE,
    Comparison,
    check_confidence,
    compared,
    withheld,
)
from warehouse.statistics.guard import SAFETY_ALPHA, GuardBound, Status

MIN_USERS_FOR_MEANS = 500
"""Per arm; below it a mean's decision is withheld (contract 9 allows at most 1,000).

Larger than the proportions' 200 because a mean has no exact sequence to fall back on and its
values are skewed: with 100 or 200 users per arm the simulated order-value ratio in a 10 % arm
made false decisions in 5.2 % of experiments; from 500 every simulated kind stayed at 2.8 % or
under (docs/statistics.md, "Metrics (measured)", the table by minimum)."""

MIN_USERS_PER_STRATUM = MIN_USERS_FOR_MEANS
"""Per arm, before a rollout's step enters its metric guardrail's evidence: the step is
weighted by its own plug-in variance, which needs the same convergence as a comparison's."""

MIN_CARRYING_USERS = 30.0
"""The normal approximation is read only once the smaller arm has this many users carrying the
metric (``carrying_users``): without it, zero-inflated revenue in a 10 % arm made false
decisions in 6.2 % of simulated experiments at 500 users per arm; with it, 1.6 % at any minimum
(the classical 30 observations of a normal approximation, counted in users who carry it)."""

MEAN_MIXING_SD = 0.1
"""Spread of the normal mixture over the difference, in standard deviations of the per-user
value (pooled within arms): the mixture is tightest where a difference of a tenth of a
standard deviation can be shown, about 1,600 users per arm at 95 % (``tuning_constant``).
Simulated, it is the best spread for that difference: 2,750 users per arm for 80 % power,
against 2,900 and 2,950 at 0.05 and 0.2 (docs/statistics.md). A guard uses the guardrail's
tolerance instead, as for proportions."""

MOMENT_COLUMNS = (
    "count(*)",
    "sum(y)",
    "sum(d)",
    "sum(x)",
    "sum(y * y)",
    "sum(d * d)",
    "sum(x * x)",
    "sum(y * d)",
    "sum(y * x)",
    "sum(d * x)",
)
"""The SQL aggregates of one arm's ``MeanMoments``, in field order, over columns ``y``, ``d``
and ``x`` (``MeanMoments.from_row`` reads them back)."""


@dataclass(frozen=True)
class MeanMoments:
    """One arm's per-user sufficient statistics: the users and the sums of ``y``, ``d``, ``x``
    and of their squares and products. The vectorized functions below take fields that are
    arrays too (one entry per simulated experiment, or per read)."""

    n: int
    y: float = 0.0
    d: float = 0.0
    x: float = 0.0
    yy: float = 0.0
    dd: float = 0.0
    xx: float = 0.0
    yd: float = 0.0
    yx: float = 0.0
    dx: float = 0.0

    @classmethod
    def of(
        cls, y: ArrayLike, d: ArrayLike | None = None, x: ArrayLike | None = None
    ) -> MeanMoments:
        """The moments of per-user values (``d`` defaults to 1 per user, ``x`` to 0)."""
        y = np.asarray(y, dtype=np.float64)
        d = np.ones_like(y) if d is None else np.asarray(d, dtype=np.float64)
        x = np.zeros_like(y) if x is None else np.asarray(x, dtype=np.float64)
        products = (y, d, x, y * y, d * d, x * x, y * d, y * x, d * x)
        return cls(y.size, *(float(p.sum()) for p in products))

    @classmethod
    def from_row(cls, row: tuple) -> MeanMoments:
        """The moments from ``MOMENT_COLUMNS``' values (a sum over no rows is NULL: 0)."""
        n, *sums = row
        return cls(int(n), *(float(s or 0.0) for s in sums))

    def __add__(self, other: MeanMoments) -> MeanMoments:
        """The moments of both groups of users together (pooling strata, or batches)."""
        return MeanMoments(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


@dataclass(frozen=True)
class MeanComparison(Comparison):
    """``Comparison`` of a count, sum or mean metric, with each arm's mean and how much the
    pre-exposure adjustment narrowed the interval.

    ``treatment_mean`` and ``control_mean`` are the arms' plain means (per user, or the ratio
    of sums); ``difference`` is the estimate the interval is centred on: with the adjustment,
    their difference corrected for the arms' chance difference in pre-exposure values.
    ``variance_reduction`` is ``1 - adjusted radius / unadjusted radius`` (0 when ``x``
    carries nothing or ``adjust`` is off; None when withheld)."""

    treatment_mean: float | None = None
    control_mean: float | None = None
    variance_reduction: float | None = None


class Estimate(NamedTuple):
    """Treatment minus control and what its interval needs; arrays broadcast like the
    moments. ``readable``: enough users and enough carrying the metric, a ratio's
    denominators positive and spread in both arms, so the approximation may be read."""

    difference: NDArray[np.float64]
    variance: NDArray[np.float64]
    spread: NDArray[np.float64]
    readable: NDArray[np.bool_]
    per_user: tuple[NDArray[np.float64], NDArray[np.float64]]  # each arm's s^2, adjusted


class _Arm(NamedTuple):
    """One arm's estimate and the centred sums of its per-user value ``v`` and of ``x``."""

    n: NDArray[np.float64]
    estimate: NDArray[np.float64]
    x_mean: NDArray[np.float64]
    vv: NDArray[np.float64]
    vx: NDArray[np.float64]
    xx: NDArray[np.float64]
    defined: NDArray[np.bool_]


def _arm(m: MeanMoments, ratio: bool) -> _Arm:
    n, y, d, x, yy, dd, xx, yd, yx, dx = (
        np.asarray(getattr(m, f.name), dtype=np.float64) for f in fields(m)
    )
    safe_n = np.maximum(n, 1.0)
    s_yy, s_dd, s_xx = yy - y * y / safe_n, dd - d * d / safe_n, xx - x * x / safe_n
    s_yd, s_yx, s_dx = yd - y * d / safe_n, yx - y * x / safe_n, dx - d * x / safe_n
    if not ratio:
        return _Arm(n, y / safe_n, x / safe_n, s_yy, s_yx, s_xx, n > 0)
    defined = d > 0
    rate = y / np.where(defined, d, 1.0)
    d_mean = np.where(defined, d / safe_n, 1.0)
    vv = (s_yy - 2.0 * rate * s_yd + rate * rate * s_dd) / (d_mean * d_mean)
    vx = (s_yx - rate * s_dx) / d_mean
    return _Arm(n, rate, x / safe_n, vv, vx, s_xx, (n > 0) & defined)


def estimate_difference(
    treatment: MeanMoments,
    control: MeanMoments,
    *,
    ratio: bool,
    adjust: bool = True,
    minimum: int = MIN_USERS_FOR_MEANS,
) -> Estimate:
    """Treatment minus control of the arm means (or, ``ratio``, of the ratios of sums), with
    its plug-in variance and the pooled per-user standard deviation that scales the mixture;
    adjusted for the pre-exposure value when ``adjust``. Vectorized: the simulations read
    thousands of experiments with exactly the rule ``compare_means`` applies."""
    t, c = _arm(treatment, ratio), _arm(control, ratio)
    # Each arm's weight in the variance of the difference: 1 / (n (n - 1)) per centred sum.
    w_t, w_c = (1.0 / np.maximum(a.n * (a.n - 1.0), 1.0) for a in (t, c))
    theta = np.zeros_like(t.estimate)
    if adjust:
        covariance = w_t * t.vx + w_c * c.vx
        variance_x = w_t * t.xx + w_c * c.xx
        informative = variance_x > 0
        theta = np.where(informative, covariance / np.where(informative, variance_x, 1.0), 0.0)
    residual_t = np.maximum(t.vv - 2.0 * theta * t.vx + theta * theta * t.xx, 0.0)
    residual_c = np.maximum(c.vv - 2.0 * theta * c.vx + theta * theta * c.xx, 0.0)
    difference = t.estimate - c.estimate - theta * (t.x_mean - c.x_mean)
    variance = w_t * residual_t + w_c * residual_c
    degrees = np.maximum(t.n + c.n - 2.0, 1.0)
    spread = np.sqrt((residual_t + residual_c) / degrees)
    per_user = tuple(r / np.maximum(a.n - 1.0, 1.0) for r, a in ((residual_t, t), (residual_c, c)))
    readable = (
        (np.minimum(t.n, c.n) >= minimum)
        & (carrying_users(treatment, control) >= MIN_CARRYING_USERS)
        & t.defined
        & c.defined
        & (t.vv > 0)
        & (c.vv > 0)
        & (variance > 0)
    )
    return Estimate(difference, variance, spread, readable, per_user)


def carrying_users(treatment: MeanMoments, control: MeanMoments) -> NDArray[np.float64]:
    """How many users of the smaller arm carry the metric: its users times the share
    ``sum(y)^2 / (n sum(y^2))`` of both arms pooled (Kish's effective sample size of the
    values; for 0/1 values exactly the expected events, for revenue roughly the buyers
    discounted by the spread of their baskets). The skewness of an arm's mean falls like one
    over its square root, so it gates the normal approximation as expected events gate the
    proportions'. It does not depend on the difference tested."""
    n_t, n_c = (np.asarray(m.n, dtype=np.float64) for m in (treatment, control))
    y = np.asarray(treatment.y, dtype=np.float64) + np.asarray(control.y, dtype=np.float64)
    yy = np.asarray(treatment.yy, dtype=np.float64) + np.asarray(control.yy, dtype=np.float64)
    n = n_t + n_c
    some = (yy > 0) & (n > 0)
    share = np.where(some, y * y / np.where(some, n * yy, 1.0), 0.0)
    return np.minimum(n_t, n_c) * share


def radius(estimate: Estimate, alpha: float, mixing_sd: float = MEAN_MIXING_SD) -> NDArray:
    """The half-width of the two-sided sequence at ``alpha``, the mixture's spread
    ``mixing_sd`` pooled standard deviations (Waudby-Smith et al.'s asymptotic sequence)."""
    spread = np.where(estimate.spread > 0, estimate.spread, 1.0)
    return normal_mixture_radius(estimate.variance, (mixing_sd * spread) ** 2, alpha)


class MeansComparison(NamedTuple):
    """One comparison of a count, sum or mean metric (``compare_means``' arguments)."""

    treatment: MeanMoments
    control: MeanMoments
    ratio: bool
    higher_is_better: bool
    withheld_reason: str | None = None


def compare_means(
    treatment: MeanMoments,
    control: MeanMoments,
    *,
    ratio: bool,
    higher_is_better: bool,
    confidence: float = CONFIDENCE,
    adjust: bool = True,
    withheld_reason: str | None = None,
) -> MeanComparison:
    """Treatment minus control of a count or sum per user, or (``ratio``, kind "mean") of
    ``sum(y) / sum(d)``, in the metric's unit: a two-sided always-valid interval at
    ``confidence`` and the decision of ``decisions``' one rule, a worse difference being a
    regression. Withheld (``WithheldReason.BELOW_MINIMUM_SAMPLE``) below
    ``MIN_USERS_FOR_MEANS`` users in an arm or ``MIN_CARRYING_USERS`` carrying the metric,
    when an arm's ratio has no events, or when an arm shows no spread yet (every user the same
    value: its variance says nothing)."""
    request = MeansComparison(treatment, control, ratio, higher_is_better, withheld_reason)
    [answer] = compare_all_means([request], confidence=confidence, adjust=adjust)
    return answer


def compare_all_means(
    requests: Sequence[MeansComparison], *, confidence: float = CONFIDENCE, adjust: bool = True
) -> list[MeanComparison]:
    """``compare_means`` of each request, in order, the arithmetic of those of one kind (plain
    or ratio) in one vectorized pass: a run compares every followed metric of every flag
    environment."""
    alpha = 1.0 - check_confidence(confidence)
    answers: list[MeanComparison | None] = [None] * len(requests)
    for ratio in (False, True):
        chosen = [i for i, r in enumerate(requests) if r.ratio is ratio]
        if not chosen:
            continue
        treatment = stacked([requests[i].treatment for i in chosen])
        control = stacked([requests[i].control for i in chosen])
        arms = [_arm(arm, ratio) for arm in (treatment, control)]
        estimate = estimate_difference(treatment, control, ratio=ratio, adjust=adjust)
        plain = estimate_difference(treatment, control, ratio=ratio, adjust=False)
        half = radius(estimate, alpha)
        unadjusted = np.where(plain.readable, radius(plain, alpha), np.nan)
        for j, i in enumerate(chosen):
            answers[i] = _mean_answer(
                requests[i], arms, estimate, j, float(half[j]), float(unadjusted[j]), confidence
            )
    return [answer for answer in answers if answer is not None]


def _mean_answer(
    request: MeansComparison,
    arms: list[_Arm],
    estimate: Estimate,
    j: int,
    half: float,
    unadjusted: float,
    confidence: float,
) -> MeanComparison:
    """Element ``j`` of a vectorized pass as ``compare_means`` answers it."""
    treatment_mean, control_mean = (
        float(arm.estimate[j]) if bool(arm.defined[j]) else None for arm in arms
    )
    difference = None
    if treatment_mean is not None and control_mean is not None:
        difference = float(estimate.difference[j]) + 0.0  # never -0
    extra = {"treatment_mean": treatment_mean, "control_mean": control_mean}
    withheld_reason = request.withheld_reason
    if withheld_reason is None and not bool(estimate.readable[j]):
        withheld_reason = WithheldReason.BELOW_MINIMUM_SAMPLE
    if withheld_reason is not None:
        answer = withheld(difference, confidence, withheld_reason)
        return MeanComparison(**_fields_of(answer), **extra)
    assert difference is not None  # readable: both arms' means are defined
    ci = (difference - half, difference + half)
    answer = compared(difference, ci, confidence, higher_is_worse=not request.higher_is_better)
    reduction = 1.0 - half / unadjusted if unadjusted > 0 else None
    return MeanComparison(**_fields_of(answer), **extra, variance_reduction=reduction)


def _fields_of(comparison: Comparison) -> dict:
    return {f.name: getattr(comparison, f.name) for f in fields(Comparison)}


# --- the guard of a guarded rollout ---------------------------------------------------------


def stacked(moments: Sequence[MeanMoments]) -> MeanMoments:
    """One ``MeanMoments`` whose fields are arrays, one entry per element (the strata)."""
    return MeanMoments(
        *(
            np.array([getattr(m, f.name) for m in moments], dtype=np.float64)
            for f in fields(MeanMoments)
        )
    )


def stratified_difference(
    treatment: MeanMoments, control: MeanMoments, *, ratio: bool
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(estimate, information)``: the strata's adjusted differences (strata on the last axis
    of the moments' arrays) combined in information time, ``sum(d_j / V_j) / I`` with
    ``I = sum(1 / V_j)``, over the strata that may be read (others add nothing; ``I`` is 0
    when none may). Vectorized over leading axes; the simulations call exactly this."""
    e = estimate_difference(treatment, control, ratio=ratio, minimum=MIN_USERS_PER_STRATUM)
    weight = np.where(e.readable, 1.0 / np.where(e.readable, e.variance, 1.0), 0.0)
    information = weight.sum(axis=-1)
    score = (weight * np.where(e.readable, e.difference, 0.0)).sum(axis=-1)
    some = information > 0
    return np.where(some, score / np.where(some, information, 1.0), 0.0), information


def guard_ends(
    worse: ArrayLike,
    information: ArrayLike,
    tolerance: float,
    *,
    rollback_level: float,
    safety_level: float = SAFETY_ALPHA,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The two one-sided bounds on the difference oriented so that higher is worse: the lower
    at ``rollback_level`` (a regression when above 0), the upper at ``safety_level`` (safe
    when below the tolerance). Each is one side of the two-sided mixture at twice its level,
    its spread the tolerance; infinite without information."""
    worse, information = (np.asarray(a, dtype=np.float64) for a in (worse, information))
    some = information > 0
    variance = np.where(some, 1.0 / np.where(some, information, 1.0), 0.0)
    tau2 = tolerance * tolerance
    low = worse - normal_mixture_radius(variance, tau2, 2.0 * rollback_level)
    high = worse + normal_mixture_radius(variance, tau2, 2.0 * safety_level)
    return np.where(some, low, -np.inf), np.where(some, high, np.inf)


def mean_guard(
    strata: Sequence[tuple[MeanMoments, MeanMoments]],
    tolerance: float,
    *,
    higher_is_worse: bool,
    ratio: bool,
    rollback_level: float,
    safety_level: float = SAFETY_ALPHA,
    current_share: float,
) -> GuardBound:
    """The guard of a count, sum or mean metric over the rollout's steps, one ``(treatment,
    control)`` stratum per step (tolerance in the metric's unit): its status, and its interval
    of treatment minus control, ends at the two levels (``guard.GuardBound``).

    As the proportions' normal part (``guard``): each step compared within itself, adjusted
    for the pre-exposure value, and the steps combined in information time, so a metric that
    drifts between steps (a night step, a day step) cannot pass for a difference between the
    arms; one-sided tests, each one side of the two-sided normal mixture at twice its level,
    the mixture's spread the tolerance. A step enters once both its arms have
    ``MIN_USERS_PER_STRATUM`` users and spread (the plug-in variance it is weighted by must
    have converged). No exact part: for values with no known bound none can exist (see the
    module's docstring), so unlike a proportion a blatant regression is called only once a
    step has entered."""
    if tolerance <= 0.0:
        raise ValueError(f"tolerance must be positive, got {tolerance!r}")
    treatment, control = (stacked([pair[i] for pair in strata]) for i in (0, 1))
    users_t, users_c = int(np.sum(treatment.n)), int(np.sum(control.n))
    estimate, information = stratified_difference(treatment, control, ratio=ratio)
    sign = 1.0 if higher_is_worse else -1.0
    low, high = guard_ends(sign * estimate, information, tolerance, rollback_level=rollback_level,
                           safety_level=safety_level)  # fmt: skip
    worse_low, worse_high = float(low), float(high)
    status = Status.UNDECIDED
    if worse_low > 0:
        status = Status.REGRESSION
    elif worse_high < tolerance:
        status = Status.SAFE
    has_information = bool(information > 0)
    difference = float(estimate) + 0.0 if has_information else _pooled_difference(strata, ratio)
    needed = None
    if status is Status.UNDECIDED:
        planned = sign * difference if has_information and difference is not None else 0.0
        needed = _users_needed(strata, ratio, planned, float(information), tolerance,
                               safety_level, current_share)  # fmt: skip
    ends = (sign * worse_low, sign * worse_high)
    return GuardBound(tolerance, difference, (min(ends), max(ends)), status, users_t, users_c,
                      needed)  # fmt: skip


def _pooled_difference(
    strata: Sequence[tuple[MeanMoments, MeanMoments]], ratio: bool
) -> float | None:
    """Before any step may be read: the plain difference of the arms pooled over the steps,
    a description only (None while an arm has no users, or a ratio no events)."""
    if not strata:
        return None
    treatment, control = (sum((pair[i] for pair in strata[1:]), strata[0][i]) for i in (0, 1))
    t, c = _arm(treatment, ratio), _arm(control, ratio)
    if not (bool(t.defined) and bool(c.defined)):
        return None
    return float(t.estimate - c.estimate) + 0.0


def _users_needed(strata, ratio, estimate, information, tolerance, alpha, share) -> int | None:
    """Users still needed at the current split before the safety test could pass, were
    ``estimate`` (oriented worse-is-higher) to hold: the information the boundary needs for a
    radius of ``tolerance - estimate``, less what the steps hold, at the per-user information
    ``1 / (s_T^2 / s + s_C^2 / (1 - s))`` of the arms pooled over the steps; and at least what
    brings the current step to ``MIN_USERS_PER_STRATUM`` in both arms."""
    room = tolerance - estimate
    if room <= 0 or not 0.0 < share < 1.0 or not strata:
        return None
    treatment, control = (sum((pair[i] for pair in strata[1:]), strata[0][i]) for i in (0, 1))
    pooled = estimate_difference(treatment, control, ratio=ratio, minimum=2)
    variance_t, variance_c = (float(v) for v in pooled.per_user)
    if not bool(pooled.readable) or variance_t <= 0 or variance_c <= 0:
        return None
    wanted = information_for_radius(room, tolerance * tolerance, 2.0 * alpha)
    per_user = 1.0 / (variance_t / share + variance_c / (1.0 - share))
    needed = max(math.ceil((wanted - information) / per_user), 1)
    current_t, current_c = strata[-1][0].n, strata[-1][1].n
    to_enter = max((MIN_USERS_PER_STRATUM - current_t) / share,
                   (MIN_USERS_PER_STRATUM - current_c) / (1.0 - share), 0.0)  # fmt: skip
    return max(needed, math.ceil(to_enter))
