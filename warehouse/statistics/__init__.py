"""Release health statistics: the pure core behind a flag's health answer (contract section 9).

Per-user counts and order statistics in, comparisons with always-valid intervals and decisions
out; no I/O, clock or configuration. Every interval is a confidence sequence: it may be read
after every aggregation, and a decision taken the first time it excludes 0, without inflating
the error rate. The methods, their assumptions and simulated error rates are in
docs/statistics.md.

- ``sample_ratio``: sequential sample-ratio-mismatch test (beta-binomial Bayes factor).
- ``compare_proportions``: failure rate and coverage (an exact universal-inference sequence,
  and a normal mixture with a score-type variance where the counts support it);
  ``compare_all_proportions`` for many at once, their intervals refined together.
- ``compare_quantiles``: p95 latency (a two-sample sequence: the product of the arms'
  beta-binomial mixtures).
- ``compare_means``: count, sum and mean metrics (a ratio of per-user sums), adjusted for
  each user's pre-exposure value; ``compare_all_means`` for many at once; ``mean_guard`` for
  a metric guardrail.
- ``guard``: a guarded rollout's evidence, one one-sided sequence per guardrail over all its
  steps (``proportion_guard``, ``quantile_guard``), one error budget per rollout.
"""

from flagsight_core.contract import Decision, WithheldReason

from warehouse.statistics.budget import ROLLOUT_ERROR_BUDGET
from warehouse.statistics.decisions import CONFIDENCE, MIN_USERS_WITH_FEEDBACK, Comparison
from warehouse.statistics.means import (
    MIN_USERS_FOR_MEANS,
    MOMENT_COLUMNS,
    MeanComparison,
    MeanMoments,
    MeansComparison,
    compare_all_means,
    compare_means,
    mean_guard,
)
from warehouse.statistics.proportions import (
    MIXING_SD,
    ProportionComparison,
    compare_all_proportions,
    compare_proportions,
    difference_interval,
    difference_intervals,
    excludes_difference,
)
from warehouse.statistics.quantiles import (
    ArmCells,
    compare_quantiles,
    quantile_difference_interval,
)
from warehouse.statistics.sample_ratio import (
    SRM_P_VALUE_THRESHOLD,
    SampleRatio,
    sample_ratio,
)

__all__ = [
    "CONFIDENCE",
    "ROLLOUT_ERROR_BUDGET",
    "ArmCells",
    "MIN_USERS_FOR_MEANS",
    "MIN_USERS_WITH_FEEDBACK",
    "MIXING_SD",
    "MOMENT_COLUMNS",
    "SRM_P_VALUE_THRESHOLD",
    "Comparison",
    "Decision",
    "MeanComparison",
    "MeanMoments",
    "MeansComparison",
    "ProportionComparison",
    "SampleRatio",
    "WithheldReason",
    "compare_all_means",
    "compare_all_proportions",
    "compare_means",
    "compare_proportions",
    "compare_quantiles",
    "difference_interval",
    "difference_intervals",
    "excludes_difference",
    "mean_guard",
    "quantile_difference_interval",
    "sample_ratio",
]
