"""The insights assets, one ``@dg.asset`` per module; each is its own op, its own step."""

from pipelines.assets.attributed_feedback import attributed_feedback
from pipelines.assets.environment_keys import environment_keys
from pipelines.assets.flag_arm_windows import flag_arm_windows
from pipelines.assets.flag_environment_daily import flag_environment_daily
from pipelines.assets.flag_environment_metrics import flag_environment_metrics
from pipelines.assets.flag_health import flag_health
from pipelines.assets.flag_lifecycle import flag_lifecycle
from pipelines.assets.metric_users import metric_users
from pipelines.assets.published_warehouse import published_warehouse
from pipelines.assets.raw_evaluation_events import raw_evaluation_events
from pipelines.assets.raw_feedback_events import raw_feedback_events
from pipelines.assets.raw_track_events import raw_track_events
from pipelines.assets.rollout_decisions import rollout_decisions

ASSETS = [
    raw_evaluation_events,
    raw_feedback_events,
    raw_track_events,
    environment_keys,
    attributed_feedback,
    flag_environment_metrics,
    flag_environment_daily,
    flag_health,
    metric_users,
    rollout_decisions,
    flag_lifecycle,
    flag_arm_windows,
    published_warehouse,
]
"""In dependency order."""

__all__ = ["ASSETS"]
