"""One error budget per guarded rollout (contract section 10).

A guarded rollout rolls back on its own, so the error that matters is the rollout's: over all
its steps, all its guardrails and every read, a release no worse than its control must be
rolled back with probability at most ``ROLLOUT_ERROR_BUDGET``. The guard keeps one sequence
per guardrail over the whole rollout (``guard``), so the budget is shared by the guardrails
alone (``guard.rollback_alpha``), not by every step and guardrail. The health answer of a flag
keeps the contract's ``CONFIDENCE``.
"""

from __future__ import annotations

ROLLOUT_ERROR_BUDGET = 0.05
"""Probability that a guarded rollout of a release no worse than its control is rolled back."""
