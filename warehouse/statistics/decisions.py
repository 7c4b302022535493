"""The comparison answer and the one rule that turns an interval into a decision.

Every comparison (failure rate, coverage, p95 latency) ends here, so the dashboard, the health
endpoint and guarded rollouts read the same decision for the same interval. The decisions and
the reasons for withholding one are the contract's codes (``flagsight_core.contract``).
"""

from __future__ import annotations

from dataclasses import dataclass

from flagsight_core.contract import Decision

CONFIDENCE = 0.95
"""Coverage of every confidence sequence, simultaneously over all reads of one epoch."""

MIN_USERS_WITH_FEEDBACK = 200
"""Per arm; below it every decision is withheld (contract section 9 allows at most 1,000).

Chosen to protect the normal mixture's approximation, which the exact sequence and the
expected-events gate now protect at any sample (docs/statistics.md, "Minimum sample"); it
keeps the health answer from reading decisions off a handful of users. A guarded rollout's
guard (``guard``) has no minimum: it calls a blatant regression from the counts alone.
"""


@dataclass(frozen=True, slots=True)
class Comparison:
    """Treatment minus control, with its always-valid interval and what it means.

    ``difference`` is descriptive and is given whenever both arms have data; ``ci`` is given
    only when the decision is not withheld, because a withheld interval is exactly one that
    must not be read (mismatched arms, or too few users for its approximation).
    """

    difference: float | None
    ci: tuple[float, float] | None
    confidence: float
    decision: Decision
    reason: str | None = None


def decide(ci: tuple[float, float], *, higher_is_worse: bool) -> Decision:
    """Regression when the interval lies entirely on the worse side of 0, improvement when
    entirely on the better side, inconclusive when it contains 0."""
    lower, upper = ci
    if lower > 0:
        return Decision.REGRESSION if higher_is_worse else Decision.IMPROVEMENT
    if upper < 0:
        return Decision.IMPROVEMENT if higher_is_worse else Decision.REGRESSION
    return Decision.INCONCLUSIVE


def withheld(difference: float | None, confidence: float, reason: str) -> Comparison:
    """The answer when the interval must not be read; the reason says why."""
    return Comparison(difference, None, confidence, Decision.WITHHELD, str(reason))


def compared(
    difference: float | None,
    ci: tuple[float, float],
    confidence: float,
    *,
    higher_is_worse: bool,
) -> Comparison:
    """The answer when the interval may be read."""
    decision = decide(ci, higher_is_worse=higher_is_worse)
    return Comparison(difference, ci, confidence, decision)


def check_confidence(confidence: float) -> float:
    """A confidence level strictly between 0 and 1, or ValueError (a caller's bug)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return confidence
