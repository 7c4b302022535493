"""Compaction of the pipeline's working database, by our rules instead of DuckDB's vacuum.

Why not the vacuum: at every checkpoint, DuckDB's vacuum merges a table's row groups wherever
three fit in two. An incremental run appends each event table a partly filled row group (an
increment of 100,000 events gives row groups of about 66,000 and 33,000 rows), so every other
run merged the trailing groups again: about 240,000 rows of each event table decompressed and
compressed anew, 0.3-0.8 s of a run whose goal is 3 s, although a row group of 66,000 rows
scans as well as a full one. DuckDB has no per-table or per-size setting for it, so the
pipeline turns it off (``max_vacuum_tasks = 0``, ``pipelines.resources``) and compacts here:

- **small trailing row groups** (under an eighth of a row group each, the mark of small
  increments and of tables that grow by a few rows a run) are merged once they add up to an
  eighth of a row group, or number ``MAX_SMALL_GROUPS``; a row group of ordinary size is never
  rewritten for its size;
- **row groups with many deleted rows** (half or more: ``arm_users`` replaces the row of
  every user an increment touches, the derived tables replace what they recompute) have their
  live rows written again at the table's end; a fully deleted row group is dropped by the
  checkpoint itself.

Either way the rows are deleted and inserted again in one transaction, and the checkpoint that
follows drops the emptied row groups. A run rewrites at most ``MAX_REWRITE_ROWS`` live rows of
a table, so no run pays for a backlog at once. Row group layout comes from
``pragma_storage_info`` (slow to read for a large table: see ``FULL_INSPECTION_EVERY``); live
rows per group from a histogram of ``rowid`` (a row's physical position), about 20 ms for 3
million rows, only taken for a table with deleted rows.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from warehouse.sql import transaction

ROW_GROUP_ROWS = 122_880
"""DuckDB's row group size (its default, which the working database is created with)."""
SMALL_GROUP_ROWS = ROW_GROUP_ROWS // 8
"""A row group with fewer rows is small: increments of 100,000 events (groups of 66,000 and
33,000 rows) and ``feedback_latest``'s winners of such an increment are not."""
MAX_SMALL_GROUPS = 16
DEAD_SHARE = 1 / 2
"""A row group with this share of deleted rows has its live rows written again: one live row
written per deleted row reclaimed, and a table at most twice its live size."""
MAX_REWRITE_ROWS = 2 * ROW_GROUP_ROWS
FULL_INSPECTION_EVERY = 16
"""About one run in this many reads the row group layout of every table, which takes about
250 ms over the ``make bench`` history; the small trailing groups a table gathers meanwhile
number about this many. The other runs read only each table's rows and deleted rows (about
10 ms in all) and inspect a table whose rows are half deleted."""


def is_full_inspection(run_id: str | None) -> bool:
    """Whether the run ``run_id`` inspects every table: one in ``FULL_INSPECTION_EVERY``, by a
    hash of its id, so the choice needs no state; a call outside a run always does."""
    return run_id is None or zlib.crc32(run_id.encode()) % FULL_INSPECTION_EVERY == 0


@dataclass(frozen=True)
class RowGroup:
    """One row group: its first ``rowid``, its rows (deleted ones included) and its live rows."""

    start: int
    rows: int
    live: int

    @property
    def dead(self) -> int:
        return self.rows - self.live


def groups_to_rewrite(groups: Sequence[RowGroup]) -> list[RowGroup]:
    """The row groups whose live rows a run writes again, in table order (see the module)."""
    chosen: dict[int, RowGroup] = {}
    budget = MAX_REWRITE_ROWS
    worn = [g for g in groups if g.live and g.dead >= DEAD_SHARE * g.rows]
    for group in sorted(worn, key=lambda g: g.dead, reverse=True):
        if chosen and group.live > budget:
            break
        chosen[group.start] = group
        budget -= group.live
    tail: list[RowGroup] = []
    for group in reversed(groups):
        if group.rows >= SMALL_GROUP_ROWS or group.start in chosen:
            break
        tail.append(group)
    tail_live = sum(g.live for g in tail)
    due = len(tail) >= 2 and (tail_live >= SMALL_GROUP_ROWS or len(tail) >= MAX_SMALL_GROUPS)
    if due and (tail_live <= budget or not chosen):
        chosen.update((g.start, g) for g in tail)
    return [chosen[start] for start in sorted(chosen)]


def row_groups(con: duckdb.DuckDBPyConnection, table: str) -> list[RowGroup]:
    """The row groups of ``table`` in order, with their live rows."""
    sizes = con.execute(
        "SELECT row_group_id, sum(count) FROM pragma_storage_info(?) "
        "WHERE column_id = 0 AND column_path = '[0]' GROUP BY ALL ORDER BY row_group_id",
        [table],
    ).fetchall()
    starts, rows, start = [], [], 0
    for _, count in sizes:
        starts.append(start)
        rows.append(int(count))
        start += int(count)
    live_total = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    if live_total == sum(rows):
        return [RowGroup(s, r, r) for s, r in zip(starts, rows, strict=True)]
    ends = [start + count - 1 for start, count in zip(starts, rows, strict=True)]
    live = con.execute(f"SELECT histogram(rowid, ?) FROM {table}", [ends]).fetchone()[0] or {}
    return [RowGroup(s, r, int(live.get(e, 0))) for s, r, e in zip(starts, rows, ends, strict=True)]


def compact(con: duckdb.DuckDBPyConnection, full: bool = True) -> dict[str, int]:
    """Compact the connection's tables by the rules above; the live rows written again, per
    table that needed it, each table in its own transaction. Without ``full``, only the tables
    whose rows are half deleted are inspected."""
    physical = dict(
        con.execute(
            "SELECT table_name, estimated_size FROM duckdb_tables() "
            "WHERE database_name = current_database() AND schema_name = 'main' "
            "AND NOT temporary AND estimated_size > 0 ORDER BY table_name"
        ).fetchall()
    )
    if not full and physical:
        live = dict(
            con.execute(
                " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in physical)
            ).fetchall()
        )
        physical = {t: n for t, n in physical.items() if n - live[t] >= DEAD_SHARE * n}
    rewritten = {}
    for table in physical:
        groups = groups_to_rewrite(row_groups(con, table))
        if groups:
            rewritten[table] = _rewrite(con, table, groups)
    return rewritten


def _rewrite(con: duckdb.DuckDBPyConnection, table: str, groups: Sequence[RowGroup]) -> int:
    where = " OR ".join(f"rowid BETWEEN {g.start} AND {g.start + g.rows - 1}" for g in groups)
    with transaction(con):
        con.execute(f"CREATE OR REPLACE TEMP TABLE compacted_rows AS FROM {table} WHERE {where}")
        con.execute(f"DELETE FROM {table} WHERE {where}")
        con.execute(f"INSERT INTO {table} FROM compacted_rows")
        count = con.execute("SELECT count(*) FROM compacted_rows").fetchone()[0]
        con.execute("DROP TABLE compacted_rows")
    return int(count)
