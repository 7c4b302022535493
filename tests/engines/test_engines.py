"""The private engines the cluster-mode tests and ``make cluster`` start are real and usable."""

from __future__ import annotations

import psycopg
import pyarrow.fs as pafs
import pytest

from devtools.engines.postgres import PostgresCluster
from devtools.engines.seaweedfs import SeaweedFS


def test_postgres_gives_each_test_its_own_database(
    postgres_cluster: PostgresCluster, postgres_url: str
) -> None:
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("INSERT INTO t VALUES (1)")
        assert conn.execute("SHOW server_version").fetchone()[0].startswith("15")
    with psycopg.connect(postgres_cluster.url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 't'"
        ).fetchone()
    assert tables == (0,)


def test_seaweedfs_stores_and_lists_objects_with_signed_requests(seaweedfs: SeaweedFS) -> None:
    fs = seaweedfs.filesystem()
    with fs.open_output_stream(f"{seaweedfs.bucket}/probe/a.bin") as out:
        out.write(b"flagsight")
    listed = fs.get_file_info(pafs.FileSelector(f"{seaweedfs.bucket}/probe", recursive=True))
    assert [(i.path, i.size) for i in listed] == [(f"{seaweedfs.bucket}/probe/a.bin", 9)]
    stranger = pafs.S3FileSystem(
        access_key="someone", secret_key="wrong", endpoint_override=seaweedfs.endpoint,
        scheme="http", region="us-east-1",
    )  # fmt: skip
    with (
        pytest.raises(OSError, match="(?i)access|denied|403|InvalidAccessKeyId"),
        stranger.open_input_stream(f"{seaweedfs.bucket}/probe/a.bin") as stream,
    ):
        stream.read()
