"""Names shared by the insights code location: asset keys, groups, tables, thresholds."""

from __future__ import annotations

GROUP = "insights"
JOB_NAME = "insights_job"
SCHEDULE_NAME = "insights_schedule"

# Asset names (each is also the name of its main table where it has one).
RAW_EVALUATIONS = "raw_evaluation_events"
RAW_FEEDBACK = "raw_feedback_events"
RAW_TRACK = "raw_track_events"
ENVIRONMENT_KEYS = "environment_keys"
ATTRIBUTED_FEEDBACK = "attributed_feedback"
FLAG_ENVIRONMENT_METRICS = "flag_environment_metrics"
FLAG_ENVIRONMENT_DAILY = "flag_environment_daily"
FLAG_HEALTH = "flag_health"
FLAG_ARM_WINDOWS = "flag_arm_windows"
PUBLISHED_WAREHOUSE = "published_warehouse"
ROLLOUT_DECISIONS = "rollout_decisions"
FLAG_LIFECYCLE = "flag_lifecycle"
METRIC_USERS = "metric_users"

SENSOR_NAME = "new_events_sensor"
SENSOR_INTERVAL_S = 10
"""How often the sensor looks for newly sealed files (release health's time to signal)."""

ROLLOUT_SENSOR_NAME = "rollout_step_sensor"
ROLLOUT_SENSOR_INTERVAL_S = 10
"""How often the rollout sensor looks for a rollout step whose time has passed."""

# Pending feedback check: the bound and the growth streak that fail it.
PENDING_ABSOLUTE_FLOOR = 10_000
PENDING_SHARE_LIMIT = 0.05
PENDING_GROWTH_STREAK = 12
