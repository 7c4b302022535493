"""The folds' watermarks: the last load batch of an event type each fold has read
(``fold_state``), so that a run reads only the batches loaded since (``pipelines.attribution``,
``pipelines.lifecycle``, ``pipelines.metrics``)."""

from __future__ import annotations

import duckdb


def watermark(con: duckdb.DuckDBPyConnection, name: str) -> int:
    """The last load batch the fold ``name`` read; 0 before its first run."""
    rows = con.execute("SELECT value FROM fold_state WHERE name = ?", [name]).fetchall()
    return int(rows[0][0]) if rows else 0


def set_watermark(con: duckdb.DuckDBPyConnection, name: str, value: int) -> None:
    con.execute(
        "INSERT INTO fold_state VALUES (?, ?) ON CONFLICT DO UPDATE SET value = excluded.value",
        [name, value],
    )


def latest_batch(con: duckdb.DuckDBPyConnection, event_type: str) -> int:
    """The newest load batch of ``event_type``; 0 when none was loaded."""
    [(latest,)] = con.execute(
        "SELECT max(load_batch) FROM load_batches WHERE event_type = ?", [event_type]
    ).fetchall()
    return int(latest) if latest is not None else 0
