"""Reading every figure back from the published warehouse, for comparison in tests."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb

FIGURES = (
    "evaluations",
    "feedback_count",
    "feedback_coverage",
    "success_count",
    "failure_count",
    "success_rate",
    "failure_rate",
    "avg_latency_ms",
)


def published_rows(path: Path, table: str, order: str) -> list[dict]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        cursor = con.execute(f"SELECT * FROM {table} ORDER BY {order}")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()


def without_timestamps(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "computed_at"} for row in rows]


def assert_same_figures(actual: dict, expected: dict, where: object, prefix: str = "") -> None:
    for name in FIGURES:
        got, want = actual[prefix + name], expected[name]
        if want is None or got is None:
            assert got is want, f"{where} {prefix}{name}: {got!r} != {want!r}"
        else:
            assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-9), (
                f"{where} {prefix}{name}: {got!r} != {want!r}"
            )
