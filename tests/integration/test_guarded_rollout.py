"""A guarded rollout through the real service and the real pipeline (contract section 10).

``flagsight serve`` (gunicorn, 2 workers) takes 100 new users a second, each evaluated once and
reporting one outcome (100 feedback events a second). The flag is rolled out by a guarded
rollout at 50 % (the step where a regression shows soonest; earlier steps only take longer to
show anything). Ten seconds in, treatment's failure rate jumps from 5 % to 10 %.
The insights pipeline (``run_pipeline_once``, what ``flagsight pipeline run`` runs) is run
again and again, as the sensor would. The rollout must be rolled back to 0 %, and soon after
the decision no worker may serve the treatment any more: a watcher evaluates a treatment user
over fresh connections all along.

On an idle machine the rollback comes within two minutes of the jump and the workers follow
within a second; the test allows ten minutes and ``PROMPTLY_S``, because on a loaded machine
the traffic, the pipeline runs and the reloads all slow down (``tests/support/timing.py``).
"""

from __future__ import annotations

import random
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
import requests
from flagsight_core.hashing import bucket, threshold

from api.settings import Settings
from pipelines.cli import run_pipeline_once
from tests.support.admin import Admin, requests_caller
from tests.support.server import GunicornServer
from tests.support.timing import PROMPTLY_S

ADMIN_TOKEN = "admin-test-token-0123456789"
FLAG = "risky-change"
USERS_PER_SECOND = 100
JUMP_AFTER_S = 10.0
DEADLINE_S = 600.0
"""Ten minutes for the rollback: two on an idle machine."""


class Traffic(threading.Thread):
    """100 new users a second: one bulk evaluation, then one bulk feedback of their outcomes."""

    def __init__(self, url: str, api_key: str, jump_at: float):
        super().__init__(daemon=True)
        self.url, self.jump_at = url, jump_at
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"ApiKey {api_key}"
        self.stopping = threading.Event()
        self.rng = random.Random(15)
        self.errors: list[str] = []

    def run(self) -> None:
        second = 0
        while not self.stopping.is_set():
            started = time.monotonic()
            try:
                self.one_second(second)
            except requests.RequestException as exc:
                self.errors.append(str(exc))
            second += 1
            self.stopping.wait(max(0.0, 1.0 - (time.monotonic() - started)))

    def one_second(self, second: int) -> None:
        users = [f"user-{second}-{i}" for i in range(USERS_PER_SECOND)]
        answer = self.session.post(
            f"{self.url}/v1/evaluate/bulk", json={"flagKey": FLAG, "userIdentifiers": users},
            timeout=10,
        )  # fmt: skip
        answer.raise_for_status()
        jumped = time.time() >= self.jump_at
        feedbacks = []
        for entry in answer.json().values():
            treated = entry["value"] is True
            failure = 0.10 if treated and jumped else 0.05
            feedbacks.append({
                "evaluationId": entry["evaluationId"],
                "result": self.rng.random() >= failure,
                "latencyMs": round(self.rng.lognormvariate(5.3, 0.4), 1),
            })  # fmt: skip
        self.session.post(
            f"{self.url}/v1/feedback/bulk", json={"feedbacks": feedbacks}, timeout=10
        ).raise_for_status()


class Watcher(threading.Thread):
    """Evaluates one treatment user over a fresh connection every 50 ms: (time, value)."""

    def __init__(self, url: str, api_key: str, user: str):
        super().__init__(daemon=True)
        self.url, self.user = url, user
        self.headers = {"Authorization": f"ApiKey {api_key}", "Connection": "close"}
        self.seen: list[tuple[float, bool, int]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.05):
            answer = requests.post(
                f"{self.url}/v1/evaluate", json={"flagKey": FLAG, "userIdentifier": self.user},
                headers=self.headers, timeout=5,
            ).json()  # fmt: skip
            self.seen.append((time.time(), answer["value"], answer.get("evaluationId", "")))


def treatment_user(percentage: float) -> str:
    return next(
        f"watcher-{n}" for n in range(10_000)
        if bucket(FLAG, f"watcher-{n}") < threshold(percentage)
    )  # fmt: skip


@pytest.fixture(params=["embedded", "postgres"])
def backend(request: pytest.FixtureRequest) -> dict[str, str]:
    """The service's variables: the embedded default, or its control plane and meter in
    PostgreSQL (issue 15: each of these works on both)."""
    if request.param == "embedded":
        return {}
    return {"FLAGSIGHT_DATABASE_URL": request.getfixturevalue("postgres_url")}


def test_a_failure_rate_jump_is_rolled_back_and_the_treatment_is_no_longer_served(
    tmp_path: Path, backend: dict[str, str]
) -> None:
    data_dir = tmp_path / "data"
    server = GunicornServer(data_dir, admin_token=ADMIN_TOKEN, env=backend).start()
    admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, FLAG, [{"type": "PERCENTAGE", "percentage": 0}])
    rollout_path = f"/environments/{tenant.environment_id}/flags/{FLAG}/rollout"
    admin.request("PUT", rollout_path, {"steps": [50, 100], "stepMinutes": 60}, expect=200)
    server.wait_config_everywhere()  # every worker serves 50 %
    jump_at = time.time() + JUMP_AFTER_S
    traffic = Traffic(server.url, tenant.api_key, jump_at)
    watcher = Watcher(server.url, tenant.api_key, treatment_user(50))
    settings = Settings(
        data_dir=data_dir.resolve(),
        admin_token=ADMIN_TOKEN,
        database_url=backend.get("FLAGSIGHT_DATABASE_URL"),
    )
    traffic.start()
    watcher.start()
    runs = []
    try:
        rollout = admin.request("GET", rollout_path, expect=200)
        while rollout["state"] == "running" and time.time() < jump_at + DEADLINE_S:
            started = time.time()
            run_pipeline_once(settings, echo=lambda line: None)
            runs.append(time.time() - started)
            rollout = admin.request("GET", rollout_path, expect=200)
        time.sleep(PROMPTLY_S + 1.5)
    finally:
        traffic.stopping.set()
        watcher.stopping.set()
        traffic.join(15)
        watcher.join(15)
        server.stop()
    assert not traffic.errors, traffic.errors[:3]
    assert rollout["state"] == "rolledBack", (rollout, runs)
    (decision,) = rollout["decisions"]
    decided_at = datetime.fromisoformat(decision["at"]).timestamp()
    assert decided_at - jump_at <= DEADLINE_S, (decided_at - jump_at, runs)
    assert decision["percentage"] == 0
    assert decision["statistics"]["guard"]["guardrails"]["failureRate"]["status"] == "regression"
    assert decision["statistics"]["percentage"] == 50
    assert decision["reason"].startswith("regression: Failure rate (")
    served_after = [value for at, value, _ in watcher.seen if at > decided_at + PROMPTLY_S]
    assert served_after and not any(served_after), watcher.seen[-40:]
    assert any(value for at, value, _ in watcher.seen if at < jump_at)  # it was treated
