"""A guarded rollout's decisions through the real service and pipeline (contract section 10,
"A guard that guards").

Through ``flagsight serve`` (evaluations and feedback over HTTP, sealed into the event log),
``flagsight pipeline run``'s ``run_pipeline_once`` and the rollout guardian it runs, with every
step's time already passed:

- the case that rolled healthy releases back (issue 28): at a 1 % step, 1 of about 300
  treatment users failed and 4 of about 30,000 control users did. That is no regression, and
  no evidence of safety either: the rollout waits at its step and says what it needs;
- at the same step, a treatment failing one user in eight is rolled back;
- a release failing every user is rolled back from a few dozen treatment users;
- a healthy release at 50 % with about 15,000 users an arm is shown within its tolerances
  and completes;
- tolerances that are not the rollout's guardrails' positive numbers are 400s naming the field.
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
RARE, BLATANT, ALL_FAILING, HEALTHY = "rare-failures", "one-in-eight", "all-failing", "healthy"
PLANS = {
    RARE: {"steps": [1, 5, 25, 50, 100], "stepMinutes": 0.01},
    BLATANT: {"steps": [1, 5, 25, 50, 100], "stepMinutes": 60},
    ALL_FAILING: {"steps": [1, 5, 25, 50, 100], "stepMinutes": 60},
    HEALTHY: {"steps": [50, 100], "stepMinutes": 0.01},
}


def _evaluate_and_report(
    url: str, api_key: str, flag: str, failing, users: list[str] = USERS
) -> dict[str, int]:
    """Every user evaluated once, then one outcome each: ``failing(arm, index in arm)``
    says which fail. Returns how many users each arm got."""
    session = requests.Session()
    session.headers["Authorization"] = f"ApiKey {api_key}"
    feedbacks, arms = [], {"treatment": 0, "control": 0}
    for start in range(0, len(users), 10_000):
        answer = session.post(
            f"{url}/v1/evaluate/bulk",
            json={"flagKey": flag, "userIdentifiers": users[start : start + 10_000]},
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


def test_the_guard_waits_on_doubt_rolls_back_regressions_and_completes_shown_safety(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    server = GunicornServer(data_dir, admin_token=ADMIN_TOKEN).start()
    try:
        admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
        tenant = admin.tenant()
        paths = {}
        for flag, plan in PLANS.items():
            admin.flag(tenant.environment_id, flag, [{"type": "PERCENTAGE", "percentage": 0}])
            paths[flag] = f"/environments/{tenant.environment_id}/flags/{flag}"
            admin.request("PUT", f"{paths[flag]}/rollout", plan, expect=200)
        for tolerances in ({"errors": 1}, {"failureRate": 0}, {"coverage": "2"}, [1]):
            answer = admin.request(
                "PUT", f"{paths[RARE]}/rollout", {**PLANS[RARE], "tolerances": tolerances},
                expect=400,
            )  # fmt: skip
            assert "'tolerances'" in answer["message"], answer
        server.wait_config_everywhere()

        rare = _evaluate_and_report(
            server.url, tenant.api_key, RARE,
            lambda arm, i: (arm == "treatment" and i == 0) or (arm == "control" and i < 4),
        )  # fmt: skip
        blatant = _evaluate_and_report(
            server.url, tenant.api_key, BLATANT,
            lambda arm, i: (arm == "treatment" and i % 8 == 0) or (arm == "control" and i < 30),
        )  # fmt: skip
        all_failing = _evaluate_and_report(
            server.url, tenant.api_key, ALL_FAILING,
            lambda arm, i: arm == "treatment" or i < 30, users=USERS[:4_000],
        )  # fmt: skip
        healthy = _evaluate_and_report(
            server.url, tenant.api_key, HEALTHY, lambda arm, i: i % 100 == 0
        )  # fmt: skip
        assert 250 <= rare["treatment"] <= 360 and 250 <= blatant["treatment"] <= 360
        assert 20 <= all_failing["treatment"] <= 60
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
        rollout = admin.request("GET", f"{paths[RARE]}/rollout", expect=200)
        assert (rollout["state"], rollout["step"], rollout["decisions"]) == ("running", 0, [])
        failure = rollout["guard"]["guardrails"]["failureRate"]
        assert failure["status"] == "undecided" and failure["usersNeeded"] > 1_000, failure
        assert failure["users"] == {"treatment": rare["treatment"], "control": rare["control"]}
        assert "Failure rate not yet shown within 1 pp" in rollout["waiting"]["reason"]
        assert admin.request("GET", paths[RARE], expect=200)["rules"][0]["percentage"] == 1

        for flag, arms in ((BLATANT, blatant), (ALL_FAILING, all_failing)):
            rolled_back = admin.request("GET", f"{paths[flag]}/rollout", expect=200)
            assert rolled_back["state"] == "rolledBack", rolled_back
            (decision,) = rolled_back["decisions"]
            assert decision["percentage"] == 0 and decision["step"] == 0
            assert decision["reason"].startswith("regression: Failure rate")
            evidence = decision["statistics"]["guard"]["guardrails"]["failureRate"]
            assert evidence["status"] == "regression"
            assert evidence["users"]["treatment"] == arms["treatment"]
            assert admin.request("GET", paths[flag], expect=200)["rules"][0]["percentage"] == 0

        completed = admin.request("GET", f"{paths[HEALTHY]}/rollout", expect=200)
        assert completed["state"] == "completed", completed
        (decision,) = completed["decisions"]
        assert decision["action"] == "completed" and decision["percentage"] == 100
        shown = decision["statistics"]["guard"]["guardrails"]
        assert {g: e["status"] for g, e in shown.items()} == dict.fromkeys(
            ("failureRate", "latencyP95Ms", "coverage"), "safe"
        )
        assert shown["failureRate"]["ci"][1] < 1.0
        assert shown["failureRate"]["users"] == healthy
        assert admin.request("GET", paths[HEALTHY], expect=200)["rules"][0]["percentage"] == 100
    finally:
        server.stop()
