"""``make run`` as a new user runs it, twice, stopped with Ctrl-C each time (issue 12): the
second run prints the same demo key and a client of the first run's key keeps working; Ctrl-C
ends the run without make's "Error 130"."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import requests

from devtools.engines.ports import free_ports
from tests.support.server import REPO


class MakeRun:
    """One ``make run`` in its own process group, as a terminal's foreground job."""

    def __init__(self, data: Path, api_port: int, dagster_port: int, log: Path):
        self.api_port = api_port
        self.log = log
        env = {
            **os.environ,
            "FLAGSIGHT_DATA_DIR": str(data),
            "FLAGSIGHT_PORT": str(api_port),
            "DAGSTER_PORT": str(dagster_port),
        }
        env.pop("FLAGSIGHT_ADMIN_TOKEN", None)
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                ["make", "--no-print-directory", "run"],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_until_running(self, timeout_s: float = 120) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.log.read_text()
            if "flagsight is running" in text:
                return text
            assert self.proc.poll() is None, text
            time.sleep(0.5)
        raise AssertionError(self.log.read_text())

    def ctrl_c(self, timeout_s: float = 60) -> str:
        """What a terminal does on Ctrl-C: SIGINT to the whole foreground process group."""
        os.killpg(self.proc.pid, signal.SIGINT)
        self.proc.wait(timeout_s)
        return self.log.read_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def demo_key(output: str) -> str:
    return re.search(r"^\s*Demo API key\s+(fsk_\S+)", output, re.MULTILINE).group(1)


def evaluate(port: int, key: str) -> requests.Response:
    return requests.post(
        f"http://127.0.0.1:{port}/v1/evaluate",
        json={"flagKey": "dark-mode", "userIdentifier": "user-1"},
        headers={"Authorization": f"ApiKey {key}"},
        timeout=10,
    )


def test_make_run_keeps_its_demo_key_across_restarts_and_stops_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "var"
    runs: list[MakeRun] = []
    keys: list[str] = []
    try:
        for attempt in range(2):
            run = MakeRun(data, *free_ports(2), tmp_path / f"run-{attempt}.log")
            runs.append(run)
            keys.append(demo_key(run.wait_until_running()))
            # the first run's key works on both runs (dark-mode is on for everyone)
            assert evaluate(run.api_port, keys[0]).json()["value"] is True
            stopped = run.ctrl_c()
            assert "Error 130" not in stopped and "***" not in stopped, stopped[-2000:]
            assert "flagsight stopped." in stopped
        assert keys[1] == keys[0]
    finally:
        for run in runs:
            run.kill()


def test_make_run_stops_when_its_port_is_taken_instead_of_claiming_to_run(tmp_path: Path) -> None:
    """A second ``make run`` (or anything else) on the API port would answer the readiness
    wait while this run's own server could not start: it must say so and stop."""
    import socket

    api_port, dagster_port = free_ports(2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", api_port))
        taken.listen()
        run = MakeRun(tmp_path / "var", api_port, dagster_port, tmp_path / "run.log")
        try:
            run.proc.wait(120)
        finally:
            run.kill()
    output = (tmp_path / "run.log").read_text()
    assert run.proc.returncode != 0, output
    assert f"Port {api_port} on 127.0.0.1 is taken" in output
    assert "flagsight is running" not in output and "Demo API key" not in output
