"""``make cluster`` (``scripts/cluster.py``) as a user sees it, on one host to keep it short:
the admin token it prints has the form every admin token has (``fsa_`` and 43 URL-safe
characters, ``docs/admin-api.md``) and opens the admin API; no secret it starts the cluster
with is on a command line (``ps`` shows those to every user); Ctrl-C stops all of it."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from devtools.engines.ports import free_ports
from devtools.engines.postgres import PostgresCluster
from tests.support.server import REPO


def processes() -> Iterator[tuple[int, str, str]]:
    """(pid, command line, environment) of every process we may read."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                yield (
                    int(entry.name),
                    (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"),
                    (entry / "environ").read_bytes().decode(errors="replace"),
                )


def end_everything_under(root: Path) -> None:
    """SIGKILL the group of every process that names ``root`` (each part of the cluster runs in
    a session of its own, with a data directory under it), then stop its PostgreSQL."""
    for pid, command, environment in processes():
        if str(root) in command or str(root) in environment:
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
    PostgresCluster(root / "postgres").stop("immediate")


def wait_for_banner(proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 240) -> str:
    """The printed URLs and secrets (generous: initdb and five servers on a loaded machine)."""
    deadline = time.monotonic() + timeout_s
    while "flagsight cluster is running" not in (text := log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, text[-3000:]
        time.sleep(0.5)
    return text


def test_make_cluster_prints_a_working_admin_token_and_no_secret_shows_in_ps() -> None:
    root = Path(tempfile.mkdtemp(prefix="flagsight-cluster-"))  # outside pytest's root-only
    os.chmod(root, 0o755)  # temporary folder: the postgres user must reach it
    log = root / "make-cluster.log"
    host_port, dagster_port = free_ports(2)
    env = {
        **{k: v for k, v in os.environ.items() if k != "FLAGSIGHT_ADMIN_TOKEN"},
        "FLAGSIGHT_CLUSTER_DIR": str(root),
        "FLAGSIGHT_CLUSTER_HOSTS": "1",
        "FLAGSIGHT_CLUSTER_PORT": str(host_port),
        "DAGSTER_PORT": str(dagster_port),
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "scripts/cluster.py"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        banner = wait_for_banner(proc, log)
        token = re.search(r"^\s*Admin token\s+(\S+)", banner, re.MULTILINE).group(1)
        key = re.search(r"^\s*Demo API key\s+(fsk_\S+)", banner, re.MULTILINE).group(1)
        assert re.fullmatch(r"fsa_[A-Za-z0-9_-]{43}", token), token
        organizations = requests.get(
            f"http://127.0.0.1:{host_port}/admin/v1/organizations",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert organizations.status_code == 200
        assert [
            command for _, command, _ in processes() if token in command or key in command
        ] == []
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        proc.wait(120)  # generous for a loaded machine: Dagster, PostgreSQL, SeaweedFS stop
        assert "flagsight cluster stopped." in log.read_text()
        assert [pid for pid, command, env in processes() if str(root) in command + env] == []
    finally:
        end_everything_under(root)
        shutil.rmtree(root, ignore_errors=True)
