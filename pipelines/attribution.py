"""Fold newly loaded events into the counters: dedup and attribute feedback, count evaluations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from api.eventlog.schema import EVALUATION, FEEDBACK
from pipelines.watermarks import latest_batch, set_watermark, watermark
from warehouse.sql import run_script, transaction

_EVALUATIONS_FOLDED = "evaluations_folded"
_FEEDBACK_FOLDED = "feedback_folded"


@dataclass(frozen=True)
class FoldReport:
    """What one fold did, and the feedback state after it."""

    evaluation_batches: tuple[int, int]
    feedback_batches: tuple[int, int]
    new_feedback_winners: int
    newly_attributed: int
    pending_count: int
    deduplicated_feedback: int


RolloutStart = tuple[str, str, str, float]
"""``(environment id, flag key, started at (ISO 8601), percentage now)`` of a running rollout."""


def fold_new_events(
    con: duckdb.DuckDBPyConnection, run_id: str | None, rollouts: Sequence[RolloutStart] = ()
) -> FoldReport:
    """Fold every load batch past the watermarks, all or nothing. The arms of a flag
    environment whose running rollout (``rollouts``) started since the last fold are counted
    afresh from its start (``warehouse/sql/arm_epochs.sql``)."""
    with transaction(con):
        _start_epochs(con, rollouts)
        eval_lo, fb_lo = watermark(con, _EVALUATIONS_FOLDED), watermark(con, _FEEDBACK_FOLDED)
        eval_hi = max(eval_lo, latest_batch(con, EVALUATION))
        fb_hi = max(fb_lo, latest_batch(con, FEEDBACK))
        run_script(
            con,
            "attribute_feedback",
            {"eval_lo": eval_lo, "eval_hi": eval_hi, "fb_lo": fb_lo, "fb_hi": fb_hi},
        )
        winners = con.execute("SELECT count(*) FROM fb_winners").fetchone()[0]
        found = con.execute("SELECT count(*) FROM fb_found").fetchone()[0]
        set_watermark(con, _EVALUATIONS_FOLDED, eval_hi)
        set_watermark(con, _FEEDBACK_FOLDED, fb_hi)
        pending, total = (
            _pending(con),
            con.execute("SELECT count(*) FROM feedback_latest").fetchone()[0],
        )
        con.execute(
            "INSERT INTO pending_feedback_history VALUES (current_timestamp, ?, ?, ?)",
            [run_id, pending, total],
        )
    return FoldReport((eval_lo, eval_hi), (fb_lo, fb_hi), winners, found, pending, total)


def _start_epochs(con: duckdb.DuckDBPyConnection, rollouts: Sequence[RolloutStart]) -> None:
    con.execute(
        "CREATE OR REPLACE TEMP TABLE rollout_starts (environment_id VARCHAR, flag_key VARCHAR,"
        " since TIMESTAMPTZ, rollout_percentage DOUBLE)"
    )
    if rollouts:
        con.executemany("INSERT INTO rollout_starts VALUES (?, ?, ?, ?)", list(rollouts))
    run_script(con, "arm_epochs")


def _pending(con: duckdb.DuckDBPyConnection) -> int:
    return int(
        con.execute("SELECT count(*) FROM feedback_latest WHERE flag_key IS NULL").fetchone()[0]
    )
