"""With the lake in a bucket, the pipeline host's warehouse snapshot reaches every API host."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import pytest

from api.infra.objectstore import is_remote
from api.settings import S3Options, Settings
from devtools.engines.seaweedfs import SeaweedFS
from warehouse.shared_snapshot import download_if_newer, upload_snapshot


@pytest.fixture
def s3_env(seaweedfs: SeaweedFS) -> str:
    return f"s3://{seaweedfs.bucket}/snapshot-test-{time.time_ns()}"


@pytest.fixture
def s3(seaweedfs: SeaweedFS) -> S3Options:
    return Settings.from_env(seaweedfs.environment()).s3


def _warehouse(path: Path, figure: int) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE OR REPLACE TABLE figures AS SELECT ? AS evaluations", [figure])


def _figure(path: Path) -> int:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT evaluations FROM figures").fetchone()[0]


def test_a_host_takes_each_newer_snapshot_once(s3_env: str, s3: S3Options, tmp_path: Path) -> None:
    published, follower = tmp_path / "pipeline.duckdb", tmp_path / "host" / "warehouse.duckdb"
    follower.parent.mkdir()
    assert is_remote(s3_env) and not is_remote(str(tmp_path))
    assert download_if_newer(s3_env, follower, s3) is False  # nothing published yet
    _warehouse(published, 100)
    upload_snapshot(published, s3_env, s3)
    assert download_if_newer(s3_env, follower, s3) is True
    assert _figure(follower) == 100
    assert download_if_newer(s3_env, follower, s3) is False  # already current
    time.sleep(1.1)  # object times have one-second resolution on some stores
    _warehouse(published, 250)
    upload_snapshot(published, s3_env, s3)
    assert download_if_newer(s3_env, follower, s3) is True
    assert _figure(follower) == 250
    assert not list(follower.parent.glob(".*download*"))
