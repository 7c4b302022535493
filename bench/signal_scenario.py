"""Time to signal: from a feedback's 204 (or a tracked event's) to the health endpoint counting it.

The whole default deployment on one machine, as ``make run`` starts it: ``flagsight serve``
(2 workers, its sealer) and the Dagster daemon over ``workspace.yaml`` with the sensor on. One
sample for a new user is sent every ``interval_s`` (jittered, so samples fall at every phase
of the sealing and sensor cycles) while a poller reads the health endpoint every half second.

- ``time_to_signal``: a sample is an evaluation then a feedback; sample ``k`` is seen once the
  arms count ``k`` users with feedback.
- ``time_to_metric_signal`` (contract 13): the flag follows a count metric; a sample is an
  evaluation then one tracked event of the metric's event for that user, timed from the
  track's 204. Sample ``k`` is seen once the answer's ``metrics[key]`` counts ``k`` events:
  the sum over the arms of ``mean`` x ``users`` (a count's mean is events per exposed user).
  The arms' ``users`` alone would not do: they count exposures, which the evaluation makes
  before the event is sent; the events counted move only when the event is in
  ``metric_users``, within the user's window from its exposure, and each sample adds exactly one.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import requests

from api.infra.dagster_home import prepare_dagster_home
from bench.servers import REPO, FlagsightServer
from bench.workload import CONFIG_PROPAGATION_S, create_tenant

FLAG = "signal-rollout"
POLL_S = 0.5
METRIC = "signal-purchases"
"""The followed count metric of ``time_to_metric_signal``, over the event of the same name."""


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


def users_with_feedback(answer: dict[str, Any]) -> int:
    """The samples a health answer counts in ``time_to_signal``."""
    arms = answer["arms"]
    if not arms:
        return 0
    return arms["treatment"]["usersWithFeedback"] + arms["control"]["usersWithFeedback"]


def metric_events(answer: dict[str, Any]) -> int:
    """The samples a health answer counts in ``time_to_metric_signal``: the events of the count
    metric ``METRIC`` over both arms (each arm's mean per exposed user times its users)."""
    compared = answer.get("metrics", {}).get(METRIC)
    if compared is None:
        return 0
    arms = (compared["treatment"], compared["control"])
    return round(sum(arm["mean"] * arm["users"] for arm in arms if arm["mean"] is not None))


class _HealthPoller(threading.Thread):
    """Reads the health endpoint every half second; records when each count was first seen."""

    def __init__(
        self, url: str, token: str, env_id: str, count: Callable[[dict[str, Any]], int]
    ) -> None:
        super().__init__(daemon=True)
        self.path = f"{url}/admin/v1/environments/{env_id}/flags/{FLAG}/health"
        self.headers = {"Authorization": f"Bearer {token}"}
        self.count = count
        self.first_seen: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            answer = requests.get(self.path, headers=self.headers, timeout=10)
            now = time.monotonic()
            if answer.status_code == 200:
                for k in range(1, self.count(answer.json()) + 1):
                    self.first_seen.setdefault(k, now)
            self.stop.wait(POLL_S)


class _Deployment(NamedTuple):
    server: FlagsightServer
    api_key: str
    env_id: str


@contextmanager
def _deployment(work_dir: Path, name: str) -> Iterator[_Deployment]:
    """``flagsight serve`` and the Dagster daemon over the data directory ``name``, a tenant and
    ``FLAG`` at a 50 % split; both stopped at the end."""
    data = work_dir / f"{name}-data"
    server = FlagsightServer(data, 2, work_dir / f"{name}-flagsight.log")
    daemon = None
    try:
        server.start(2)
        daemon = _start_daemon(data, work_dir / f"{name}-dagster.log")
        api_key, env_id = create_tenant(server.url, server.admin_token)
        _admin(server, "PUT", f"/environments/{env_id}/flags/{FLAG}",
               {"enabled": True, "rules": [{"type": "PERCENTAGE", "percentage": 50}]})  # fmt: skip
        yield _Deployment(server, api_key, env_id)
    finally:
        if daemon is not None and daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
        server.stop()


def _admin(server: FlagsightServer, method: str, path: str, body: object = None) -> Any:
    answer = requests.request(
        method, f"{server.url}/admin/v1{path}", json=body, timeout=10,
        headers={"Authorization": f"Bearer {server.admin_token}"},
    )  # fmt: skip
    answer.raise_for_status()
    return answer.json()


def _follow_metric(server: FlagsightServer, env_id: str) -> None:
    """``METRIC`` (count, a 72-hour window) in the tenant's organization, followed by ``FLAG``."""
    organization = next(
        o for o in _admin(server, "GET", "/organizations")["items"] if o["name"] == "Bench"
    )
    _admin(server, "PUT", f"/organizations/{organization['id']}/metrics/{METRIC}",
           {"name": "Signal purchases", "event": METRIC, "kind": "count", "windowHours": 72,
            "better": "higher"})  # fmt: skip
    _admin(server, "PUT", f"/environments/{env_id}/flags/{FLAG}/metrics", {"metrics": [METRIC]})


def _send_feedback(deployment: _Deployment, user: str) -> None:
    """An evaluation of ``FLAG`` for ``user``, then its feedback (204)."""
    headers = {"Authorization": f"ApiKey {deployment.api_key}"}
    url = deployment.server.url
    evaluation = requests.post(
        f"{url}/v1/evaluate", headers=headers, timeout=10,
        json={"flagKey": FLAG, "userIdentifier": user},
    ).json()  # fmt: skip
    feedback = requests.post(
        f"{url}/v1/feedback/report", headers=headers, timeout=10,
        json={"evaluationId": evaluation["evaluationId"], "result": True, "latencyMs": 80},
    )  # fmt: skip
    assert feedback.status_code == 204, feedback.text


def _send_tracked(deployment: _Deployment, user: str) -> None:
    """An evaluation of ``FLAG`` for ``user`` (its exposure), then one event of ``METRIC``."""
    headers = {"Authorization": f"ApiKey {deployment.api_key}"}
    url = deployment.server.url
    requests.post(
        f"{url}/v1/evaluate", headers=headers, timeout=10,
        json={"flagKey": FLAG, "userIdentifier": user},
    ).raise_for_status()  # fmt: skip
    tracked = requests.post(
        f"{url}/v1/track", headers=headers, timeout=10,
        json={"events": [{"name": METRIC, "userIdentifier": user}]},
    )  # fmt: skip
    assert tracked.status_code == 204, tracked.text


def _measure(
    deployment: _Deployment,
    send: Callable[[_Deployment, str], None],
    count: Callable[[dict[str, Any]], int],
    samples: int,
    interval_s: float,
) -> list[float]:
    """Send ``samples`` samples (``send`` for a new user each, then the time of its last 204)
    while polling; each sample's seconds until the health answer ``count``s it."""
    time.sleep(CONFIG_PROPAGATION_S)
    server = deployment.server
    poller = _HealthPoller(server.url, server.admin_token, deployment.env_id, count)
    poller.start()
    rng = random.Random(11)
    sent: list[float] = []
    for index in range(samples):
        send(deployment, f"signal-user-{index}")
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
        raise RuntimeError(f"only {len(delays)} of {samples} samples reached the health endpoint")
    return delays


def _summary(delays: list[float]) -> dict[str, object]:
    return {
        "samples": len(delays),
        "p50_s": round(_percentile(delays, 0.50), 1),
        "p95_s": round(_percentile(delays, 0.95), 1),
        "max_s": round(max(delays), 1),
    }


def time_to_signal(
    work_dir: Path, *, samples: int, interval_s: float, log: Callable[[str], None]
) -> dict[str, object]:
    """p50/p95/max seconds from feedback 204 to the health endpoint showing it."""
    with _deployment(work_dir, "signal") as deployment:
        delays = _measure(deployment, _send_feedback, users_with_feedback, samples, interval_s)
    record = _summary(delays)
    log(f"  time to signal over {samples} feedbacks: {record}")
    return record


def time_to_metric_signal(
    work_dir: Path, *, samples: int, interval_s: float, log: Callable[[str], None]
) -> dict[str, object]:
    """p50/p95/max seconds from a tracked event's 204 to the health endpoint's followed count
    metric counting it (see the module)."""
    with _deployment(work_dir, "signal-metric") as deployment:
        _follow_metric(deployment.server, deployment.env_id)
        delays = _measure(deployment, _send_tracked, metric_events, samples, interval_s)
    record = _summary(delays)
    log(f"  time to signal for a metric over {samples} tracked events: {record}")
    return record
