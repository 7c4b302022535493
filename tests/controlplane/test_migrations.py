"""Migrations: numbered files applied once, in order, tracked in schema_migrations."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import psycopg
import pytest

from api.controlplane.migrations import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS, discover
from api.controlplane.postgres_store import PostgresBackend, PostgresControlPlaneStore
from api.controlplane.sqlite_store import SqliteControlPlaneStore, apply_migrations


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_shipped_migrations_are_numbered_from_one_alike_for_both_backends() -> None:
    numbers = [(m.number, m.name) for m in discover(SQLITE_MIGRATIONS)]
    assert [number for number, _ in numbers] == list(range(1, len(numbers) + 1))
    assert [(m.number, m.name) for m in discover(POSTGRES_MIGRATIONS)] == numbers


def test_applying_twice_changes_nothing(tmp_path) -> None:
    conn = _connect(tmp_path / "db")
    assert apply_migrations(conn) == [m.number for m in discover(SQLITE_MIGRATIONS)]
    schema = conn.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()
    assert apply_migrations(conn) == []
    assert conn.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall() == schema
    assert conn.execute("SELECT count(*) FROM config_version").fetchone() == (1,)


def test_reopening_a_store_keeps_its_data(tmp_path) -> None:
    path = tmp_path / "cp.sqlite3"
    organization = SqliteControlPlaneStore(path).create_organization("A", "pro")
    reopened = SqliteControlPlaneStore(path)
    assert reopened.get_organization(organization.id) == organization
    rows = sqlite3.connect(path).execute("SELECT version, name FROM schema_migrations").fetchall()
    assert rows == [
        (1, "initial"),
        (2, "changes"),
        (3, "segment_history"),
        (4, "rollout_waiting"),
        (5, "rollout_guard"),
        (6, "local_grants"),
        (7, "flag_lifecycle"),
        (8, "code_references"),
        (9, "stale_flags"),
        (10, "segment_conditions"),
        (11, "metrics"),
    ]


def test_new_migrations_apply_in_order_after_old_ones(tmp_path) -> None:
    directory = tmp_path / "migrations"
    directory.mkdir()
    (directory / "0002_second.sql").write_text("INSERT INTO t VALUES ('second');\n")
    (directory / "0001_first.sql").write_text("-- a table\nCREATE TABLE t (\n  v TEXT\n);\n")
    conn = _connect(tmp_path / "db")
    assert apply_migrations(conn, directory) == [1, 2]
    (directory / "0003_third.sql").write_text("INSERT INTO t VALUES ('third; with semicolon');")
    assert apply_migrations(conn, directory) == [3]
    assert conn.execute("SELECT v FROM t").fetchall() == [("second",), ("third; with semicolon",)]


def test_a_failing_migration_is_rolled_back_whole(tmp_path) -> None:
    directory = tmp_path / "migrations"
    directory.mkdir()
    (directory / "0001_bad.sql").write_text(
        "CREATE TABLE t (v TEXT);\nINSERT INTO missing VALUES (1);\n"
    )
    conn = _connect(tmp_path / "db")
    with pytest.raises(sqlite3.OperationalError):
        apply_migrations(conn, directory)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 't'").fetchall() == []
    assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone() == (0,)


@pytest.mark.parametrize(
    "names", [["1_short.sql"], ["0001_a.sql", "0001_b.sql"], ["0001_Upper.sql"]]
)
def test_bad_file_names_are_refused(tmp_path, names) -> None:
    for name in names:
        (tmp_path / name).write_text("SELECT 1;")
    with pytest.raises(ValueError):
        discover(tmp_path)


def test_postgres_hosts_starting_together_apply_each_migration_once(postgres_url) -> None:
    applied: list[int] = []
    start = threading.Barrier(4)

    def host() -> None:
        start.wait()
        applied.extend(PostgresBackend(postgres_url).migrate())

    threads = [threading.Thread(target=host) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(applied) == [m.number for m in discover(POSTGRES_MIGRATIONS)]
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT version FROM controlplane.schema_migrations").fetchall()
    assert sorted(rows) == [(m.number,) for m in discover(POSTGRES_MIGRATIONS)]


def test_postgres_audit_records_are_immutable(postgres_url) -> None:
    store = PostgresControlPlaneStore(postgres_url)
    store.create_organization("A", "pro")
    store.close()
    with psycopg.connect(postgres_url) as conn:
        for statement in ("UPDATE controlplane.audit_log SET actor = 'x'",
                          "DELETE FROM controlplane.audit_log",
                          "TRUNCATE controlplane.audit_log"):  # fmt: skip
            with pytest.raises(psycopg.errors.RaiseException, match="immutable"):
                conn.execute(statement)
            conn.rollback()
