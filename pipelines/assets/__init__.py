"""The insights assets, in dependency order."""

from pipelines.assets.dimensions import environment_keys
from pipelines.assets.feedback import attributed_feedback
from pipelines.assets.metrics import (
    flag_environment_daily,
    flag_environment_metrics,
    flag_value_comparison,
)
from pipelines.assets.publish import published_warehouse
from pipelines.assets.raw import raw_evaluation_events, raw_feedback_events

ALL_ASSETS = [
    raw_evaluation_events,
    raw_feedback_events,
    environment_keys,
    attributed_feedback,
    flag_environment_metrics,
    flag_environment_daily,
    flag_value_comparison,
    published_warehouse,
]

__all__ = ["ALL_ASSETS"]
