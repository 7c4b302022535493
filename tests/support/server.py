"""A real ``flagsight serve`` (gunicorn, asgi workers) on a free loopback port, for tests."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from devtools.engines.ports import free_port

REPO = Path(__file__).resolve().parents[2]


class GunicornServer:
    """Starts, kills and restarts one server over a data directory."""

    def __init__(
        self,
        data_dir: Path,
        *,
        admin_token: str,
        workers: int = 2,
        env: dict[str, str] | None = None,
        open_files: tuple[int, int] | None = None,
    ):
        self.data_dir = data_dir
        self.admin_token = admin_token
        self.workers = workers
        self.extra_env = env or {}
        self.open_files = open_files  # (soft, hard) RLIMIT_NOFILE the server starts with
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> GunicornServer:
        env = {
            **os.environ,
            "FLAGSIGHT_DATA_DIR": str(self.data_dir),
            "FLAGSIGHT_ADMIN_TOKEN": self.admin_token,
            "FLAGSIGHT_SEAL_INTERVAL": "1",
            "FLAGSIGHT_WEBHOOK_ALLOW_PRIVATE": "1",  # the tests' receivers are on loopback
            "FLAGSIGHT_GRACEFUL_TIMEOUT": "10",
            **self.extra_env,
        }
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "api.cli",
                "serve",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=self._limit_open_files if self.open_files else None,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.kill()  # its workers too
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            try:
                if requests.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.kill()  # not left running for the caller, which gets no server to stop
        raise RuntimeError(f"server not ready in {timeout_s}s: {self.log_path.read_text()[-3000:]}")

    def _limit_open_files(self) -> None:
        assert self.open_files is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, self.open_files)

    def wait_config_everywhere(self, timeout_s: float = 10.0) -> None:
        """Until every worker serves the control plane's current version.

        A fresh connection may reach any worker, and a few requests that all answered as
        expected may have reached the same one. ``flagsight_config_version`` is the minimum
        over the live workers (multiprocess mode ``livemin``), so once it reaches the store's version,
        each worker has every change made so far.
        """
        from api.backends import open_store
        from api.settings import Settings

        env = {**os.environ, "FLAGSIGHT_DATA_DIR": str(self.data_dir), **self.extra_env}
        store = open_store(Settings.from_env(env))
        try:
            version = store.config_version()
        finally:
            store.close()
        deadline = time.monotonic() + timeout_s
        while (served := self.metric("flagsight_config_version")) < version:
            if time.monotonic() > deadline:
                raise AssertionError(f"workers serve config version {served}, not {version}")
            time.sleep(0.1)

    def metric(self, name: str) -> float:
        """The first sample of ``name`` on ``/metrics`` (all workers'), 0 when it is absent."""
        for line in requests.get(f"{self.url}/metrics", timeout=10).text.splitlines():
            if line.startswith((f"{name} ", f"{name}{{")):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def worker_pids(self) -> list[int]:
        assert self.proc is not None
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def stop(self, timeout_s: float = 30.0) -> None:
        """Graceful: SIGTERM, as an operator or a supervisor would."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL the master and every worker at once: nothing gets to clean up."""
        if self.proc:
            with contextlib.suppress(ProcessLookupError):  # workers outlive a dead master
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None
