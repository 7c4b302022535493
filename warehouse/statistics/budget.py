"""One error budget per guarded rollout (contract section 10).

A guarded rollout rolls back on its own, so the error that matters is the rollout's: over all
its steps, all its guardrails and every read, a release no worse than its control must be
rolled back with probability at most ``ROLLOUT_ERROR_BUDGET``. Each (step, guardrail) pair is
one always-valid comparison (a step is an epoch of its own, and each comparison's sequence
holds at every read of it), so a rollback needs one of them to go wrong, and by the union
bound it is enough to give each an equal share of the budget (Bonferroni). The last step
(100 %) is never judged: the rollout completes on reaching it.

Equal shares, because nothing in advance says which step or guardrail will carry the
evidence: the small first steps see the blatant regressions, the large later ones the subtle
ones. The health answer of a flag without a rollout keeps the contract's ``CONFIDENCE``.
"""

from __future__ import annotations

from collections.abc import Sequence

ROLLOUT_ERROR_BUDGET = 0.05
"""Probability that a guarded rollout of a release no worse than its control is rolled back."""


def judged_comparisons(steps: Sequence[float], guardrails: Sequence[str]) -> int:
    """How many comparisons share the budget: every step but the last, times the guardrails
    (at least one, so that a rollout without guardrails still has a level)."""
    return max(len(steps) - 1, 1) * max(len(guardrails), 1)


def rollout_confidence(steps: Sequence[float], guardrails: Sequence[str]) -> float:
    """The confidence at which each of a rollout's comparisons is read."""
    return 1.0 - ROLLOUT_ERROR_BUDGET / judged_comparisons(steps, guardrails)
