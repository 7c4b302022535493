"""An exact, time-uniform test of a difference of two proportions, valid at any rate.

The normal-mixture sequence (``proportions.py``) rests on a Gaussian approximation that a
handful of events does not support: with a 0.02 % failure rate in a 1 % rollout, its A/A
false-decision rate read 2,016 times was 6.5-7.7 %. This module is the exact counterpart,
used wherever the counts are too thin for the approximation and alongside it elsewhere.

It is the *universal inference* confidence sequence of Wasserman, Ramdas & Balakrishnan (2020,
section 7): for a hypothesised difference ``delta``, the statistic

    E(delta) = [ m(x_T | n_T) m(x_C | n_C) ] / sup { L(p_T, p_C) : p_T - p_C = delta }

divides the data's marginal likelihood under a prior on each arm's rate (here Beta(1/2, 1/2),
Jeffreys' prior, which keeps mass near 0 for rare rates) by the likelihood maximised under the
hypothesis. For the true rates, the numerator over ``L(p_T, p_C)`` is a nonnegative martingale
with mean 1, whatever the rates and however the users arrive, and the denominator's supremum
only makes ``E`` smaller; so by Ville's inequality ``E(true delta)`` ever reaches ``1/alpha``
with probability at most ``alpha``. No approximation, no minimum count, any number of reads.
The restricted maximum is the Farrington-Manning root ``restricted.restricted_rates`` already
computes for the score variance, so both sequences test the same hypotheses the same way.

The price of exactness is power: the numerator pays for not knowing the common rate, about
``log(n)/2`` more evidence than the normal mixture needs, so for common outcomes the normal
sequence decides first and this one guards the rare ones. ``docs/statistics.md`` has the
figures.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy.special import betaln, xlog1py, xlogy

PRIOR = 0.5
"""Each arm's rate has a Beta(PRIOR, PRIOR) prior in the numerator (Jeffreys' prior)."""


def log_marginal(events: NDArray[np.float64], n: NDArray[np.float64]) -> NDArray[np.float64]:
    """Log of the Beta-Bernoulli marginal likelihood of ``events`` in ``n`` trials, in order."""
    return betaln(PRIOR + events, PRIOR + n - events) - betaln(PRIOR, PRIOR)


def log_likelihood(
    events: NDArray[np.float64], n: NDArray[np.float64], rate: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Bernoulli log-likelihood of ``events`` in ``n`` at ``rate`` (``0 log 0 = 0``)."""
    return xlogy(events, rate) + xlog1py(n - events, -rate)


def excluded_at(
    x_t: NDArray[np.float64],
    n_t: NDArray[np.float64],
    x_c: NDArray[np.float64],
    n_c: NDArray[np.float64],
    rate_t: NDArray[np.float64],
    rate_c: NDArray[np.float64],
    alpha: float,
) -> NDArray[np.bool_]:
    """Whether the exact sequence at level ``alpha`` excludes the differences whose restricted
    rates are ``rate_t`` and ``rate_c`` (vectorized; every ``n`` positive). The caller shares
    those rates with the normal mixture, which tests the same differences. The excluded
    differences are those whose restricted maximum likelihood falls short of the marginal
    likelihood by ``log(1/alpha)``; the restricted maximum is concave in the difference, so
    what stays is an interval around the observed one."""
    log_restricted = log_likelihood(x_t, n_t, rate_t) + log_likelihood(x_c, n_c, rate_c)
    log_evidence = log_marginal(x_t, n_t) + log_marginal(x_c, n_c) - log_restricted
    return log_evidence >= math.log(1.0 / alpha)
