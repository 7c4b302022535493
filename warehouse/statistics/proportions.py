"""Always-valid comparison of two proportions: failure rate and coverage, per user.

The interval is a confidence sequence for ``p_T - p_C`` at every read, the intersection of two
sequences that split the comparison's error ``alpha`` between them:

- **exact** (``exact_proportions``, a fifth of ``alpha``): universal inference, valid at any
  rate and any count, with no approximation; it carries the decisions on rare outcomes;
- **normal mixture** (the rest): the set of differences ``delta`` that the normal-mixture
  sequential test (``boundaries.normal_mixture_radius``) does not reject, the variance of the
  estimated difference computed *under the hypothesis being tested* (the restricted
  maximum-likelihood rates, Farrington & Manning 1990, Miettinen & Nurminen 1985): the
  score-type interval made sequential. It is asymptotically valid (Waudby-Smith, Arbour,
  Sinha, Kennedy & Ramdas 2024) and sharper for common outcomes, so it may decide only where
  the counts support its approximation: at the pooled rate, every arm expects at least
  ``MIN_EXPECTED_EVENTS`` events and as many non-events (the classical condition for the
  normal approximation of a binomial).

Each sequence holds at every read with probability at least ``1 - its share``, so their
intersection holds with probability at least ``1 - alpha`` (a union bound). The plain plug-in
(Wald) variance was measured and rejected: an arm with few or no events gets a tiny variance
(docs/statistics.md, "Minimum sample").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from flagsight_core.contract import WithheldReason
from numpy.typing import ArrayLike, NDArray

from warehouse.statistics.boundaries import normal_mixture_radius
from warehouse.statistics.decisions import (
    CONFIDENCE,
    MIN_USERS_WITH_FEEDBACK,
    Comparison,
    check_confidence,
    compared,
    withheld,
)
from warehouse.statistics.exact_proportions import excluded_at
from warehouse.statistics.restricted import restricted_rates

MIXING_SD = 0.05
"""Spread of the normal mixture over the difference, as a fraction (5 percentage points).

It is the size of effect release health exists for (a failure rate going from 5 % to 10 %),
and simulation puts it among the best spreads for that effect: the users per arm needed for
80 % power are 835, 766, 745, 747, 761 and 800 for spreads of 2, 3, 4, 5, 7 and 10 points
(docs/statistics.md, ``python -m tests.warehouse.test_statistics_simulation mixing``). A
guarded rollout's guard uses the guardrail's tolerance instead (``guard``).
"""

EXACT_SHARE = 0.2
"""The share of a comparison's ``alpha`` spent on the exact sequence (the rest goes to the
normal mixture): enough for the exact sequence to call blatant regressions on a handful of
events, little enough that common outcomes keep the normal mixture's power."""

MIN_EXPECTED_EVENTS = 10.0
"""The normal mixture decides only when, at the pooled rate, each arm expects at least this
many events and this many non-events; below it the exact sequence alone decides."""

PERCENTAGE_POINTS = 100.0
_GRID = 64
_REFINEMENTS = 7  # 64**7 ~ 4e12: the 2-wide bracket shrinks below 1e-12
Excluded = Callable[[NDArray[np.float64]], NDArray[np.bool_]]


def approximation_holds(
    treatment_events: ArrayLike,
    treatment_n: ArrayLike,
    control_events: ArrayLike,
    control_n: ArrayLike,
) -> NDArray[np.bool_]:
    """Whether the counts support the normal mixture's Gaussian approximation: at the pooled
    rate, each arm expects ``MIN_EXPECTED_EVENTS`` events and as many non-events. It does not
    depend on the difference tested, so the interval stays an interval."""
    x_t, n_t, x_c, n_c = (
        np.asarray(a, dtype=np.float64)
        for a in (treatment_events, treatment_n, control_events, control_n)
    )
    pooled = (x_t + x_c) / (n_t + n_c)
    rarer = np.minimum(pooled, 1.0 - pooled)
    return np.minimum(n_t, n_c) * rarer >= MIN_EXPECTED_EVENTS


def normal_excludes(
    treatment_events: ArrayLike,
    treatment_n: ArrayLike,
    control_events: ArrayLike,
    control_n: ArrayLike,
    delta: ArrayLike,
    *,
    alpha: float,
    mixing_sd: float = MIXING_SD,
) -> NDArray[np.bool_]:
    """Whether the normal-mixture sequence at level ``alpha`` excludes ``delta`` (a fraction),
    its variance taken at the rates restricted to ``delta``."""
    x_t, n_t, x_c, n_c = _as_floats(treatment_events, treatment_n, control_events, control_n)
    rate_t, rate_c = restricted_rates(x_t / n_t, n_t, x_c / n_c, n_c, delta)
    return _normal_excluded_at(x_t, n_t, x_c, n_c, rate_t, rate_c, delta, alpha, mixing_sd)


def _normal_excluded_at(x_t, n_t, x_c, n_c, rate_t, rate_c, delta, alpha, mixing_sd):
    variance = rate_t * (1.0 - rate_t) / n_t + rate_c * (1.0 - rate_c) / n_c
    radius = normal_mixture_radius(variance, mixing_sd * mixing_sd, alpha)
    return np.abs(x_t / n_t - x_c / n_c - np.asarray(delta, dtype=np.float64)) > radius


def _as_floats(*arrays: ArrayLike) -> tuple[NDArray[np.float64], ...]:
    return tuple(np.asarray(a, dtype=np.float64) for a in arrays)


def excludes_difference(
    treatment_events: ArrayLike,
    treatment_n: ArrayLike,
    control_events: ArrayLike,
    control_n: ArrayLike,
    delta: ArrayLike,
    *,
    confidence: float = CONFIDENCE,
    mixing_sd: float = MIXING_SD,
) -> NDArray[np.bool_]:
    """Whether the confidence sequence excludes the difference ``delta`` (a fraction): the
    exact sequence does, or the counts support the normal mixture and it does.

    Vectorized over any broadcastable arrays (every ``n`` must be positive), so a simulation
    can read thousands of experiments at once with exactly the rule ``compare_proportions``
    applies: its interval excludes ``delta`` if and only if this is true. Both sequences test
    ``delta`` at the same restricted rates, computed once.
    """
    alpha = 1.0 - check_confidence(confidence)
    x_t, n_t, x_c, n_c = _as_floats(treatment_events, treatment_n, control_events, control_n)
    rate_t, rate_c = restricted_rates(x_t / n_t, n_t, x_c / n_c, n_c, delta)
    exact = excluded_at(x_t, n_t, x_c, n_c, rate_t, rate_c, EXACT_SHARE * alpha)
    normal = _normal_excluded_at(
        x_t, n_t, x_c, n_c, rate_t, rate_c, delta, (1.0 - EXACT_SHARE) * alpha, mixing_sd
    )
    return exact | (approximation_holds(x_t, n_t, x_c, n_c) & normal)


def difference_interval(
    treatment_events: int,
    treatment_n: int,
    control_events: int,
    control_n: int,
    *,
    confidence: float = CONFIDENCE,
    mixing_sd: float = MIXING_SD,
) -> tuple[float, float]:
    """The confidence sequence's interval for ``p_T - p_C`` at this read, as fractions
    (``difference_intervals`` for one comparison)."""
    counts = ([treatment_events], [treatment_n], [control_events], [control_n])
    [interval] = difference_intervals(*counts, confidence=confidence, mixing_sd=mixing_sd)
    return interval


def difference_intervals(
    treatment_events: ArrayLike,
    treatment_n: ArrayLike,
    control_events: ArrayLike,
    control_n: ArrayLike,
    *,
    confidence: float = CONFIDENCE,
    mixing_sd: float = MIXING_SD,
) -> list[tuple[float, float]]:
    """The confidence sequence's interval for ``p_T - p_C`` of each comparison (the counts are
    1-D arrays, one entry per comparison, every ``n`` positive), as fractions.

    Each end is found by refining a bracket between a difference the sequence excludes and one
    it includes. The brackets are seeded with 0 whenever 0's status is known, so an interval
    excludes 0 exactly when ``excludes_difference(..., 0)`` says so: the decision and the
    simulations that check it cannot disagree by a rounding. Every comparison's ends are
    refined together, one vectorized call a round (a health run compares a hundred pairs of
    arms); each comparison's interval is the one it gets alone, element by element.
    """
    counts = _as_floats(treatment_events, treatment_n, control_events, control_n)
    ends = [np.repeat(c, 2) for c in counts]  # one segment per end: lower, upper, lower, ...

    def excluded(deltas: NDArray[np.float64]) -> NDArray[np.bool_]:
        segment = ends if deltas.ndim == 1 else [c[:, np.newaxis] for c in ends]
        return excludes_difference(*segment, deltas, confidence=confidence, mixing_sd=mixing_sd)

    x_t, n_t, x_c, n_c = counts
    estimate = x_t / n_t - x_c / n_c
    zero_excluded = excludes_difference(
        *counts, np.zeros_like(estimate), confidence=confidence, mixing_sd=mixing_sd
    )
    outside = np.where(
        zero_excluded[:, np.newaxis],
        np.stack([np.where(estimate > 0, 0.0, -1.0), np.where(estimate < 0, 0.0, 1.0)], axis=1),
        np.array([-1.0, 1.0]),
    )
    inside = np.where(
        zero_excluded[:, np.newaxis],
        np.stack([estimate, estimate], axis=1),
        np.stack([np.minimum(estimate, 0.0), np.maximum(estimate, 0.0)], axis=1),
    )
    edges = _edges(excluded, outside.ravel(), inside.ravel())
    return [(float(lower), float(upper)) for lower, upper in edges.reshape(-1, 2)]


def _edges(
    excluded: Excluded, outside: NDArray[np.float64], inside: NDArray[np.float64]
) -> NDArray[np.float64]:
    """For each segment, the included difference closest to ``outside[i]`` on the way to
    ``inside[i]``; every segment is refined together, one vectorized call a round (``excluded``
    gets one difference per segment, or a row of them per segment).

    Keeps each ``outside`` excluded and ``inside`` included while shrinking its segment by
    ``_GRID`` each round; returns included points, so the interval is never narrower than
    computed. A segment whose ``outside`` is already included returns it.
    """
    settled = ~excluded(outside)
    result = np.where(settled, outside, inside)
    rows = np.arange(len(outside))
    for _ in range(_REFINEMENTS):
        if settled.all():
            break
        grids = np.linspace(outside, inside, _GRID + 1, axis=1)  # one row per segment
        included = ~excluded(np.ascontiguousarray(grids[:, 1:-1]))
        first = np.where(included.any(axis=1), included.argmax(axis=1) + 1, _GRID)
        outside = np.where(settled, outside, grids[rows, first - 1])
        inside = np.where(settled, inside, grids[rows, first])
        result = np.where(settled, result, inside)
    return result


class ProportionComparison(NamedTuple):
    """One comparison of ``events / n``, treatment against control (``compare_proportions``)."""

    treatment_events: int
    treatment_n: int
    control_events: int
    control_n: int
    higher_is_worse: bool = True
    withheld_reason: str | None = None


def compare_proportions(
    treatment_events: int,
    treatment_n: int,
    control_events: int,
    control_n: int,
    *,
    confidence: float = CONFIDENCE,
    higher_is_worse: bool = True,
    withheld_reason: str | None = None,
    mixing_sd: float = MIXING_SD,
) -> Comparison:
    """Treatment minus control of ``events / n``, in percentage points, always valid.

    Failure rate: ``n`` = users with feedback, ``events`` = users that failed. Coverage:
    ``n`` = users, ``events`` = users with feedback, ``higher_is_worse=False`` (a treatment
    whose users report less often is a regression: a crash that sends no feedback). The
    minimum sample applies to ``n``, the denominator, in both: for coverage that is users, so a
    treatment that stops reporting cannot hide behind its own missing feedback.
    """
    request = ProportionComparison(
        treatment_events, treatment_n, control_events, control_n, higher_is_worse, withheld_reason
    )
    [comparison] = compare_all_proportions([request], confidence=confidence, mixing_sd=mixing_sd)
    return comparison


def compare_all_proportions(
    requests: Sequence[ProportionComparison],
    *,
    confidence: float = CONFIDENCE,
    mixing_sd: float = MIXING_SD,
) -> list[Comparison]:
    """``compare_proportions`` of each request, in order; the intervals of those that are read
    are computed together (``difference_intervals``)."""
    check_confidence(confidence)
    answers: list[Comparison | None] = []
    differences: list[float | None] = []
    for r in requests:
        for events, n in ((r.treatment_events, r.treatment_n), (r.control_events, r.control_n)):
            if n < 0 or not 0 <= events <= n:
                raise ValueError(f"need 0 <= events <= n, got events={events} n={n}")
        difference = None
        if r.treatment_n > 0 and r.control_n > 0:
            # As the arms' own rates are shown, so the difference matches them to the last digit.
            treatment_rate = PERCENTAGE_POINTS * r.treatment_events / r.treatment_n
            difference = treatment_rate - PERCENTAGE_POINTS * r.control_events / r.control_n
        differences.append(difference)
        if r.withheld_reason is not None:
            answers.append(withheld(difference, confidence, r.withheld_reason))
        elif min(r.treatment_n, r.control_n) < MIN_USERS_WITH_FEEDBACK:
            answers.append(withheld(difference, confidence, WithheldReason.BELOW_MINIMUM_SAMPLE))
        else:
            answers.append(None)
    read = [i for i, answer in enumerate(answers) if answer is None]
    if read:
        counts = zip(*((requests[i][:4]) for i in read), strict=True)
        intervals = difference_intervals(*counts, confidence=confidence, mixing_sd=mixing_sd)
        for i, (lower, upper) in zip(read, intervals, strict=True):
            ci = (PERCENTAGE_POINTS * lower, PERCENTAGE_POINTS * upper)
            higher_is_worse = requests[i].higher_is_worse
            answers[i] = compared(differences[i], ci, confidence, higher_is_worse=higher_is_worse)
    return [answer for answer in answers if answer is not None]
