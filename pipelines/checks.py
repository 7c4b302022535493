"""Data-quality checks on the insights assets. Problems are reported with metadata, not raised."""

import dagster as dg
import duckdb

from api.eventlog.schema import EVALUATION, FEEDBACK
from pipelines.constants import (
    ATTRIBUTED_FEEDBACK,
    FLAG_ENVIRONMENT_METRICS,
    PENDING_ABSOLUTE_FLOOR,
    PENDING_GROWTH_STREAK,
    PENDING_SHARE_LIMIT,
    RAW_EVALUATIONS,
    RAW_FEEDBACK,
)
from pipelines.loading import RAW_TABLES
from pipelines.parts import InsightsCheck, Metadata

_SAMPLE = 20
_RATE_TOLERANCE = 1e-9


def _sample(rows: list[tuple]) -> dg.MetadataValue:
    return dg.MetadataValue.json([list(map(str, row)) for row in rows[:_SAMPLE]])


def _coverage_at_most_100(con: duckdb.DuckDBPyConnection) -> tuple[bool, Metadata]:
    rows = con.execute(
        "SELECT environment_id, flag_key, evaluations, feedback_count, feedback_coverage "
        "FROM flag_environment_metrics WHERE feedback_coverage > 100 ORDER BY ALL"
    ).fetchall()
    return not rows, {"violations": len(rows), "sample": _sample(rows)}


def _success_plus_failure_is_100(con: duckdb.DuckDBPyConnection) -> tuple[bool, Metadata]:
    rows = con.execute(
        "SELECT environment_id, flag_key, success_rate, failure_rate "
        "FROM flag_environment_metrics WHERE feedback_count > 0 "
        "AND (success_rate IS NULL OR failure_rate IS NULL "
        f"OR abs(success_rate + failure_rate - 100) > {_RATE_TOLERANCE}) ORDER BY ALL"
    ).fetchall()
    return not rows, {"violations": len(rows), "sample": _sample(rows)}


def _no_file_loaded_twice(event_type: str, asset: str) -> InsightsCheck:
    def evaluate(con: duckdb.DuckDBPyConnection) -> tuple[bool, Metadata]:
        twice = con.execute(
            "SELECT path, count(*) FROM loaded_files WHERE event_type = ? "
            "GROUP BY path HAVING count(*) > 1 ORDER BY path",
            [event_type],
        ).fetchall()
        kept = con.execute(
            "SELECT coalesce(sum(rows_loaded), 0) FROM load_batches WHERE event_type = ?",
            [event_type],
        ).fetchone()[0]
        held = con.execute(f"SELECT count(*) FROM {RAW_TABLES[event_type]}").fetchone()[0]
        files = con.execute(
            "SELECT count(*) FROM loaded_files WHERE event_type = ?", [event_type]
        ).fetchone()[0]
        return not twice and kept == held, {
            "files_loaded_twice": len(twice),
            "sample": _sample(twice),
            "files_in_ledger": int(files),
            "rows_kept_by_loads": int(kept),
            "rows_in_table": int(held),
        }

    return InsightsCheck(
        spec=dg.AssetCheckSpec(
            "no_file_loaded_twice",
            asset=asset,
            description=(
                f"No {event_type} file appears twice in the ledger `loaded_files`, and the raw "
                "table holds exactly the rows the ledger's loads kept."
            ),
        ),
        evaluate=evaluate,
    )


def _pending_feedback_bounded(con: duckdb.DuckDBPyConnection) -> tuple[bool, Metadata]:
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
    return pending <= limit and not growing, {
        "pending_feedback": int(pending),
        "deduplicated_feedback": int(total),
        "limit": float(limit),
        "growing_every_run": growing,
        "recent_pending_counts": dg.MetadataValue.json(counts),
    }


coverage_at_most_100 = InsightsCheck(
    spec=dg.AssetCheckSpec(
        "coverage_at_most_100",
        asset=FLAG_ENVIRONMENT_METRICS,
        description="Feedback coverage is at most 100% for every flag environment.",
    ),
    evaluate=_coverage_at_most_100,
)

success_plus_failure_is_100 = InsightsCheck(
    spec=dg.AssetCheckSpec(
        "success_plus_failure_is_100",
        asset=FLAG_ENVIRONMENT_METRICS,
        description=(
            "success_rate + failure_rate = 100 wherever the rates are defined (feedback > 0)."
        ),
    ),
    evaluate=_success_plus_failure_is_100,
)

no_evaluation_file_loaded_twice = _no_file_loaded_twice(EVALUATION, RAW_EVALUATIONS)
no_feedback_file_loaded_twice = _no_file_loaded_twice(FEEDBACK, RAW_FEEDBACK)

pending_feedback_bounded = InsightsCheck(
    spec=dg.AssetCheckSpec(
        "pending_feedback_bounded",
        asset=ATTRIBUTED_FEEDBACK,
        description=(
            "Pending feedback (its evaluation not loaded yet) stays bounded: at most "
            f"max({PENDING_ABSOLUTE_FLOOR}, {PENDING_SHARE_LIMIT:.0%} of deduplicated feedback), "
            f"and not growing in each of the last {PENDING_GROWTH_STREAK} runs. A failure means "
            "evaluation events are missing or late (event log, sealing or loading)."
        ),
    ),
    evaluate=_pending_feedback_bounded,
    severity=dg.AssetCheckSeverity.WARN,
)

CHECKS = [
    coverage_at_most_100,
    success_plus_failure_is_100,
    no_evaluation_file_loaded_twice,
    no_feedback_file_loaded_twice,
    pending_feedback_bounded,
]
