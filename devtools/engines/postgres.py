"""A private PostgreSQL cluster: ``initdb`` into a folder, ``pg_ctl start`` on a loopback port.

PostgreSQL refuses to run as root, so when we are root the cluster's folder belongs to the
``postgres`` user and every server command runs through ``runuser -u postgres``. Connections
use TCP on 127.0.0.1 with ``trust`` authentication: the cluster is reachable from this machine
only and lives as long as the caller wants it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

from devtools.engines.ports import free_port

DATABASE = "flagsight"


def postgres_bin(name: str) -> str:
    """The path of a PostgreSQL server program (Debian keeps them out of PATH)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    if not candidates:
        raise FileNotFoundError(
            f"{name} not found: install Debian's postgresql package (make system-deps does)"
        )
    return candidates[0]


class PostgresCluster:
    """One PostgreSQL server with one database, ``flagsight``; see the module docstring."""

    def __init__(self, directory: Path, port: int | None = None):
        self.directory = Path(directory)
        self.port = port or free_port()
        self._as_root = os.geteuid() == 0

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = list(args)
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True)

    def _own(self, path: Path) -> None:
        if self._as_root:
            user = pwd.getpwnam("postgres")
            os.chown(path, user.pw_uid, user.pw_gid)

    def initialize(self) -> None:
        """Create the cluster's files once; a folder that already holds a cluster is kept."""
        data = self.directory / "data"
        if (data / "PG_VERSION").exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self._own(self.directory)
        if self._as_root and self._run("test", "-w", str(self.directory), check=False).returncode:
            raise PermissionError(
                f"user postgres cannot reach {self.directory}: every folder above it must be"
                " searchable by others (chmod o+x)"
            )
        self._run(
            postgres_bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--no-instructions",
        )  # fmt: skip

    def start(self, timeout_s: float = 30.0) -> PostgresCluster:
        """Start the server (initializing first if needed) and create the database."""
        self.initialize()
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories='{self.directory}' -c max_connections=300 "
            "-c fsync=on -c shared_buffers=64MB"
        )
        self._run(
            postgres_bin("pg_ctl"), "-D", str(self.directory / "data"), "-l",
            str(self.directory / "server.log"), "-o", options, "-w", "-t", str(int(timeout_s)),
            "start",
        )  # fmt: skip
        self._create_database()
        return self

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
            ).fetchone()
            if exists is None:
                conn.execute(f"CREATE DATABASE {DATABASE}")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; ``mode`` is pg_ctl's (smart, fast, immediate)."""
        self._run(
            postgres_bin("pg_ctl"), "-D", str(self.directory / "data"), "-m", mode, "-w",
            "stop", check=False,
        )  # fmt: skip

    def running(self) -> bool:
        status = self._run(
            postgres_bin("pg_ctl"), "-D", str(self.directory / "data"), "status", check=False
        )
        return status.returncode == 0

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=1).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
