"""Always-valid comparison of two proportions: failure rate and coverage, per user.

The interval is a confidence sequence for ``p_T - p_C``: the set of differences ``delta`` that
the normal-mixture sequential test (``boundaries.normal_mixture_radius``) does not reject,
where the variance of the estimated difference is computed *under the hypothesis being tested*
(the restricted maximum-likelihood rates given ``p_T - p_C = delta``; Farrington & Manning 1990,
Miettinen & Nurminen 1985). That is the score-type interval made sequential. The plain plug-in
(Wald) variance was measured and rejected: an arm with few or no events gets a tiny variance, and
with a 1 % failure rate in a 1 % rollout the A/A false-decision rate reached 15 % at 200 users
per arm, where the score form gives 2.2 % (docs/statistics.md, "Minimum sample").

Validity is asymptotic (Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas 2024): the restricted
estimate is consistent under the true ``delta``, so the sequence inherits the time-uniform
coverage of the Gaussian mixture; the minimum sample and the simulations cover the rest.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from warehouse.statistics.boundaries import normal_mixture_radius
from warehouse.statistics.decisions import (
    CONFIDENCE,
    MIN_USERS_WITH_FEEDBACK,
    Comparison,
    WithheldReason,
    check_confidence,
    compared,
    withheld,
)

MIXING_SD = 0.05
"""Spread of the normal mixture over the difference, as a fraction (5 percentage points).

It is the size of effect the guardrails exist for (a failure rate going from 5 % to 10 %), and
simulation confirms it is the best spread for that effect: the users per arm needed for 80 %
power are 803, 736, 714, 713, 734 and 762 for spreads of 2, 3, 4, 5, 7 and 10 points.
"""

PERCENTAGE_POINTS = 100.0
_GRID = 64
_REFINEMENTS = 7  # 64**7 ~ 4e12: the 2-wide bracket shrinks below 1e-12
Excluded = Callable[[NDArray[np.float64]], NDArray[np.bool_]]


def restricted_rates(
    p_t: ArrayLike, n_t: ArrayLike, p_c: ArrayLike, n_c: ArrayLike, delta: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Maximum-likelihood rates of the two arms given that ``p_T - p_C = delta``.

    The constrained likelihood equation is a cubic in ``p_T``; Farrington & Manning (1990) give
    its root in closed form (trigonometric solution). At ``delta = 0`` it is the pooled rate,
    so the test of "no difference" uses the pooled variance, the best-behaved choice for rare
    events in unequal arms.
    """
    p_t, n_t, p_c, n_c, delta = (
        np.asarray(a, dtype=np.float64) for a in (p_t, n_t, p_c, n_c, delta)
    )
    theta = n_c / n_t
    a = 1.0 + theta
    b = -(1.0 + theta + p_t + theta * p_c + delta * (theta + 2.0))
    c = delta * delta + delta * (2.0 * p_t + theta + 1.0) + p_t + theta * p_c
    d = -p_t * delta * (1.0 + delta)
    v = (b / (3.0 * a)) ** 3 - b * c / (6.0 * a * a) + d / (2.0 * a)
    s = np.sqrt(np.maximum((b / (3.0 * a)) ** 2 - c / (3.0 * a), 0.0))
    u = np.where(v > 0, s, -s)
    safe_u = np.where(s > 0, u, 1.0)
    w = (np.pi + np.arccos(np.clip(np.where(s > 0, v / safe_u**3, 0.0), -1.0, 1.0))) / 3.0
    root = np.where(s > 0, 2.0 * u * np.cos(w), 0.0) - b / (3.0 * a)
    rate_t = np.clip(root, np.maximum(0.0, delta), np.minimum(1.0, 1.0 + delta))
    return rate_t, rate_t - delta


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
    """Whether the confidence sequence excludes the difference ``delta`` (a fraction).

    Vectorized over any broadcastable arrays (every ``n`` must be positive), so a simulation
    can read thousands of experiments at once with exactly the rule ``compare_proportions``
    applies: its interval excludes ``delta`` if and only if this is true.
    """
    alpha = 1.0 - check_confidence(confidence)
    x_t, n_t, x_c, n_c = (
        np.asarray(a, dtype=np.float64)
        for a in (treatment_events, treatment_n, control_events, control_n)
    )
    p_t, p_c = x_t / n_t, x_c / n_c
    rate_t, rate_c = restricted_rates(p_t, n_t, p_c, n_c, delta)
    variance = rate_t * (1.0 - rate_t) / n_t + rate_c * (1.0 - rate_c) / n_c
    radius = normal_mixture_radius(variance, mixing_sd * mixing_sd, alpha)
    return np.abs(p_t - p_c - np.asarray(delta, dtype=np.float64)) > radius


def difference_interval(
    treatment_events: int,
    treatment_n: int,
    control_events: int,
    control_n: int,
    *,
    confidence: float = CONFIDENCE,
    mixing_sd: float = MIXING_SD,
) -> tuple[float, float]:
    """The confidence sequence's interval for ``p_T - p_C`` at this read, as fractions.

    Each end is found by refining a bracket between a difference the sequence excludes and one
    it includes. The brackets are seeded with 0 whenever 0's status is known, so the interval
    excludes 0 exactly when ``excludes_difference(..., 0)`` says so: the decision and the
    simulations that check it cannot disagree by a rounding.
    """

    def excluded(deltas: NDArray[np.float64]) -> NDArray[np.bool_]:
        counts = (treatment_events, treatment_n, control_events, control_n)
        return excludes_difference(*counts, deltas, confidence=confidence, mixing_sd=mixing_sd)

    estimate = treatment_events / treatment_n - control_events / control_n
    zero_excluded = bool(excluded(np.zeros(1))[0])
    if zero_excluded:
        outside = (0.0 if estimate > 0 else -1.0, 0.0 if estimate < 0 else 1.0)
        inside = (estimate, estimate)
    else:
        outside, inside = (-1.0, 1.0), (min(estimate, 0.0), max(estimate, 0.0))
    lower, upper = _edges(excluded, np.array(outside), np.array(inside))
    return lower, upper


def _edges(
    excluded: Excluded, outside: NDArray[np.float64], inside: NDArray[np.float64]
) -> tuple[float, ...]:
    """For each segment, the included difference closest to ``outside[i]`` on the way to
    ``inside[i]``; both ends of the interval are refined together, one vectorized call a round.

    Keeps each ``outside`` excluded and ``inside`` included while shrinking its segment by
    ``_GRID`` each round; returns included points, so the interval is never narrower than
    computed. A segment whose ``outside`` is already included returns it.
    """
    settled = ~excluded(outside)
    result = np.where(settled, outside, inside)
    for _ in range(_REFINEMENTS):
        if settled.all():
            break
        grids = np.linspace(outside, inside, _GRID + 1, axis=1)  # one row per segment
        included = ~excluded(grids[:, 1:-1].ravel()).reshape(len(outside), _GRID - 1)
        first = np.where(included.any(axis=1), included.argmax(axis=1) + 1, _GRID)
        rows = np.arange(len(outside))
        outside = np.where(settled, outside, grids[rows, first - 1])
        inside = np.where(settled, inside, grids[rows, first])
        result = np.where(settled, result, inside)
    return tuple(float(x) for x in result)


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
    check_confidence(confidence)
    for events, n in ((treatment_events, treatment_n), (control_events, control_n)):
        if n < 0 or not 0 <= events <= n:
            raise ValueError(f"need 0 <= events <= n, got events={events} n={n}")
    difference = None
    if treatment_n > 0 and control_n > 0:
        # As the arms' own rates are shown, so the difference matches them to the last digit.
        treatment_rate = PERCENTAGE_POINTS * treatment_events / treatment_n
        difference = treatment_rate - PERCENTAGE_POINTS * control_events / control_n
    if withheld_reason is not None:
        return withheld(difference, confidence, withheld_reason)
    if min(treatment_n, control_n) < MIN_USERS_WITH_FEEDBACK:
        return withheld(difference, confidence, WithheldReason.BELOW_MINIMUM_SAMPLE)
    lower, upper = difference_interval(
        treatment_events,
        treatment_n,
        control_events,
        control_n,
        confidence=confidence,
        mixing_sd=mixing_sd,
    )
    ci = (PERCENTAGE_POINTS * lower, PERCENTAGE_POINTS * upper)
    return compared(difference, ci, confidence, higher_is_worse=higher_is_worse)
