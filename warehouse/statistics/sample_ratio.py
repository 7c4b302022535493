"""Sample-ratio check: do the arms hold the users the rule's split says they should?

A mismatch means the arms are no longer comparable (evaluations lost on one side, a bot, a
cache serving one arm), so every comparison is withheld while it lasts.

The test is sequential, because the health answer is recomputed every minute: a chi-square
p-value read that often would cross 0.001 in far more than 0.1 % of healthy rollouts. We use
the Dirichlet-multinomial (here beta-binomial) Bayes factor of Lindon & Malek (2022): under the
null split it is a nonnegative martingale, so ``p = min(1, 1 / BF)`` satisfies
``P(p <= x at any read) <= x`` for every ``x`` (Ville's inequality). That ``p`` is the
``pValue`` reported and the one compared with ``SRM_P_VALUE_THRESHOLD``.

Lindon & Malek's anytime-valid p-value is the running minimum of ``1 / BF``; the health answer
is computed from the current counts only, so we report ``1 / BF`` itself: never smaller than the
running minimum, hence just as valid, and a mismatch that heals (the lost evaluations arrive)
clears again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SRM_P_VALUE_THRESHOLD = 0.001
"""Contract section 9: mismatch when the sequential p-value is below this."""

SRM_PRIOR_CONCENTRATION = 100.0
"""Beta(k s, k (1 - s)) prior on the treatment's share under the alternative, ``s`` the rule's
split. Our choice (docs/statistics.md); its prior sd at a 50/50 split is 5 points of share, so it
finds the mismatches that matter (53/47 among 10,000 users gives p ~ 2e-7) while a healthy
split never accumulates evidence."""


@dataclass(frozen=True, slots=True)
class SampleRatio:
    """The split expected from the rule, the one observed, and the sequential test between.

    ``observed`` and ``p_value`` are None while no user has been counted.
    """

    expected: float
    observed: float | None
    p_value: float | None
    mismatch: bool


def sample_ratio(
    treatment_users: int, control_users: int, expected_treatment_share: float
) -> SampleRatio:
    """Check the arms' users against the rule's split.

    ``expected_treatment_share`` is the rule's threshold over the bucket count
    (``threshold(P) / 10_000``, i.e. ``P / 100``): 0 and 1 are allowed (percentage 0 or 100),
    and then a single user in the impossible arm is a mismatch with p = 0.
    """
    if treatment_users < 0 or control_users < 0:
        raise ValueError("user counts must be nonnegative")
    if not 0.0 <= expected_treatment_share <= 1.0:
        raise ValueError(f"expected share must be in [0, 1], got {expected_treatment_share!r}")
    total = treatment_users + control_users
    if total == 0:
        return SampleRatio(expected_treatment_share, None, None, False)
    observed = treatment_users / total
    p_value = math.exp(
        -max(log_bayes_factor(treatment_users, control_users, expected_treatment_share), 0.0)
    )
    return SampleRatio(expected_treatment_share, observed, p_value, p_value < SRM_P_VALUE_THRESHOLD)


def log_bayes_factor(treatment_users: int, control_users: int, share: float) -> float:
    """log BF of "some other split" (beta-binomial mixture) against the rule's split ``share``.

    ``log B(a + n_T, b + n_C) - log B(a, b) - n_T log s - n_C log(1 - s)`` with
    ``a = k s, b = k (1 - s)``. A degenerate split makes any user on the wrong side infinitely
    unlikely under the null, and no evidence otherwise.
    """
    if share in (0.0, 1.0):
        impossible = treatment_users if share == 0.0 else control_users
        return math.inf if impossible > 0 else 0.0
    a, b = SRM_PRIOR_CONCENTRATION * share, SRM_PRIOR_CONCENTRATION * (1.0 - share)
    log_marginal = _log_beta(a + treatment_users, b + control_users) - _log_beta(a, b)
    log_null = treatment_users * math.log(share) + control_users * math.log1p(-share)
    return log_marginal - log_null


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
