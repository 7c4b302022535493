"""The pipeline's working-database schema, as numbered migrations applied once each.

``NNNN_name.sql`` files run in order inside one transaction each, and the version applied is
recorded in ``schema_migrations``. A database created before migrations existed holds version
1's tables already: ``0001`` is written with ``IF NOT EXISTS`` so that it adopts it.

``migrate`` also registers, on the connection, the macros the migrations and the SQL files use
(they are defined in Python, next to the code that reads what they compute).
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from warehouse.sql import split_statements, transaction
from warehouse.statistics.histogram import bucket_sql

MIGRATIONS_DIR = Path(__file__).parent
_NAME = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


def migrations() -> list[tuple[int, str, Path]]:
    """``(version, name, path)`` of every migration file, by version."""
    found = []
    for path in MIGRATIONS_DIR.glob("*.sql"):
        match = _NAME.fullmatch(path.name)
        if match:
            found.append((int(match[1]), match[2], path))
    return sorted(found)


LATEST_VERSION = migrations()[-1][0]


def migrate(con: duckdb.DuckDBPyConnection, up_to: int | None = None) -> list[int]:
    """Apply the migrations the database lacks (those up to version ``up_to``, when given);
    returns the versions applied."""
    register_macros(con)
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
    )
    current = con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0]
    applied = []
    for version, name, path in migrations():
        if version <= current or (up_to is not None and version > up_to):
            continue
        with transaction(con):
            for statement in split_statements(path.read_text(encoding="utf-8")):
                con.execute(statement)
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, current_timestamp)", [version, name]
            )
        applied.append(version)
    return applied


def register_macros(con: duckdb.DuckDBPyConnection) -> None:
    """``latency_bucket(ms)``: a mean latency's histogram bucket (``statistics.histogram``).

    ``arm_user_key(...)``: the 128-bit MD5 of a user's identity in an arm, ``arm_users``'s join
    key. The fields are joined with the unit separator, which environment ids, flag keys and
    arms cannot contain, and the free-form user identifier comes last, so two identities never
    share a text. Two users colliding by chance is a 2^-128 event; a crafted collision (user
    identifiers are the caller's) can only merge two users of one arm into one.

    ``utc_floor(ts, step_us)`` and ``utc_date(ts)``: a time's UTC minute, hour or day (a step
    in microseconds) and its UTC date, by arithmetic on its epoch microseconds (floored, so
    exact before 1970 too). ``date_trunc`` and ``timezone`` on a TIMESTAMPTZ go through ICU's
    calendar, which took half the time of the windows' event scan; in UTC both give the same.
    """
    con.execute(f"CREATE OR REPLACE TEMP MACRO latency_bucket(ms) AS {bucket_sql('ms')}")
    con.execute(
        "CREATE OR REPLACE TEMP MACRO utc_floor(ts, step_us) AS make_timestamptz("
        "epoch_us(ts) - ((epoch_us(ts) % step_us) + step_us) % step_us)"
    )
    con.execute(
        "CREATE OR REPLACE TEMP MACRO utc_date(ts) AS CAST(make_timestamp(epoch_us(ts)) AS DATE)"
    )
    con.execute(
        "CREATE OR REPLACE TEMP MACRO arm_user_key(environment_id, flag_key, rollout_percentage, "
        "arm, user_identifier) AS md5_number(concat_ws(chr(31), environment_id, flag_key, "
        "CAST(rollout_percentage AS VARCHAR), arm, user_identifier))"
    )
