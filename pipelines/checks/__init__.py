"""Data-quality checks on the insights assets, one ``@dg.asset_check`` per function and one
module per rule. Problems are reported with metadata, not raised; no check blocks: an asset
whose check fails is still materialized, and so is everything downstream of it."""

from pipelines.checks.coverage_at_most_100 import coverage_at_most_100
from pipelines.checks.decisions_follow_the_rules import decisions_follow_the_rules
from pipelines.checks.lifecycle_evidence_consistent import lifecycle_evidence_consistent
from pipelines.checks.lifecycle_one_row_per_flag import lifecycle_one_row_per_flag
from pipelines.checks.no_file_loaded_twice import (
    no_evaluation_file_loaded_twice,
    no_feedback_file_loaded_twice,
    no_track_file_loaded_twice,
)
from pipelines.checks.pending_feedback_bounded import pending_feedback_bounded
from pipelines.checks.success_plus_failure_is_100 import success_plus_failure_is_100

CHECKS = [
    no_evaluation_file_loaded_twice,
    no_feedback_file_loaded_twice,
    no_track_file_loaded_twice,
    pending_feedback_bounded,
    coverage_at_most_100,
    success_plus_failure_is_100,
    decisions_follow_the_rules,
    lifecycle_one_row_per_flag,
    lifecycle_evidence_consistent,
]

__all__ = ["CHECKS"]
