"""Dagster's home (``$FLAGSIGHT_DATA_DIR/dagster``) and its instance configuration.

In the embedded default Dagster keeps runs, event logs and schedules in SQLite files under its
home, through storages that keep their engines (``pipelines.instance_storage``). With ``FLAGSIGHT_DATABASE_URL`` set they live in PostgreSQL (dagster-postgres), in a
schema of their own (``dagster``) beside the control plane's tables, so the daemon and the UI
survive the loss of the pipeline host and can be started on another one: only the warehouse
file, which the pipeline rebuilds from the lake, is local.

flagsight writes ``dagster.yaml`` and marks it; a file without the mark is the operator's own
and is left alone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MARK = "# written by flagsight: edit freely after removing this line\n"
DAGSTER_SCHEMA = "dagster"


def dagster_database_url(database_url: str) -> str:
    """``database_url`` with its search path set to Dagster's schema, for SQLAlchemy's
    psycopg2 dialect: dagster-postgres issues ``NOTIFY`` with parameters, which only
    psycopg2's client-side binding accepts (SQLAlchemy 2.1 would pick psycopg 3)."""
    parts = urlsplit(database_url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={DAGSTER_SCHEMA}"))
    return urlunsplit(parts._replace(scheme="postgresql+psycopg2", query=urlencode(query)))


TICK_RETENTION = (
    "retention:\n"
    "  schedule:\n    purge_after_days: 7\n"
    "  sensor:\n    purge_after_days:\n      skipped: 1\n      failure: 7\n      success: 7\n"
)
"""Dagster prunes the schedule's and sensors' ticks itself (a sensor ticks every 10 s: the
skipped ticks alone would grow without end); the runs are pruned by ``pipelines.retention``."""


SQLITE_STORAGES = (
    ("run_storage", "KeptEngineRunStorage", "history"),
    ("event_log_storage", "KeptEngineEventLogStorage", "history/runs"),
    ("schedule_storage", "KeptEngineScheduleStorage", "schedules"),
)
"""The embedded default's storages: Dagster's SQLite ones, in the folders of its own default,
keeping their SQLAlchemy engines (``pipelines.instance_storage``: a run's ~120 events no
longer compile their statements each time). The folders are written as absolute paths: a
home moved elsewhere gets its ``dagster.yaml`` rewritten by the next ``flagsight init``,
``serve`` or ``pipeline run`` (``make run`` starts with ``init``)."""


def _sqlite_storages(home: Path) -> str:
    return "".join(
        f"{key}:\n  module: pipelines.instance_storage\n  class: {name}\n"
        f"  config:\n    base_dir: {json.dumps(str((home / folder).resolve()), ensure_ascii=False)}\n"
        for key, name, folder in SQLITE_STORAGES
    )


def instance_yaml(home: Path, database_url: str | None) -> str:
    text = MARK + "telemetry:\n  enabled: false\n" + TICK_RETENTION
    if database_url:
        text += f"storage:\n  postgres:\n    postgres_url: '{dagster_database_url(database_url)}'\n"
    else:
        text += _sqlite_storages(home)
    return text


def ensure_dagster_schema(database_url: str) -> None:
    import psycopg

    with psycopg.connect(database_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {DAGSTER_SCHEMA}")


def prepare_dagster_home(home: Path, database_url: str | None) -> None:
    """Write the instance configuration for the current settings (unless it is the operator's)
    and, on PostgreSQL, create Dagster's schema. Dagster creates its tables on first use."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    wanted = instance_yaml(home, database_url)
    if path.exists():
        current = path.read_text()
        if current == wanted or not current.startswith(MARK):
            return
    if database_url:
        ensure_dagster_schema(database_url)
    temporary = path.with_name(f".dagster.yaml.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # holds a password
    with os.fdopen(fd, "w") as out:
        out.write(wanted)
    os.replace(temporary, path)
