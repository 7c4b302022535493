"""Rare failures at a guarded rollout's first step, through the real service and pipeline.

The case that rolled healthy releases back (issue 28): at a 1 % step, 1 of about 300
treatment users failed and 4 of about 30,000 control users did. Through ``flagsight serve``
(evaluations and feedback over HTTP, sealed into the event log), ``flagsight pipeline run``'s
``run_pipeline_once`` and the rollout guardian it runs, that is no regression and nothing
rolls back. At the same step, a treatment failing one user in eight is rolled back.
"""

from __future__ import annotations

import time
from pathlib import Path

import requests

from api.settings import Settings
from pipelines.cli import run_pipeline_once
from tests.support.admin import Admin, requests_caller
from tests.support.server import GunicornServer

ADMIN_TOKEN = "admin-test-token-0123456789"
USERS = [f"user-{n}" for n in range(30_300)]
RARE, BLATANT = "rare-failures", "one-in-eight"
PLAN = {"steps": [1, 5, 25, 50, 100], "stepMinutes": 60}


def _evaluate_and_report(url: str, api_key: str, flag: str, failing) -> dict[str, int]:
    """Every user evaluated once, then one outcome each: ``failing(arm, index in arm)``
    says which fail. Returns how many users each arm got."""
    session = requests.Session()
    session.headers["Authorization"] = f"ApiKey {api_key}"
    feedbacks, arms = [], {"treatment": 0, "control": 0}
    for start in range(0, len(USERS), 10_000):
        answer = session.post(
            f"{url}/v1/evaluate/bulk",
            json={"flagKey": flag, "userIdentifiers": USERS[start : start + 10_000]},
            timeout=30,
        )
        answer.raise_for_status()
        for entry in answer.json().values():
            arm = "treatment" if entry["value"] else "control"
            feedbacks.append(
                {"evaluationId": entry["evaluationId"], "latencyMs": 120.0,
                 "result": not failing(arm, arms[arm])}
            )  # fmt: skip
            arms[arm] += 1
    for start in range(0, len(feedbacks), 500):
        session.post(
            f"{url}/v1/feedback/bulk", json={"feedbacks": feedbacks[start : start + 500]},
            timeout=30,
        ).raise_for_status()  # fmt: skip
    return arms


def test_one_rare_failure_in_a_small_arm_is_no_regression_and_one_in_eight_rolls_back(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    server = GunicornServer(data_dir, admin_token=ADMIN_TOKEN).start()
    try:
        admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
        tenant = admin.tenant()
        paths = {}
        for flag in (RARE, BLATANT):
            admin.flag(tenant.environment_id, flag, [{"type": "PERCENTAGE", "percentage": 0}])
            paths[flag] = f"/environments/{tenant.environment_id}/flags/{flag}"
            admin.request("PUT", f"{paths[flag]}/rollout", PLAN, expect=200)
        server.wait_config_everywhere()

        rare = _evaluate_and_report(
            server.url, tenant.api_key, RARE,
            lambda arm, i: (arm == "treatment" and i == 0) or (arm == "control" and i < 4),
        )  # fmt: skip
        blatant = _evaluate_and_report(
            server.url, tenant.api_key, BLATANT,
            lambda arm, i: (arm == "treatment" and i % 8 == 0) or (arm == "control" and i < 30),
        )  # fmt: skip
        assert 250 <= rare["treatment"] <= 360 and 250 <= blatant["treatment"] <= 360
        time.sleep(3.0)  # sealed: the seal interval is 1 s
        settings = Settings(data_dir=data_dir.resolve(), admin_token=ADMIN_TOKEN)
        for _ in range(3):  # a run attributes what has arrived; the sensor would run again
            run_pipeline_once(settings, echo=lambda line: None)
            health = admin.request("GET", f"{paths[RARE]}/health", expect=200)
            if (
                health["arms"]
                and health["arms"]["treatment"]["usersWithFeedback"] == rare["treatment"]
            ):
                break
            time.sleep(2.0)

        assert health["arms"]["treatment"]["usersWithFeedback"] == rare["treatment"]
        assert health["arms"]["control"]["usersWithFeedback"] == rare["control"]
        assert health["percentage"] == 1.0
        assert health["failureRate"]["decision"] == "inconclusive"
        guard = health["rolloutGuard"]
        assert guard["confidence"] == 1 - 0.05 / 12
        assert guard["failureRate"]["decision"] == "inconclusive"
        rollout = admin.request("GET", f"{paths[RARE]}/rollout", expect=200)
        assert (rollout["state"], rollout["step"], rollout["decisions"]) == ("running", 0, [])
        assert admin.request("GET", paths[RARE], expect=200)["rules"][0]["percentage"] == 1

        rolled_back = admin.request("GET", f"{paths[BLATANT]}/rollout", expect=200)
        assert rolled_back["state"] == "rolledBack", rolled_back
        (decision,) = rolled_back["decisions"]
        assert decision["percentage"] == 0 and decision["step"] == 0
        assert decision["reason"].startswith("regression on failureRate")
        assert decision["statistics"]["rolloutGuard"]["failureRate"]["decision"] == "regression"
        assert admin.request("GET", paths[BLATANT], expect=200)["rules"][0]["percentage"] == 0
    finally:
        server.stop()
