"""Pending feedback stays bounded."""

import dagster as dg

from pipelines.constants import (
    ATTRIBUTED_FEEDBACK,
    PENDING_ABSOLUTE_FLOOR,
    PENDING_GROWTH_STREAK,
    PENDING_SHARE_LIMIT,
)
from pipelines.resources import WarehouseResource


@dg.asset_check(
    asset=ATTRIBUTED_FEEDBACK,
    description=(
        "Pending feedback (its evaluation not loaded yet) stays bounded: at most "
        f"max({PENDING_ABSOLUTE_FLOOR}, {PENDING_SHARE_LIMIT:.0%} of deduplicated feedback), "
        f"and not growing in each of the last {PENDING_GROWTH_STREAK} runs. A failure (a "
        "warning) means evaluation events are missing or late (event log, sealing or loading)."
    ),
)
def pending_feedback_bounded(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.connect() as con:
        history = con.execute(
            "SELECT pending_count, deduplicated_feedback FROM pending_feedback_history "
            "ORDER BY recorded_at DESC LIMIT ?",
            [PENDING_GROWTH_STREAK + 1],
        ).fetchall()
    pending, total = history[0] if history else (0, 0)
    limit = max(PENDING_ABSOLUTE_FLOOR, PENDING_SHARE_LIMIT * total)
    counts = [row[0] for row in reversed(history)]
    growing = len(counts) > PENDING_GROWTH_STREAK and all(
        later > earlier for earlier, later in zip(counts, counts[1:], strict=False)
    )
    return dg.AssetCheckResult(
        passed=pending <= limit and not growing,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "pending_feedback": int(pending),
            "deduplicated_feedback": int(total),
            "limit": float(limit),
            "growing_every_run": growing,
            "recent_pending_counts": dg.MetadataValue.json(counts),
        },
    )
