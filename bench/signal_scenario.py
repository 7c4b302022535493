"""Time to signal: from a feedback's 204 to the health endpoint counting it.

The whole default deployment on one machine, as ``make run`` starts it: ``flagsight serve``
(2 workers, its sealer) and the Dagster daemon over ``workspace.yaml`` with the sensor on. One
feedback for a new user is sent every ``interval_s`` (jittered, so samples fall at every phase
of the sealing and sensor cycles) while a poller reads the health endpoint every half second;
sample ``k`` is seen once the arms count ``k`` users with feedback.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import requests

from api.infra.dagster_home import prepare_dagster_home
from bench.servers import REPO, FlagsightServer
from bench.workload import CONFIG_PROPAGATION_S, create_tenant

FLAG = "signal-rollout"
POLL_S = 0.5


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def _start_daemon(data_dir: Path, log_path: Path) -> subprocess.Popen[bytes]:
    home = data_dir / "dagster"
    prepare_dagster_home(home, None)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLAGSIGHT_", "DAGSTER_"))}
    env |= {"FLAGSIGHT_DATA_DIR": str(data_dir), "DAGSTER_HOME": str(home)}
    daemon = Path(sys.executable).with_name("dagster-daemon")
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [str(daemon), "run", "-w", "workspace.yaml"], cwd=REPO, env=env,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


class _HealthPoller(threading.Thread):
    """Reads the health endpoint every half second; records when each count was first seen."""

    def __init__(self, url: str, token: str, env_id: str):
        super().__init__(daemon=True)
        self.path = f"{url}/admin/v1/environments/{env_id}/flags/{FLAG}/health"
        self.headers = {"Authorization": f"Bearer {token}"}
        self.first_seen: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            answer = requests.get(self.path, headers=self.headers, timeout=10)
            now = time.monotonic()
            if answer.status_code == 200 and answer.json()["arms"]:
                arms = answer.json()["arms"]
                count = (
                    arms["treatment"]["usersWithFeedback"] + arms["control"]["usersWithFeedback"]
                )
                for k in range(1, count + 1):
                    self.first_seen.setdefault(k, now)
            self.stop.wait(POLL_S)


def time_to_signal(
    work_dir: Path, *, samples: int, interval_s: float, log: Callable[[str], None]
) -> dict[str, object]:
    """p50/p95/max seconds from feedback 204 to the health endpoint showing it."""
    data = work_dir / "signal-data"
    server = FlagsightServer(data, 2, work_dir / "signal-flagsight.log")
    daemon = None
    try:
        server.start(2)
        daemon = _start_daemon(data, work_dir / "signal-dagster.log")
        api_key, env_id = create_tenant(server.url, server.admin_token)
        requests.put(
            f"{server.url}/admin/v1/environments/{env_id}/flags/{FLAG}",
            json={"enabled": True, "rules": [{"type": "PERCENTAGE", "percentage": 50}]},
            headers={"Authorization": f"Bearer {server.admin_token}"}, timeout=10,
        ).raise_for_status()  # fmt: skip
        time.sleep(CONFIG_PROPAGATION_S)
        poller = _HealthPoller(server.url, server.admin_token, env_id)
        poller.start()
        headers = {"Authorization": f"ApiKey {api_key}"}
        rng = random.Random(11)
        sent: list[float] = []
        for index in range(samples):
            evaluation = requests.post(
                f"{server.url}/v1/evaluate", headers=headers, timeout=10,
                json={"flagKey": FLAG, "userIdentifier": f"signal-user-{index}"},
            ).json()  # fmt: skip
            feedback = requests.post(
                f"{server.url}/v1/feedback/report", headers=headers, timeout=10,
                json={"evaluationId": evaluation["evaluationId"], "result": True, "latencyMs": 80},
            )  # fmt: skip
            assert feedback.status_code == 204, feedback.text
            sent.append(time.monotonic())
            time.sleep(interval_s * rng.uniform(0.5, 1.5))
        deadline = time.monotonic() + 600  # a loaded machine (the smoke in make test) too
        while len(poller.first_seen) < samples and time.monotonic() < deadline:
            time.sleep(POLL_S)
        poller.stop.set()
        poller.join()
        delays = [
            poller.first_seen[k + 1] - at for k, at in enumerate(sent) if k + 1 in poller.first_seen
        ]
        if len(delays) < samples:
            raise RuntimeError(
                f"only {len(delays)} of {samples} feedbacks reached the health endpoint"
            )
        record = {
            "samples": samples,
            "p50_s": round(_percentile(delays, 0.50), 1),
            "p95_s": round(_percentile(delays, 0.95), 1),
            "max_s": round(max(delays), 1),
        }
        log(f"  time to signal over {samples} feedbacks: {record}")
        return record
    finally:
        if daemon is not None and daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
        server.stop()
