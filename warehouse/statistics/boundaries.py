"""Time-uniform boundaries: how far an estimate may wander, at every read, before it is evidence.

Both boundaries here are mixture boundaries (Robbins 1970): a likelihood ratio averaged over a
prior on the effect is a nonnegative martingale under the null, so by Ville's inequality it
exceeds ``1/alpha`` at *any* time with probability at most ``alpha``. That is what makes the
intervals "always valid": reading them every five minutes, or stopping the first time they
exclude 0, costs nothing extra.

The mixture's spread sets where the boundary is tightest (the tuning rule of Howard, Ramdas,
McAuliffe & Sekhon 2021, as implemented in their ``confseq`` library): a spread matched to the
sample at which a decision is wanted costs little anywhere else, because the width grows only
like ``sqrt(log n)`` away from it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray


def tuning_constant(alpha: float) -> float:
    """``2 log(1/alpha) + log(1 + 2 log(1/alpha))``: the boundary is tightest where the
    information (1 / variance of the estimate) equals this times the mixture's precision."""
    two_log = 2.0 * math.log(1.0 / alpha)
    return two_log + math.log1p(two_log)


def normal_mixture_radius(
    variance: ArrayLike, mixing_variance: float, alpha: float
) -> NDArray[np.float64]:
    """Half-width of the two-sided normal-mixture confidence sequence for a mean.

    For an estimate whose variance is ``V`` and a N(0, tau^2) mixture over the effect:

        r(V) = sqrt( V (V + tau^2) / tau^2 * log( (V + tau^2) / (V alpha^2) ) )

    This is the mSPRT interval of Johari, Koomen, Pekelis & Walsh (2022), equivalently Robbins'
    normal mixture for Brownian motion read in information time ``1/V`` (the two-sided normal
    mixture of Howard et al. 2021 with ``rho = 1/tau^2``). A zero variance (an estimate that
    cannot move) has radius 0.
    """
    v = np.asarray(variance, dtype=np.float64)
    positive = v > 0
    safe = np.where(positive, v, 1.0)
    squared = safe * (safe + mixing_variance) / mixing_variance
    squared *= np.log((safe + mixing_variance) / safe) - 2.0 * math.log(alpha)
    return np.where(positive, np.sqrt(squared), 0.0)


def information_for_radius(radius: float, mixing_variance: float, alpha: float) -> float:
    """The least information ``1 / V`` at which the normal mixture's radius is ``radius`` (the
    radius falls as information grows): what a guard's ``users_needed`` plans for."""
    low, high = 1e-12, 1e18  # information, bisected in logarithms
    for _ in range(200):
        middle = math.sqrt(low * high)
        if float(normal_mixture_radius(1.0 / middle, mixing_variance, alpha)) > radius:
            low = middle
        else:
            high = middle
        if high / low < 1.0001:
            break
    return high
