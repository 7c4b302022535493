"""``make run`` as a new user runs it (issue 12 and the first-hour review): started again over
the same data directory it prints the same demo key, and a client of the first run's key keeps
working; however it is launched and stopped (Ctrl-C in a terminal, Ctrl-C to a run launched in
the background with SIGINT ignored, a supervisor's SIGTERM) it stops within seconds, without
make's "Error 130", with a Dagster run in progress marked as ended by Dagster, and leaves no
process and no listener behind. Each run is a session of its own, and every process group in it
is ended in a ``finally``, pass or fail."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import dagster as dg
import requests

from devtools.engines.ports import free_ports
from tests.support.server import REPO

STOP_BOUND_S = 20.0
"""How long a stop may take. A few seconds here (6 to 9 s with a run in progress, on this
2-core machine, which took 15.8 s once under a full suite's load); the bound leaves room for
a loaded machine and is the 20 s after which the script used to force-kill Dagster."""


class MakeRun:
    """One ``make run`` as the leader of a session of its own (the test's stand-in for a
    terminal), with SIGINT at its default (a terminal's foreground job) or ignored (a
    background job of a non-interactive shell: ``make run &`` in a script, ``nohup``, some CI
    runners)."""

    def __init__(self, data: Path, log: Path, *, sigint_ignored: bool = False, **env: str) -> None:
        self.api_port, self.dagster_port = free_ports(2)
        self.data = data
        self.log = log
        environment = {
            **os.environ,
            "FLAGSIGHT_DATA_DIR": str(data),
            "FLAGSIGHT_PORT": str(self.api_port),
            "DAGSTER_PORT": str(self.dagster_port),
            **env,
        }
        environment.pop("FLAGSIGHT_ADMIN_TOKEN", None)
        disposition = signal.SIG_IGN if sigint_ignored else signal.SIG_DFL
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                ["make", "--no-print-directory", "run"],
                cwd=REPO,
                env=environment,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # whatever pytest itself was started with
                preexec_fn=lambda: signal.signal(signal.SIGINT, disposition),
            )

    def wait_until_running(self, timeout_s: float = 180) -> str:
        """The banner (generous: the first start on a loaded machine)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.log.read_text()
            if "flagsight is running" in text:
                return text
            assert self.proc.poll() is None, text
            time.sleep(0.5)
        raise AssertionError(self.log.read_text())

    def wait_for_dagster(self, timeout_s: float = 120) -> None:
        """Until Dagster's webserver listens (some seconds after the banner); past the time,
        the failure shows what ``make run`` and each of its logs said (a loaded CI run once
        waited 120 s for it with nothing else to tell why)."""
        deadline = time.monotonic() + timeout_s
        while not listening(self.dagster_port):
            assert time.monotonic() < deadline, self.said()
            time.sleep(0.5)

    def said(self) -> str:
        """``make run``'s output, then the last lines of each log it keeps."""
        parts = [self.log.read_text()]
        for path in sorted((self.data / "logs").glob("*.log")):
            lines = path.read_text(errors="replace").splitlines()[-30:]
            parts.append(f"--- {path.name} (last lines) ---\n" + "\n".join(lines))
        return "\n".join(parts)

    def ctrl_c(self) -> None:
        """What a terminal does on Ctrl-C: SIGINT to the whole foreground process group."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def terminate(self) -> None:
        """What a supervisor does: SIGTERM to the process it started."""
        self.proc.terminate()

    def seconds_to_stop(self) -> float:
        """From now until make has exited and nothing of the run is left running."""
        started = time.monotonic()
        self.proc.wait(STOP_BOUND_S * 4)  # measured against the bound below, not cut at it
        while running_in_session(self.proc.pid) and time.monotonic() - started < STOP_BOUND_S * 4:
            time.sleep(0.1)
        return time.monotonic() - started

    def end(self) -> None:
        """SIGKILL every process group of the session, whatever became of the run."""
        for pgid in {pgid for _, pgid, _ in session_processes(self.proc.pid)}:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait(10)


def session_processes(sid: int) -> list[tuple[int, int, str]]:
    """(pid, process group, state) of every process in session ``sid``, zombies included."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[3]) == sid:
            found.append((int(entry.name), int(fields[2]), fields[0]))
    return found


def running_in_session(sid: int) -> list[str]:
    """The command lines of the session's processes that have not exited (zombies have)."""
    running = []
    for pid, _, state in session_processes(sid):
        if state != "Z":
            try:
                running.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" "))
            except OSError:
                continue
    return [command.decode(errors="replace")[:200] for command in running]


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def demo_key(output: str) -> str:
    return re.search(r"^\s*Demo API key\s+(fsk_\S+)", output, re.MULTILINE).group(1)


def evaluate(port: int, key: str) -> requests.Response:
    return requests.post(
        f"http://127.0.0.1:{port}/v1/evaluate",
        json={"flagKey": "dark-mode", "userIdentifier": "user-1"},
        headers={"Authorization": f"ApiKey {key}"},
        timeout=10,
    )


def wait_for_a_run_in_progress(dagster_home: Path, timeout_s: float = 180) -> str:
    """The id of a Dagster run once one has started. The sensor starts one within 10 s of a
    sealed file (the demo's traffic, sealed every second here); generous for a loaded
    machine."""
    deadline = time.monotonic() + timeout_s
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        while time.monotonic() < deadline:
            started = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
            if started:
                return started[0].run_id
            time.sleep(0.2)
    raise AssertionError(f"no Dagster run started within {timeout_s} s")


def run_status(dagster_home: Path, run_id: str) -> dg.DagsterRunStatus:
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        return instance.get_run_by_id(run_id).status


def assert_stopped_cleanly(run: MakeRun) -> None:
    took = run.seconds_to_stop()
    output = run.log.read_text()
    assert took < STOP_BOUND_S, (took, output[-2000:])
    assert "flagsight stopped." in output, output[-2000:]
    assert "Error 130" not in output and "***" not in output, output[-2000:]
    for log in [run.log, *(run.data / "logs").iterdir()]:  # the terminal's and each part's
        text = log.read_text(errors="replace")
        assert "superseded" not in text, (log.name, text[-2000:])  # `dagster dev`'s warning
        # Dagster's webserver and daemon once both created its SQLite storage, and one died.
        assert "OperationalError" not in text, (log.name, text[-2000:])
    # DuckDB's "nanobind: leaked instances" report, once about 86 lines of the API's log at
    # every stop. (Dagster's code servers still print it now and then: not asserted here.)
    for log in (run.log, run.data / "logs" / "api.log"):
        assert "leaked" not in log.read_text(), log.read_text()[-2000:]
    assert running_in_session(run.proc.pid) == []
    assert not listening(run.dagster_port) and not listening(run.api_port)


def test_ctrl_c_stops_make_run_however_it_was_launched_and_the_demo_key_stays(
    tmp_path: Path,
) -> None:
    data = tmp_path / "var"
    runs: list[MakeRun] = []
    try:
        # 1. In a terminal, stopped with Ctrl-C while Dagster runs the insights job.
        first = MakeRun(data, tmp_path / "first.log", FLAGSIGHT_SEAL_INTERVAL="1")
        runs.append(first)
        key = demo_key(first.wait_until_running())
        assert evaluate(first.api_port, key).json()["value"] is True  # dark-mode: everyone
        first.wait_for_dagster()
        in_progress = wait_for_a_run_in_progress(data / "dagster")
        first.ctrl_c()
        assert_stopped_cleanly(first)
        assert run_status(data / "dagster", in_progress) in {
            dg.DagsterRunStatus.SUCCESS,  # it ended meanwhile
            dg.DagsterRunStatus.FAILURE,  # "Execution was interrupted"
            dg.DagsterRunStatus.CANCELED,
        }

        # 2. Launched in the background with SIGINT ignored, then sent SIGINT all the same.
        second = MakeRun(data, tmp_path / "second.log", sigint_ignored=True)
        runs.append(second)
        assert demo_key(second.wait_until_running()) == key
        assert evaluate(second.api_port, key).json()["value"] is True
        second.wait_for_dagster()
        second.ctrl_c()
        assert_stopped_cleanly(second)
    finally:
        for run in runs:
            run.end()


def test_sigterm_to_make_run_stops_everything(tmp_path: Path) -> None:
    """A supervisor (systemd, a CI step's timeout) sends SIGTERM to the process it started."""
    run = MakeRun(tmp_path / "var", tmp_path / "run.log")
    try:
        run.wait_until_running()
        run.wait_for_dagster()
        run.terminate()
        assert_stopped_cleanly(run)
    finally:
        run.end()


def test_make_run_stops_when_its_port_is_taken_instead_of_claiming_to_run(tmp_path: Path) -> None:
    """A second ``make run`` (or anything else) on the API port would answer the readiness
    wait while this run's own server could not start: it must say so and stop."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        api_port = taken.getsockname()[1]
        run = MakeRun(tmp_path / "var", tmp_path / "run.log", FLAGSIGHT_PORT=str(api_port))
        try:
            run.proc.wait(120)
        finally:
            run.end()
    output = (tmp_path / "run.log").read_text()
    assert run.proc.returncode != 0, output
    assert f"Port {api_port} on 127.0.0.1 is taken" in output
    assert "flagsight is running" not in output and "Demo API key" not in output
