"""Dagster's instance: SQLite files in the embedded default, PostgreSQL (its own schema) when
``FLAGSIGHT_DATABASE_URL`` is set, so runs survive the loss of the pipeline host."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import psycopg
import pytest

from api.infra.dagster_home import MARK, prepare_dagster_home


@dg.asset
def probe() -> int:
    return 1


def _materialize_in(home: Path) -> str:
    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    try:
        with dg.DagsterInstance.get() as instance:
            result = dg.materialize([probe], instance=instance)
            assert result.success
            return type(instance.run_storage).__name__
    finally:
        if previous is None:
            del os.environ["DAGSTER_HOME"]
        else:
            os.environ["DAGSTER_HOME"] = previous


def test_embedded_default_keeps_runs_under_the_data_dir(tmp_path: Path) -> None:
    prepare_dagster_home(tmp_path / "dagster", None)
    assert _materialize_in(tmp_path / "dagster") == "KeptEngineRunStorage"
    history = tmp_path / "dagster" / "history"  # where Dagster's own SQLite default keeps them
    assert (history / "runs.db").is_file() and (history / "runs" / "index.db").is_file()
    assert (tmp_path / "dagster" / "schedules" / "schedules.db").is_file()


def test_with_a_database_url_runs_are_kept_in_postgres_in_their_own_schema(
    tmp_path: Path, postgres_url: str
) -> None:
    prepare_dagster_home(tmp_path / "dagster", postgres_url)
    assert (tmp_path / "dagster" / "dagster.yaml").stat().st_mode & 0o077 == 0  # a password
    assert _materialize_in(tmp_path / "dagster") == "PostgresRunStorage"
    with psycopg.connect(postgres_url) as conn:
        runs = conn.execute("SELECT count(*) FROM dagster.runs").fetchone()
        public = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    assert runs == (1,)
    assert public == (0,)  # nothing of Dagster's beside the control plane's tables
    # A second host pointed at the same database sees the run: the UI can move.
    prepare_dagster_home(tmp_path / "other" / "dagster", postgres_url)
    os.environ["DAGSTER_HOME"] = str(tmp_path / "other" / "dagster")
    try:
        with dg.DagsterInstance.get() as instance:
            assert len(instance.get_run_records()) == 1
    finally:
        del os.environ["DAGSTER_HOME"]


def test_an_operators_own_dagster_yaml_is_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    prepare_dagster_home(home, None)
    assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"
    (home / "dagster.yaml").write_text(MARK + "telemetry:\n  enabled: true\n")
    prepare_dagster_home(home, None)
    assert "enabled: false" in (home / "dagster.yaml").read_text()


@pytest.fixture(autouse=True)
def _no_inherited_dagster_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)


def test_an_api_worker_leaves_dagsters_home_to_init_and_the_pipeline(tmp_path: Path) -> None:
    """A worker's services make no Dagster home (with PostgreSQL, preparing it may connect to
    create Dagster's schema: the pipeline's set-up, not a worker's); ``flagsight init`` and the
    pipeline's own start make it."""
    from api.server.wiring import build_services
    from api.settings import Settings
    from pipelines.cli import run_pipeline_once

    settings = Settings(data_dir=tmp_path / "data", admin_token="dagster-home-token-0123456789")
    services = build_services(settings)
    try:
        assert not settings.dagster_home.exists()
    finally:
        services.event_log.close()
        services.meter.close()
    run_pipeline_once(settings, echo=lambda line: None)
    assert (settings.dagster_home / "dagster.yaml").read_text().startswith(MARK)
