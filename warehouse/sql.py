"""The warehouse's SQL files, a runner that executes them statement by statement, and one
transaction."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb

SQL_DIR = Path(__file__).with_name("sql")

_COMMENT = re.compile(r"--[^\n]*")
_PARAMETER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def split_statements(text: str) -> list[str]:
    """The statements of a SQL text, comments removed, in order."""
    return [part.strip() for part in _COMMENT.sub("", text).split(";") if part.strip()]


def statements(name: str) -> list[str]:
    """The statements of ``warehouse/sql/<name>.sql``."""
    return split_statements((SQL_DIR / f"{name}.sql").read_text(encoding="utf-8"))


def run_script(
    con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, object] | None = None
) -> None:
    """Execute every statement of a SQL file, passing each the named parameters it uses."""
    params = params or {}
    for statement in statements(name):
        used = {key: params[key] for key in _PARAMETER.findall(statement)}
        con.execute(statement, used or None)


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """The block in one transaction: committed when it ends, rolled back if it raises anything
    (an interrupted run leaves nothing half written, and its marks for the next run)."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def insert_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence],
    *,
    computed_at: bool = False,
) -> None:
    """``rows`` into ``table``'s ``columns`` (each with ``computed_at`` now, when asked) in one
    statement, a list parameter per column: a parameter per value cost DuckDB 0.1-2 ms a row
    (``executemany`` or multi-row VALUES), and registering an Arrow table imports pandas
    (0.2 s in a run that has not yet)."""
    if not rows:
        return
    names = [*columns, "computed_at"] if computed_at else list(columns)
    values = [f"unnest(${i + 1})" for i in range(len(columns))]
    values += ["current_timestamp"] if computed_at else []
    con.execute(
        f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(values)}",
        [list(column) for column in zip(*rows, strict=True)],
    )
