"""Publish the warehouse readers open: build a snapshot file beside it, then rename it in.

Readers open ``warehouse.duckdb`` read-only. The pipeline never opens that file: it writes a
new file next to it and replaces it with an atomic rename, so a reader holding the old file
keeps a consistent view and the next reader gets the new one, with no lock taken either way.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import duckdb

from warehouse.sql import run_script


def publish(
    con: duckdb.DuckDBPyConnection,
    published_path: Path,
    run_id: str | None,
    script: str = "publish",
) -> int:
    """Write the snapshot ``warehouse/sql/<script>.sql`` copies and rename it over
    ``published_path``; returns its size in bytes."""
    published_path.parent.mkdir(parents=True, exist_ok=True)
    staging = published_path.with_name(f".{published_path.name}.{uuid.uuid4().hex}.tmp")
    con.execute("ATTACH ? AS snapshot", [str(staging)])
    try:
        run_script(con, script, {"run_id": run_id or ""})
        con.execute("CHECKPOINT snapshot")
    finally:
        con.execute("DETACH snapshot")
    try:
        _fsync(staging)
        os.replace(staging, published_path)
        _fsync(published_path.parent)
    finally:
        for leftover in (staging, staging.with_name(staging.name + ".wal")):
            leftover.unlink(missing_ok=True)
    return published_path.stat().st_size


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
