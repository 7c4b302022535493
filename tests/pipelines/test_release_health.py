"""Release health end to end: evaluations and feedback through the API, sealed Parquet, the
Dagster assets, and the health endpoint (contract section 9).

Users are simulated with fixed seeds; what each arm should show is known from the contract's
bucketing, so the expected figures are computed here independently of the pipeline.
"""

from __future__ import annotations

import random

import pytest
from flagsight_core.hashing import bucket, threshold

from tests.pipelines.support import materialize_all
from tests.support.admin import Tenant
from warehouse.statistics.histogram import RELATIVE_ACCURACY

FLAG = "new-checkout"


def auth(tenant: Tenant) -> dict[str, str]:
    return {"Authorization": f"ApiKey {tenant.api_key}"}


def in_treatment(user: str, percentage: float) -> bool:
    return bucket(FLAG, user) < threshold(percentage)


def evaluate_all(client, tenant: Tenant, users: list[str]) -> dict[str, str]:
    """One bulk evaluation per 10,000 users; each user's evaluation id."""
    ids: dict[str, str] = {}
    for start in range(0, len(users), 10_000):
        answer = client.simulate_post(
            "/v1/evaluate/bulk",
            json={"flagKey": FLAG, "userIdentifiers": users[start : start + 10_000]},
            headers=auth(tenant),
        )
        assert answer.status_code == 200
        ids.update({user: entry["evaluationId"] for user, entry in answer.json.items()})
    return ids


def report(client, tenant: Tenant, outcomes: list[tuple[str, bool, float | None]]) -> None:
    for start in range(0, len(outcomes), 500):
        items = [
            {"evaluationId": evaluation_id, "result": ok, "latencyMs": latency}
            for evaluation_id, ok, latency in outcomes[start : start + 500]
        ]
        answer = client.simulate_post(
            "/v1/feedback/bulk", json={"feedbacks": items}, headers=auth(tenant)
        )
        assert answer.status_code == 204


def health(client, admin, services, tenant: Tenant) -> dict:
    services.event_log.close()  # seals everything appended
    result = materialize_all(services.settings)
    assert result.success
    assert all(check.passed for check in result.get_asset_check_evaluations())
    return admin.request(
        "GET", f"/environments/{tenant.environment_id}/flags/{FLAG}/health", expect=200
    )


def rollout(admin, tenant: Tenant, percentage: float) -> None:
    admin.flag(
        tenant.environment_id,
        FLAG,
        [{"type": "PERCENTAGE", "percentage": percentage, "value": True}],
    )


def simulate(
    client, tenant: Tenant, users: list[str], failure: dict[bool, float], seed: int
) -> None:
    """Evaluate every user once and report one outcome each, failing with the arm's rate;
    latency log-normal around 200 ms for both arms."""
    rng = random.Random(seed)
    ids = evaluate_all(client, tenant, users)
    outcomes = []
    for user in users:
        treated = in_treatment(user, 50)
        outcomes.append((ids[user], rng.random() >= failure[treated], rng.lognormvariate(5.3, 0.4)))
    report(client, tenant, outcomes)


def test_a_failing_treatment_is_a_regression_with_an_interval_around_the_truth(
    client, admin, tenant, services
) -> None:
    rollout(admin, tenant, 50)
    users = [f"user-{i}" for i in range(4000)]
    simulate(client, tenant, users, {True: 0.20, False: 0.05}, seed=1)

    answer = health(client, admin, services, tenant)

    treatment, control = answer["arms"]["treatment"], answer["arms"]["control"]
    assert treatment["users"] == sum(in_treatment(u, 50) for u in users)
    assert treatment["users"] + control["users"] == 4000
    assert treatment["coverage"] == control["coverage"] == 100.0
    assert answer["percentage"] == 50.0
    assert answer["sampleRatio"]["expected"] == 0.5
    assert answer["sampleRatio"]["mismatch"] is False
    failure = answer["failureRate"]
    assert failure["decision"] == "regression"
    low, high = failure["ci"]
    assert 0 < low < 15 < high
    assert failure["difference"] == pytest.approx(treatment["failureRate"] - control["failureRate"])
    assert answer["latencyP95Ms"]["decision"] == "inconclusive"


def test_equal_failure_rates_are_neither_regression_nor_improvement(
    client, admin, tenant, services
) -> None:
    rollout(admin, tenant, 50)
    users = [f"user-{i}" for i in range(4000)]
    simulate(client, tenant, users, {True: 0.10, False: 0.10}, seed=2)

    answer = health(client, admin, services, tenant)

    assert answer["failureRate"]["decision"] == "inconclusive"
    low, high = answer["failureRate"]["ci"]
    assert low < 0 < high


def test_dropped_control_evaluations_are_a_sample_ratio_mismatch_and_withhold_decisions(
    client, admin, tenant, services
) -> None:
    rollout(admin, tenant, 50)
    everyone = [f"user-{i}" for i in range(10_000)]
    control = [u for u in everyone if not in_treatment(u, 50)]
    dropped = set(control[: len(control) * 12 // 100])  # an SDK that loses some control users
    users = [u for u in everyone if u not in dropped]
    simulate(client, tenant, users, {True: 0.20, False: 0.05}, seed=3)

    answer = health(client, admin, services, tenant)

    ratio = answer["sampleRatio"]
    assert ratio["mismatch"] is True
    assert ratio["pValue"] < 0.001
    assert ratio["observed"] == pytest.approx(answer["arms"]["treatment"]["users"] / len(users))
    assert 0.52 < ratio["observed"] < 0.54
    assert answer["failureRate"]["decision"] == "withheld"
    assert answer["latencyP95Ms"]["decision"] == "withheld"


def test_a_user_with_a_thousand_evaluations_counts_once(client, admin, tenant, services) -> None:
    rollout(admin, tenant, 100)
    ids = []
    for _ in range(1000):
        answer = client.simulate_post(
            "/v1/evaluate",
            json={"flagKey": FLAG, "userIdentifier": "busy-user"},
            headers=auth(tenant),
        )
        ids.append(answer.json["evaluationId"])
    report(client, tenant, [(i, n % 2 == 0, 10.0 * (n % 3)) for n, i in enumerate(ids)])

    answer = health(client, admin, services, tenant)

    treatment = answer["arms"]["treatment"]
    assert treatment["users"] == 1
    assert treatment["usersWithFeedback"] == 1
    assert treatment["failureRate"] == 100.0  # any failed feedback fails the user
    assert treatment["latencyP50Ms"] == pytest.approx(  # its mean, read from the histogram
        sum(10.0 * (n % 3) for n in range(1000)) / 1000, rel=RELATIVE_ACCURACY
    )
    assert answer["arms"]["control"]["users"] == 0
    assert answer["failureRate"]["decision"] == "withheld"


def test_a_flag_without_a_percentage_rule_has_no_arms(client, admin, tenant, services) -> None:
    admin.flag(tenant.environment_id, FLAG, [{"type": "STATIC", "value": True}])
    client.simulate_post(
        "/v1/evaluate", json={"flagKey": FLAG, "userIdentifier": "u"}, headers=auth(tenant)
    )

    answer = health(client, admin, services, tenant)

    assert answer["arms"] is None
    assert answer["failureRate"]["decision"] == "withheld"
    assert answer["latencyP95Ms"]["decision"] == "withheld"


def test_a_flag_that_loses_its_percentage_rule_loses_its_arms(
    client, admin, tenant, services
) -> None:
    """No event of it is in an arm any more, so only the control plane can say so."""
    rollout(admin, tenant, 50)
    evaluate_all(client, tenant, [f"user-{i}" for i in range(100)])
    assert health(client, admin, services, tenant)["arms"]["treatment"]["users"] > 0

    admin.flag(tenant.environment_id, FLAG, [{"type": "STATIC", "value": True}])
    answer = health(client, admin, services, tenant)

    assert answer["arms"] is None
    assert answer["failureRate"]["decision"] == "withheld"
    assert answer["coverage"]["decision"] == "withheld"


def test_a_rollout_started_again_is_judged_on_its_own_users_only(
    client, admin, tenant, services
) -> None:
    """Rolled back at 50 %, started again at 50 %: the users of the first run (which failed)
    are not the second run's, so it is not rolled back on their figures."""
    admin.flag(
        tenant.environment_id, FLAG, [{"type": "PERCENTAGE", "percentage": 0, "value": True}]
    )
    path = f"/environments/{tenant.environment_id}/flags/{FLAG}/rollout"
    plan = {"steps": [50, 100], "stepMinutes": 60, "guardrails": ["failureRate"]}
    admin.request("PUT", path, plan, expect=200)
    simulate(client, tenant, [f"user-{i}" for i in range(3000)], {True: 0.3, False: 0.05}, seed=5)
    first = health(client, admin, services, tenant)
    assert first["failureRate"]["decision"] == "regression"
    assert admin.request("GET", path, expect=200)["state"] == "rolledBack"

    admin.request("PUT", path, plan, expect=200)  # the fix is out: start again
    again = health(client, admin, services, tenant)

    assert again["percentage"] == 50.0
    assert again["arms"]["treatment"]["users"] == again["arms"]["control"]["users"] == 0
    assert again["failureRate"]["decision"] == "withheld"
    rollout = admin.request("GET", path, expect=200)
    assert (rollout["state"], rollout["step"], rollout["decisions"]) == ("running", 0, [])


def test_health_is_404_before_the_first_aggregation(admin, tenant) -> None:
    status = admin.request("GET", f"/environments/{tenant.environment_id}/flags/{FLAG}/health")
    assert status["status"] == 404


def test_a_treatment_that_stops_reporting_is_a_coverage_regression(
    client, admin, tenant, services
) -> None:
    """Half of treatment's users crash before they can report: their failure rate looks fine,
    their coverage does not."""
    rollout(admin, tenant, 50)
    users = [f"user-{i}" for i in range(3000)]
    ids = evaluate_all(client, tenant, users)
    silent = {u for n, u in enumerate(users) if in_treatment(u, 50) and n % 2}
    report(client, tenant, [(ids[u], True, 100.0) for u in users if u not in silent])

    answer = health(client, admin, services, tenant)

    assert answer["arms"]["treatment"]["coverage"] == pytest.approx(
        100.0 * (1 - len(silent) / answer["arms"]["treatment"]["users"])
    )
    assert answer["arms"]["control"]["coverage"] == 100.0
    assert answer["coverage"]["decision"] == "regression"
    assert answer["failureRate"]["decision"] == "inconclusive"
