"""The insights assets, in dependency order, and the one multi-asset that computes them."""

from pipelines.assets.dimensions import environment_keys
from pipelines.assets.feedback import attributed_feedback
from pipelines.assets.insights import build_insights_asset
from pipelines.assets.metrics import (
    flag_environment_daily,
    flag_environment_metrics,
    flag_value_comparison,
)
from pipelines.assets.publish import published_warehouse
from pipelines.assets.raw import raw_evaluation_events, raw_feedback_events
from pipelines.checks import CHECKS

ASSET_PARTS = [
    raw_evaluation_events,
    raw_feedback_events,
    environment_keys,
    attributed_feedback,
    flag_environment_metrics,
    flag_environment_daily,
    flag_value_comparison,
    published_warehouse,
]

insights = build_insights_asset(ASSET_PARTS, CHECKS)

# Every asset and check of the code location (the checks are part of the multi-asset).
ALL_ASSETS = [insights]

__all__ = ["ALL_ASSETS", "ASSET_PARTS", "insights"]
