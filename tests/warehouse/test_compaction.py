"""Compaction of the working database: what is rewritten, what is left alone, nothing lost.

The rules are checked on their own (``groups_to_rewrite``), then on real DuckDB files with the
vacuum off, as the pipeline opens them: the row group layout after the checkpoint, and every
row still there, once.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from warehouse.compaction import (
    MAX_REWRITE_ROWS,
    MAX_SMALL_GROUPS,
    ROW_GROUP_ROWS,
    SMALL_GROUP_ROWS,
    RowGroup,
    compact,
    groups_to_rewrite,
    is_full_inspection,
    row_groups,
)


def _layout(sizes: list[int], live: list[int] | None = None) -> list[RowGroup]:
    groups, start = [], 0
    for index, rows in enumerate(sizes):
        groups.append(RowGroup(start, rows, rows if live is None else live[index]))
        start += rows
    return groups


def test_groups_of_ordinary_size_are_never_rewritten_for_their_size():
    """The layout an increment of 100,000 events leaves: partly filled, not small."""
    layout = _layout([ROW_GROUP_ROWS] * 80 + [66_666, 33_334] * 6)
    assert groups_to_rewrite(layout) == []


def test_small_trailing_groups_are_merged_once_they_add_up_to_a_small_group():
    few = _layout([ROW_GROUP_ROWS, 5_000, 5_000])
    assert groups_to_rewrite(few) == []
    enough = _layout([ROW_GROUP_ROWS, 66_666, *[4_000] * 4])
    assert sum(g.live for g in groups_to_rewrite(enough)) == 16_000 >= SMALL_GROUP_ROWS
    assert groups_to_rewrite(enough) == enough[2:]


def test_many_tiny_trailing_groups_are_merged_even_when_they_add_up_to_little():
    tiny = _layout([ROW_GROUP_ROWS, *[1] * (MAX_SMALL_GROUPS - 1)])
    assert groups_to_rewrite(tiny) == []
    tiny = _layout([ROW_GROUP_ROWS, *[1] * MAX_SMALL_GROUPS])
    assert groups_to_rewrite(tiny) == tiny[1:]


def test_only_the_trailing_small_groups_are_merged():
    """A small group followed by an ordinary one stays: merging it would rewrite that one."""
    layout = _layout([2_000, 2_000, ROW_GROUP_ROWS, 9_000, 9_000])
    assert groups_to_rewrite(layout) == layout[3:]


def test_half_deleted_groups_are_rewritten_most_deleted_first_within_the_budget():
    sizes = [ROW_GROUP_ROWS] * 6
    live = [ROW_GROUP_ROWS, 70_000, 62_000, 20_000, 40_000, 0]
    chosen = groups_to_rewrite(_layout(sizes, live))
    # 62,000 live is under half dead; the fully deleted group is left to the checkpoint.
    assert [g.live for g in chosen] == [20_000, 40_000]
    assert sum(g.live for g in chosen) <= MAX_REWRITE_ROWS
    worn = _layout([ROW_GROUP_ROWS] * 8, [60_000] * 8)
    chosen = groups_to_rewrite(worn)
    assert len(chosen) == MAX_REWRITE_ROWS // 60_000 and chosen == worn[:4]
    assert groups_to_rewrite(_layout([ROW_GROUP_ROWS], [30_000]))  # one even over the budget


def test_one_run_in_sixteen_inspects_every_table_by_its_id_and_a_call_outside_a_run_does():
    ids = [f"00000000-0000-0000-0000-{n:012d}" for n in range(1_600)]
    share = sum(is_full_inspection(run_id) for run_id in ids) / len(ids)
    assert 0.04 < share < 0.09
    assert is_full_inspection(None)
    assert is_full_inspection(ids[0]) == is_full_inspection(ids[0])


def _open(path: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    con.execute("SET max_vacuum_tasks = 0")
    return con


def _sizes(con: duckdb.DuckDBPyConnection, table: str) -> list[int]:
    return [g.rows for g in row_groups(con, table)]


def _rows(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple]:
    return con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()


@pytest.fixture
def con(tmp_path: Path):
    con = _open(tmp_path / "working.duckdb")
    yield con
    con.close()


def test_small_appends_become_one_row_group_and_no_row_is_lost(con):
    con.execute("CREATE TABLE events (id BIGINT, batch INTEGER, note VARCHAR)")
    for batch in range(12):
        con.execute(
            "INSERT INTO events SELECT range, ?, 'n' || range FROM range(? * 2000, ? * 2000 + 2000)",
            [batch, batch, batch],
        )
        con.execute("CHECKPOINT")
    before = _rows(con, "events")
    assert _sizes(con, "events") == [2_000] * 12  # the vacuum is off: one group per append
    assert compact(con) == {"events": 24_000}
    con.execute("CHECKPOINT")
    assert _sizes(con, "events") == [24_000]
    assert _rows(con, "events") == before
    assert compact(con) == {}  # nothing left to do


def test_half_deleted_groups_are_written_again_and_their_space_reclaimed(con):
    con.execute("CREATE TABLE users (user_key BIGINT, n INTEGER)")
    con.execute(f"INSERT INTO users SELECT range, 1 FROM range({3 * ROW_GROUP_ROWS})")
    con.execute("CHECKPOINT")
    # Replace the rows of 70% of the second group's users, as the fold replaces touched users.
    low, high = ROW_GROUP_ROWS, ROW_GROUP_ROWS + int(0.7 * ROW_GROUP_ROWS)
    con.execute(
        "CREATE TEMP TABLE touched AS SELECT user_key, n + 1 AS n FROM users "
        "WHERE user_key >= ? AND user_key < ?",
        [low, high],
    )
    con.execute("DELETE FROM users WHERE user_key IN (SELECT user_key FROM touched)")
    con.execute("INSERT INTO users SELECT * FROM touched")
    con.execute("CHECKPOINT")
    before = _rows(con, "users")
    assert sum(_sizes(con, "users")) == 3 * ROW_GROUP_ROWS + (high - low)
    assert compact(con, full=False) == {}  # a sixth of the table: left to a full inspection
    assert compact(con, full=True) == {"users": ROW_GROUP_ROWS - (high - low)}
    con.execute("CHECKPOINT")
    assert sum(_sizes(con, "users")) == 3 * ROW_GROUP_ROWS
    assert _rows(con, "users") == before


def test_a_run_that_is_not_a_full_inspection_only_looks_at_half_deleted_tables(con):
    con.execute("CREATE TABLE log (id BIGINT)")
    for start in range(0, 40, 2):
        con.execute("INSERT INTO log SELECT range FROM range(?, ?)", [start, start + 2])
        con.execute("CHECKPOINT")
    assert compact(con, full=False) == {}  # twenty tiny groups, left to a full inspection
    con.execute("DELETE FROM log WHERE id % 2 = 1")
    con.execute("CHECKPOINT")
    assert compact(con, full=False) == {"log": 20}
    con.execute("CHECKPOINT")
    assert _sizes(con, "log") == [20]


def test_a_table_with_a_primary_key_keeps_its_rows_and_its_constraint(con):
    con.execute("CREATE TABLE totals (k INTEGER PRIMARY KEY, v INTEGER)")
    for k in range(20):
        con.execute("INSERT INTO totals VALUES (?, ?)", [k, k * k])
        con.execute("CHECKPOINT")
    before = _rows(con, "totals")
    assert compact(con) == {"totals": 20}
    con.execute("CHECKPOINT")
    assert _rows(con, "totals") == before
    with pytest.raises(duckdb.ConstraintException):
        con.execute("INSERT INTO totals VALUES (3, 0)")
    con.execute("INSERT INTO totals VALUES (3, 1) ON CONFLICT DO UPDATE SET v = excluded.v")
    assert con.execute("SELECT v FROM totals WHERE k = 3").fetchone() == (1,)


def test_a_failed_rewrite_leaves_the_table_as_it_was(con, monkeypatch):
    con.execute("CREATE TABLE events (id BIGINT)")
    for start in range(0, 32, 2):
        con.execute("INSERT INTO events SELECT range FROM range(?, ?)", [start, start + 2])
        con.execute("CHECKPOINT")
    before = _rows(con, "events")

    class Failing:
        def __init__(self, real):
            self.real = real

        def execute(self, sql, *args):
            if sql.startswith("INSERT INTO events"):
                raise duckdb.IOException("disk full")
            return self.real.execute(sql, *args)

    with pytest.raises(duckdb.IOException):
        compact(Failing(con))
    assert _rows(con, "events") == before
