"""The warehouse's UTC windows by epoch arithmetic are DuckDB's own ``date_trunc`` and date in
UTC, to the microsecond, on both sides of 1970, of midnights and of leap days."""

from __future__ import annotations

from datetime import UTC, date, datetime

import duckdb
import pytest

from warehouse.migrations import register_macros

STEPS = {"minute": 60_000_000, "hour": 3_600_000_000, "day": 86_400_000_000}


@pytest.fixture(scope="module")
def con():
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    register_macros(con)
    con.execute(
        "CREATE TABLE times AS SELECT make_timestamptz(us) AS ts FROM (SELECT unnest(["
        "0, -1, 1, 59999999, 60000000, -60000000, -60000001, 86399999999, -86400000001, "
        "951782400000000, 951868799999999, 1767225599999999, 1767225600000000]) AS us "
        "UNION ALL SELECT (random() * 4e15 - 2e15)::BIGINT FROM range(20000))"
    )
    yield con
    con.close()


@pytest.mark.parametrize("unit", sorted(STEPS))
def test_utc_floor_is_date_trunc_in_utc(con, unit):
    differing = con.execute(
        f"SELECT count(*) FROM times WHERE utc_floor(ts, {STEPS[unit]}) "
        f"IS DISTINCT FROM date_trunc('{unit}', ts)"
    ).fetchone()[0]
    assert differing == 0
    assert con.execute("SELECT count(*) FROM times").fetchone()[0] == 20_013


def test_utc_date_is_the_date_in_utc(con):
    differing = con.execute(
        "SELECT count(*) FROM times WHERE utc_date(ts) IS DISTINCT FROM "
        "CAST(timezone('UTC', ts) AS DATE)"
    ).fetchone()[0]
    assert differing == 0
    assert con.execute(
        "SELECT utc_date(TIMESTAMPTZ '2024-02-29 23:59:59.999999+00'), "
        "utc_floor(TIMESTAMPTZ '1969-12-31 23:59:59.5+00', 60000000)"
    ).fetchone() == (date(2024, 2, 29), datetime(1969, 12, 31, 23, 59, tzinfo=UTC))
