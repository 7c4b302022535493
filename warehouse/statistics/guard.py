"""The guard of a guarded rollout: one one-sided, always-valid sequence per guardrail over the
whole rollout, kept across its steps (contract section 10, "A guard that guards").

A guarded rollout makes two promises, each proven by simulation in docs/statistics.md:

- a release no worse than its control is rolled back with probability at most
  ``ROLLOUT_ERROR_BUDGET`` (5 %): each guardrail's *regression test* gets an equal share,
  ``rollback_alpha`` (a union bound over the guardrails only: the evidence is one sequence per
  guardrail over every step and every read, not one per step);
- a release that regresses a guardrail by at least its tolerance reaches 100 % with probability
  at most ``SAFETY_ALPHA`` (5 %): a step advances only when every guardrail's *safety test*
  has rejected "the regression is at least the tolerance". Only the regressed guardrail's
  test has to go wrong for such a release to pass, so the safety tests need no split.

Both tests are one-sided: only a regression acts, and only its absence lets a step advance.

**Evidence kept across steps.** Each step of the rollout is a stratum (the pipeline's epoch at
that percentage, ``arm_totals``), with its own split. The proportions (failure rate, coverage)
are compared *within* each stratum and the strata combined, so a drift of the rate between
steps (day and night) cannot pass for a difference between the arms:

- the exact part multiplies the strata's universal-inference e-values (Wasserman, Ramdas &
  Balakrishnan 2020; ``exact_proportions``), each one-sided: the maximum likelihood in the
  denominator is taken over the null half only. Each factor is at most a Bayes mixture over
  the truth's likelihood, a nonnegative martingale with mean 1, so their product over
  independent strata is one too, and Ville's inequality bounds the chance it ever crosses
  ``1/alpha``: exact at any count, which is what calls a blatant regression from a few users;
- the normal part adds the strata's score statistics in information time, ``W = sum (d_j -
  delta) / V_j`` over ``I = sum 1 / V_j`` (the variances at the rates restricted to
  ``delta``, Farrington & Manning 1990): under ``delta`` it behaves as Brownian motion in ``I``,
  whatever the split of each step, and the normal mixture bounds it at every read (Robbins
  1970, Howard et al. 2021; one side of the symmetric two-sided boundary at twice the level,
  valid up to half the chance of crossing both sides, of order the level squared).
  A stratum enters it only where its counts support the approximation
  (``proportions.approximation_holds``), as in release health.

The exact part gets ``EXACT_SHARE`` of each test's level and the normal part the rest (a union
bound). The normal mixture's spread is the guardrail's tolerance: its boundary is then
tightest where the evidence needed to show the tolerance lies.

The p95 latency pools each arm's users over the rollout's steps: the two-sample sequence of
``quantiles`` is exact for any arrival order of each arm's users, so a changing split does not
matter, provided each arm's latency distribution stays the same across the steps (stated in
docs/statistics.md). Its two-sided intervals are read one end at a time, which is valid and
conservative.

No minimum sample: the exact part decides where the counts decide, and the normal part only
where its approximation holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike, NDArray

from warehouse.statistics.boundaries import information_for_radius, normal_mixture_radius
from warehouse.statistics.budget import ROLLOUT_ERROR_BUDGET
from warehouse.statistics.exact_proportions import log_likelihood, log_marginal
from warehouse.statistics.proportions import EXACT_SHARE, approximation_holds
from warehouse.statistics.quantiles import ArmCells, quantile_difference_interval
from warehouse.statistics.restricted import restricted_rates

SAFETY_ALPHA = ROLLOUT_ERROR_BUDGET
"""The chance that a release regressing a guardrail by its tolerance reaches 100 %."""

PERCENTAGE_POINTS = 100.0
_BISECTIONS = 50


def rollback_alpha(guardrails: int) -> float:
    """Each guardrail's share of the rollback budget: one test per guardrail for the rollout."""
    return ROLLOUT_ERROR_BUDGET / max(guardrails, 1)


class Status(StrEnum):
    """What a guardrail's evidence shows so far."""

    REGRESSION = "regression"
    SAFE = "safe"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class GuardBound:
    """One guardrail's evidence over the rollout, treatment minus control in its unit.

    ``ci`` is read one end at a time: the end on the worse side is at the safety level (the
    step may advance when it lies within the tolerance), the end on the better side at the
    rollback level (the rollout rolls back when even it lies on the worse side of 0). An end
    may be infinite while the data cannot bound it. ``users_needed``: more users through the
    rule, at the current split, before the worse end would fall within the tolerance if the
    estimate held (None when decided, or when the estimate itself is not within it)."""

    tolerance: float
    difference: float | None
    ci: tuple[float, float]
    status: Status
    treatment_users: int
    control_users: int
    users_needed: int | None


# --- proportions, stratified ----------------------------------------------------------------


def _floats(*arrays: ArrayLike) -> tuple[NDArray[np.float64], ...]:
    return tuple(np.asarray(a, dtype=np.float64) for a in arrays)


def exact_log_evidence(
    x_t: ArrayLike,
    n_t: ArrayLike,
    x_c: ArrayLike,
    n_c: ArrayLike,
    delta: ArrayLike,
    *,
    above: bool,
) -> NDArray[np.float64]:
    """Log of the product over strata (last axis) of one-sided universal-inference e-values
    against the null "the difference is at most ``delta``" (``above``: evidence that it lies
    above) or "at least ``delta``" (evidence that it lies below). Vectorized; ``delta`` is a
    fraction and broadcasts against the strata's leading axes."""
    x_t, n_t, x_c, n_c = _floats(x_t, n_t, x_c, n_c)
    delta = np.asarray(delta, dtype=np.float64)[..., np.newaxis]
    safe_t, safe_c = np.maximum(n_t, 1.0), np.maximum(n_c, 1.0)
    p_t, p_c = x_t / safe_t, x_c / safe_c
    rate_t, rate_c = restricted_rates(p_t, safe_t, p_c, safe_c, np.broadcast_to(delta, p_t.shape))
    in_null = (p_t - p_c <= delta) if above else (p_t - p_c >= delta)
    best_t, best_c = np.where(in_null, p_t, rate_t), np.where(in_null, p_c, rate_c)
    numerator = log_marginal(x_t, n_t) + log_marginal(x_c, n_c)
    denominator = log_likelihood(x_t, n_t, best_t) + log_likelihood(x_c, n_c, best_c)
    return np.sum(numerator - denominator, axis=-1)


def normal_statistic(
    x_t: ArrayLike, n_t: ArrayLike, x_c: ArrayLike, n_c: ArrayLike, delta: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(offset, information)``: the strata's combined estimate of the difference minus
    ``delta`` (``W / I``), and its information ``I``, over the strata whose counts support the
    normal approximation (others add nothing; ``I`` is 0 when none does)."""
    x_t, n_t, x_c, n_c = _floats(x_t, n_t, x_c, n_c)
    delta = np.asarray(delta, dtype=np.float64)[..., np.newaxis]
    present = (n_t > 0) & (n_c > 0)
    safe_t, safe_c = np.where(present, n_t, 1.0), np.where(present, n_c, 1.0)
    p_t, p_c = x_t / safe_t, x_c / safe_c
    rate_t, rate_c = restricted_rates(p_t, safe_t, p_c, safe_c, np.broadcast_to(delta, p_t.shape))
    variance = rate_t * (1.0 - rate_t) / safe_t + rate_c * (1.0 - rate_c) / safe_c
    used = present & approximation_holds(x_t, safe_t, x_c, safe_c) & (variance > 0)
    weight = np.where(used, 1.0 / np.where(used, variance, 1.0), 0.0)
    information = weight.sum(axis=-1)
    score = (weight * (p_t - p_c - delta)).sum(axis=-1)
    offset = np.where(information > 0, score / np.where(information > 0, information, 1.0), 0.0)
    return offset, information


def rejects(
    x_t: ArrayLike,
    n_t: ArrayLike,
    x_c: ArrayLike,
    n_c: ArrayLike,
    delta: ArrayLike,
    *,
    alpha: float,
    above: bool,
    mixing_sd: float,
) -> NDArray[np.bool_]:
    """Whether the guard's one-sided test at level ``alpha`` shows the difference above
    ``delta`` (``above``) or below it: the exact product does at ``EXACT_SHARE * alpha``, or
    the stratified normal mixture does at the rest. Vectorized over leading axes, strata on
    the last; the simulations call exactly this."""
    exact = exact_log_evidence(x_t, n_t, x_c, n_c, delta, above=above)
    exact_rejects = exact >= math.log(1.0 / (EXACT_SHARE * alpha))
    offset, information = normal_statistic(x_t, n_t, x_c, n_c, delta)
    variance = np.where(information > 0, 1.0 / np.where(information > 0, information, 1.0), 0.0)
    radius = normal_mixture_radius(variance, mixing_sd**2, 2.0 * (1.0 - EXACT_SHARE) * alpha)
    shown = offset > radius if above else -offset > radius
    return exact_rejects | ((information > 0) & shown)


@dataclass(frozen=True)
class ProportionStrata:
    """One proportion over the rollout's steps, one entry per step (``events / n``)."""

    treatment_events: tuple[int, ...]
    treatment_n: tuple[int, ...]
    control_events: tuple[int, ...]
    control_n: tuple[int, ...]

    def worse_is_higher(self, higher_is_worse: bool) -> tuple[NDArray[np.float64], ...]:
        """The counts of the side that is worse when higher: a coverage's users *without*
        feedback, so every test below asks one question, "is treatment's rate higher"."""
        counts = _floats(self.treatment_events, self.treatment_n, self.control_events,
                         self.control_n)  # fmt: skip
        if higher_is_worse:
            return counts
        x_t, n_t, x_c, n_c = counts
        return n_t - x_t, n_t, n_c - x_c, n_c


def proportion_guard(
    strata: ProportionStrata,
    tolerance: float,
    *,
    higher_is_worse: bool,
    rollback_level: float,
    safety_level: float = SAFETY_ALPHA,
    current_share: float,
) -> GuardBound:
    """The guard of a proportion (tolerance in percentage points): its status and its interval
    of treatment minus control in percentage points, ends at the two levels (``GuardBound``).
    ``current_share``: the treatment's share at the current step, for ``users_needed``."""
    x_t, n_t, x_c, n_c = strata.worse_is_higher(higher_is_worse)
    tol = tolerance / PERCENTAGE_POINTS
    sign = 1.0 if higher_is_worse else -1.0
    users_t, users_c = int(n_t.sum()), int(n_c.sum())
    if users_t == 0 or users_c == 0:
        infinite = (-math.inf, math.inf)
        needed = None  # nothing seen at all: no rate to plan with
        if users_t + users_c > 0:  # an arm empty yet: plan for no difference at what was seen
            needed = _proportion_users_needed(x_t, n_t, x_c, n_c, 0.0, tol, safety_level,
                                              current_share)  # fmt: skip
        return GuardBound(tolerance, None, infinite, Status.UNDECIDED, users_t, users_c, needed)

    def shown(delta: float, above: bool, alpha: float) -> bool:
        test = rejects(x_t, n_t, x_c, n_c, delta, alpha=alpha, above=above, mixing_sd=tol)
        return bool(test)

    regression = shown(0.0, True, rollback_level)
    safe = not regression and shown(tol, False, safety_level)
    worse_low = _edge(lambda d: shown(d, True, rollback_level), rising=True)
    worse_high = _edge(lambda d: shown(d, False, safety_level), rising=False)
    offset, information = normal_statistic(x_t, n_t, x_c, n_c, 0.0)
    has_information = bool(information > 0)
    estimate = _stratified_estimate(x_t, n_t, x_c, n_c, float(offset), has_information)
    status = Status.REGRESSION if regression else Status.SAFE if safe else Status.UNDECIDED
    needed = None
    if status is Status.UNDECIDED:
        planned = estimate if has_information else 0.0  # a handful of users estimates nothing
        needed = _proportion_users_needed(x_t, n_t, x_c, n_c, planned, tol, safety_level,
                                          current_share)  # fmt: skip
    ends = (sign * worse_low, sign * worse_high)
    ci = (PERCENTAGE_POINTS * min(ends), PERCENTAGE_POINTS * max(ends))
    difference = PERCENTAGE_POINTS * sign * estimate + 0.0  # never -0
    return GuardBound(tolerance, difference, ci, status, users_t, users_c, needed)


def _stratified_estimate(x_t, n_t, x_c, n_c, offset: float, has_information: bool) -> float:
    """The combined difference: the normal part's (``offset``) where it has information, else
    the pooled within-stratum differences weighted by the strata's sizes."""
    if has_information:
        return offset
    present = (n_t > 0) & (n_c > 0)
    weights = np.where(present, n_t * n_c / np.maximum(n_t + n_c, 1.0), 0.0)
    if weights.sum() == 0:
        return 0.0
    differences = np.where(present, x_t / np.maximum(n_t, 1) - x_c / np.maximum(n_c, 1), 0.0)
    return float((weights * differences).sum() / weights.sum())


def _edge(excluded, *, rising: bool) -> float:
    """The boundary of the differences a one-sided test excludes, as a fraction: ``rising``
    tests exclude everything below some point (a lower bound), the others everything above
    (an upper bound). Bisection on [-1, 1]; an end nothing excludes is infinite."""
    low, high = -1.0, 1.0
    if rising:
        if not excluded(low):
            return -math.inf
        if excluded(high):
            return high
    else:
        if not excluded(high):
            return math.inf
        if excluded(low):
            return low
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2.0
        if excluded(middle) == rising:
            low = middle
        else:
            high = middle
    return low if not rising else high


def _proportion_users_needed(x_t, n_t, x_c, n_c, estimate, tol, alpha, share) -> int | None:
    """Users still needed at the current split before the safety test could pass, were
    ``estimate`` to hold (the caller passes 0 while the counts are too thin for the normal
    part, which this arithmetic rests on): the information the normal boundary needs for a radius of
    ``tol - estimate``, less what the strata hold, both taken at the rates the test assumes
    (the pooled rate, at least one event in what was seen, moved apart by the tolerance),
    at ``1 / (p_T (1 - p_T) / s + p_C (1 - p_C) / (1 - s))`` per user at the split ``s``."""
    room = tol - estimate
    if room <= 0 or not 0.0 < share < 1.0:
        return None
    events, seen = float(x_t.sum() + x_c.sum()), float(n_t.sum() + n_c.sum())
    pooled = min(max(events, 1.0) / max(seen, 1.0), 0.5)
    rate_t = min(max(pooled + (1.0 - share) * tol, 1e-9), 1.0 - 1e-9)
    rate_c = min(max(pooled - share * tol, 1e-9), 1.0 - 1e-9)
    _, information = normal_statistic(x_t, n_t, x_c, n_c, tol)
    wanted = information_for_radius(room, tol**2, 2.0 * (1.0 - EXACT_SHARE) * alpha)
    per_user = 1.0 / (rate_t * (1.0 - rate_t) / share + rate_c * (1.0 - rate_c) / (1.0 - share))
    return max(math.ceil((wanted - float(information)) / per_user), 1)


# --- p95 latency, pooled ----------------------------------------------------------------------


def quantile_guard(
    treatment: ArmCells,
    control: ArmCells,
    q: float,
    tolerance: float,
    *,
    rollback_level: float,
    safety_level: float = SAFETY_ALPHA,
    current_share: float,
) -> GuardBound:
    """The guard of a quantile (tolerance in ms): each arm's users pooled over the rollout's
    steps, read with ``quantiles``' two-sample sequence, one end at each level."""
    n_t, n_c = treatment.n, control.n
    difference = None
    if treatment.estimate is not None and control.estimate is not None:
        difference = treatment.estimate - control.estimate
    if n_t == 0 or n_c == 0:
        infinite = (-math.inf, math.inf)
        needed = _planned_quantile_users(treatment, control, q, tolerance, safety_level,
                                         current_share)  # fmt: skip
        return GuardBound(tolerance, difference, infinite, Status.UNDECIDED, n_t, n_c, needed)
    low, _ = quantile_difference_interval(treatment, control, q, 1.0 - rollback_level)
    _, high = quantile_difference_interval(treatment, control, q, 1.0 - safety_level)
    if low > 0:
        status = Status.REGRESSION
    elif high < tolerance:
        status = Status.SAFE
    else:
        status = Status.UNDECIDED
    needed = None
    if status is Status.UNDECIDED:
        needed = _planned_quantile_users(treatment, control, q, tolerance, safety_level,
                                         current_share)  # fmt: skip
    return GuardBound(tolerance, difference, (low, high), status, n_t, n_c, needed)


_PLAN_LIMIT = 10_000_000
"""The most users a quantile's plan looks for; beyond, it gives no estimate."""


def _planned_quantile_users(
    treatment: ArmCells,
    control: ArmCells,
    q: float,
    tolerance: float,
    alpha: float,
    share: float,
) -> int | None:
    """Users still needed at the current split for the upper end to come within the
    tolerance, were each arm's next users to look like the users it has (an arm without any
    yet, the treatment at a step's start, like the control: planning for no difference): the
    fewest more users, found by doubling then bisection, for which the sequence's upper end at
    ``alpha`` on arms of ``n_T + k s`` and ``n_C + k (1 - s)`` users, each its own distribution
    scaled, falls below the tolerance. The sequence's ends are set by the sparse values around
    the quantile, so a width shrinking like one over the square root of the users misjudges
    small arms by orders of magnitude; the plan reads the sequence itself. None without a
    control user, at a split of 0 or 100 %, or beyond ``_PLAN_LIMIT``."""
    if control.n == 0 or control.estimate is None or not 0.0 < share < 1.0:
        return None
    model = treatment if treatment.n > 0 and treatment.estimate is not None else control

    def scaled(arm: ArmCells, users: float) -> ArmCells:
        """``users`` spread over the arm's cells in its proportions (rounded on the running
        total, so none is lost however fine the cells)."""
        running = np.round(np.cumsum(arm.counts) / arm.n * round(users)).astype(np.int64)
        return ArmCells(arm.lower, arm.upper, np.diff(running, prepend=0), arm.estimate)

    def within(more: int) -> bool:
        arms = (scaled(model, treatment.n + more * share),
                scaled(control, control.n + more * (1.0 - share)))  # fmt: skip
        _, high = quantile_difference_interval(*arms, q, 1.0 - alpha)
        return high < tolerance

    if treatment.n > 0 and not within(_PLAN_LIMIT):
        return None  # its own estimate beyond the tolerance: no number of users shows it within
    low, high = 0, 1
    while not within(high):
        low, high = high, high * 2
        if high > _PLAN_LIMIT:
            return None
    while high - low > max(1, high // 100):  # to 1 %: an estimate, not a promise
        middle = (low + high) // 2
        low, high = (low, middle) if within(middle) else (middle, high)
    return high


def strata_of(
    treatment_events: Sequence[int],
    treatment_n: Sequence[int],
    control_events: Sequence[int],
    control_n: Sequence[int],
) -> ProportionStrata:
    """``ProportionStrata`` from per-step sequences (the pipeline's reading)."""
    return ProportionStrata(
        tuple(map(int, treatment_events)), tuple(map(int, treatment_n)),
        tuple(map(int, control_events)), tuple(map(int, control_n)),
    )  # fmt: skip
