"""The servers a benchmark compares: flagsight as ``flagsight serve`` runs it (embedded, or as
a host of the cluster mode), and the references (minimal Falcon apps) under the same gunicorn
configuration, worker class and count.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from devtools.engines.ports import free_port

REPO = Path(__file__).resolve().parents[1]
GUNICORN_CONF = REPO / "api" / "server" / "gunicorn_conf.py"


class Server:
    """One gunicorn master on a loopback port, its workers, and its log file."""

    name = "server"

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, cwd: Path = REPO):
        self.port = free_port()
        self.cwd = cwd
        self._argv = [a.replace("{port}", str(self.port)) for a in argv]
        self._env = env
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, workers: int, timeout_s: float = 60.0) -> Server:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self._argv, cwd=self.cwd, env=self._env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log_path.read_text()[-3000:]}")
            if len(self.worker_pids()) == workers and self.ready():
                return self
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready: {self.log_path.read_text()[-3000:]}")

    def ready(self) -> bool:
        raise NotImplementedError

    def worker_pids(self) -> list[int]:
        if self.proc is None:
            return []
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True)
        return sorted(int(p) for p in out.stdout.split())

    def pids(self) -> list[int]:
        """Every process of this server: master, workers and helpers (charged for CPU)."""
        return ([self.proc.pid] if self.proc else []) + self.worker_pids() + self.helper_pids()

    def helper_pids(self) -> list[int]:
        return []

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None


class FlagsightServer(Server):
    """``flagsight serve`` over a fresh data directory, with its production configuration."""

    def __init__(self, data_dir: Path, workers: int, log_path: Path,
                 extra_env: dict[str, str] | None = None, name: str = "flagsight",
                 source: Path = REPO):  # fmt: skip
        """``extra_env`` points a host at the cluster mode's engines (PostgreSQL, the bucket);
        ``source`` is the checkout it runs (``bench.compare`` runs other revisions)."""
        self.name = name
        self.data_dir = data_dir
        self.admin_token = secrets.token_urlsafe(24)
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("FLAGSIGHT_", "PROMETHEUS_"))
        }
        env |= {"FLAGSIGHT_DATA_DIR": str(data_dir), "FLAGSIGHT_ADMIN_TOKEN": self.admin_token}
        env |= extra_env or {}
        argv = [sys.executable, "-m", "api.cli", "serve", "--host", "127.0.0.1",
                "--port", "{port}", "--workers", str(workers)]  # fmt: skip
        super().__init__(argv, env, log_path, cwd=source)

    def helper_pids(self) -> list[int]:
        """The event log's sealer process: a grandchild of the master, found by its argv."""
        if self.proc is None:
            return []
        master = str(self.proc.pid).encode()
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if SEALER_MODULES & set(argv) and master in argv:
                found.append(int(proc.name))
        return found

    def ready(self) -> bool:
        try:
            return requests.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except requests.RequestException:
            return False


SEALER_MODULES = {b"api.server.sealer_process", b"api.eventlog.sealer_process"}
"""The sealer process's module now, and before it moved (``bench.compare`` runs older
revisions too: their sealer's CPU counts as well)."""


class ReferenceServer(Server):
    """An app of ``bench.reference_app`` under the same gunicorn configuration file and worker
    count as flagsight."""

    def __init__(self, workers: int, log_path: Path, app: str = "tight_app",
                 name: str = "tight reference"):  # fmt: skip
        self.name = name
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("FLAGSIGHT_", "PROMETHEUS_"))
        }
        argv = [sys.executable, "-m", "gunicorn", "--config", str(GUNICORN_CONF),
                "--bind", "127.0.0.1:{port}", "--workers", str(workers),
                f"bench.reference_app:{app}"]  # fmt: skip
        super().__init__(argv, env, log_path)

    def ready(self) -> bool:
        try:
            answer = requests.post(
                f"{self.url}/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, timeout=1
            )
        except requests.RequestException:
            return False
        return answer.status_code == 200


@contextlib.contextmanager
def cluster_engines(work_dir: Path) -> Iterator[dict[str, str]]:
    """A private PostgreSQL and SeaweedFS for the cluster-mode host; its environment."""
    from devtools.engines.postgres import PostgresCluster
    from devtools.engines.seaweedfs import SeaweedFS

    # Outside the (private) work directory: the postgres user must reach its cluster's folder.
    root = Path(tempfile.mkdtemp(prefix="flagsight-bench-engines-"))
    os.chmod(root, 0o755)
    postgres = PostgresCluster(root / "postgres").start()
    lake = SeaweedFS(root / "seaweedfs")
    stack = contextlib.ExitStack()
    stack.callback(shutil.rmtree, root, ignore_errors=True)
    stack.callback(postgres.stop, "immediate")
    stack.callback(lake.stop)
    with stack:
        lake.start()
        yield {
            "FLAGSIGHT_DATABASE_URL": postgres.url,
            "FLAGSIGHT_EVENTS_URI": lake.events_uri,
            **lake.environment(),
        }
