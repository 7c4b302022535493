"""The two arms' maximum-likelihood rates under a hypothesised difference.

Both proportion sequences test a difference ``delta`` against the likelihood restricted to
``p_T - p_C = delta``: the normal mixture through the variance at those rates (a score-type
variance), the exact sequence through the restricted likelihood itself.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


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
    if delta.ndim == 0 and delta == 0.0:  # the test of no difference: the pooled rate
        pooled = (p_t * n_t + p_c * n_c) / (n_t + n_c)
        return pooled, pooled
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
