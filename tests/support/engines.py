"""The real engines of the cluster mode for tests: one private PostgreSQL cluster per test
session (a fresh database per test) and SeaweedFS started by the tests that need it."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg

from devtools.engines.postgres import PostgresCluster
from devtools.engines.seaweedfs import SeaweedFS

_databases = itertools.count(1)


def postgres_session() -> Iterator[PostgresCluster]:
    """A private PostgreSQL cluster, for the whole session (or a test's own, to stop and start).
    Its folder is outside pytest's temporary root (which only root may enter) so that the
    ``postgres`` user can own it."""
    directory = Path(tempfile.mkdtemp(prefix="flagsight-pg-"))
    os.chmod(directory, 0o755)
    cluster = PostgresCluster(directory / "cluster").start()
    try:
        yield cluster
    finally:
        cluster.stop("immediate")
        shutil.rmtree(directory, ignore_errors=True)


def fresh_database(cluster: PostgresCluster) -> str:
    """A new, empty database in ``cluster``; its URL."""
    name = f"test_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(cluster.admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return cluster.admin_url.rsplit("/", 1)[0] + f"/{name}"


def seaweedfs_for(directory: Path) -> Iterator[SeaweedFS]:
    store = SeaweedFS(directory).start()
    try:
        yield store
    finally:
        store.stop()
