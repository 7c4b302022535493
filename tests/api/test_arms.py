"""Each evaluation event records its user's arm (contract section 9), single and bulk alike."""

from __future__ import annotations

import duckdb
import pytest
from flagsight_core.hashing import bucket, threshold

from tests.support.admin import Tenant

RULES = [
    {"type": "SEGMENT", "segment": "beta", "value": True},
    {"type": "PERCENTAGE", "percentage": 40, "value": True},
    {"type": "PERCENTAGE", "percentage": 50, "value": False},
    {"type": "STATIC", "value": False},
]
USERS = [f"user-{i}" for i in range(300)]
BETA = USERS[:20]


def auth(tenant: Tenant) -> dict[str, str]:
    return {"Authorization": f"ApiKey {tenant.api_key}"}


def expected_arm(user: str) -> tuple[int, str | None]:
    """The deciding rule and arm, worked out from the contract's bucketing by hand."""
    if user in BETA:
        return 0, None
    if bucket("checkout", user) < threshold(40):
        return 1, "treatment"
    if bucket("checkout", user) < threshold(50):
        return 2, "control"
    return 3, "control"


def logged(services) -> dict[str, tuple]:
    services.event_log.close()
    events = services.settings.events_location
    rows = duckdb.sql(
        "SELECT user_identifier, rule_index, arm, rollout_percentage, source, error_type "
        f"FROM read_parquet('{events}/event_type=evaluation/*/*.parquet')"
    ).fetchall()
    return {(row[0], row[4]): row[1:4] + row[5:] for row in rows}


@pytest.mark.parametrize("bulk", [False, True])
def test_the_arm_of_every_user_is_logged(client, admin, tenant, services, bulk) -> None:
    admin.segment(tenant.organization_id, "beta", BETA)
    admin.flag(tenant.environment_id, "checkout", RULES)
    if bulk:
        answer = client.simulate_post(
            "/v1/evaluate/bulk",
            json={"flagKey": "checkout", "userIdentifiers": USERS},
            headers=auth(tenant),
        )
        assert answer.status_code == 200
    else:
        for user in USERS:
            client.simulate_post(
                "/v1/evaluate",
                json={"flagKey": "checkout", "userIdentifier": user},
                headers=auth(tenant),
            )
    source = "v1-bulk" if bulk else "v1"
    rows = logged(services)
    for user in USERS:
        rule, arm = expected_arm(user)
        assert rows[(user, source)] == (rule, arm, 40.0 if arm else None, None)
    arms = [rows[(u, source)][1] for u in USERS]
    assert {"treatment", "control", None} == set(arms)


def test_errors_and_flags_without_a_split_have_no_arm(client, admin, tenant, services) -> None:
    admin.flag(tenant.environment_id, "plain", [{"type": "STATIC", "value": True}])
    admin.flag(tenant.environment_id, "off", RULES, enabled=False)
    for flag in ("plain", "off", "missing"):
        client.simulate_post(
            "/v1/evaluate", json={"flagKey": flag, "userIdentifier": "u"}, headers=auth(tenant)
        )
    services.event_log.close()
    events = services.settings.events_location
    rows = duckdb.sql(
        "SELECT flag_key, rule_index, arm, rollout_percentage, schema_version "
        f"FROM read_parquet('{events}/event_type=evaluation/*/*.parquet') ORDER BY flag_key"
    ).fetchall()
    assert rows == [
        ("missing", None, None, None, 2),
        ("off", None, None, None, 2),
        ("plain", 0, None, None, 2),
    ]
