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


# --- a percentage within a segment (contract 12) -----------------------------------------------

WITHIN = [
    {"type": "SEGMENT", "segment": "vip", "value": True},
    {"type": "PERCENTAGE", "percentage": 40, "segment": "staff", "value": True},
    {"type": "STATIC", "value": False},
]
STAFF = {
    "userIdentifiers": ["user-1", "user-2"],  # listed
    "excludedUserIdentifiers": ["in-3", "in-4"],  # excluded, whatever the conditions say
    "conditions": [{"attribute": "userIdentifier", "operator": "STARTS_WITH", "values": ["in-"]}],
}
WITHIN_USERS = ["vip-0", "user-1", "user-2", "user-3", *(f"in-{i}" for i in range(200))]


def expected_within(user: str) -> tuple[int, str | None]:
    """The deciding rule and arm: the split applies to the staff only; others go on to the
    STATIC rule and are in neither arm."""
    if user == "vip-0":
        return 0, None
    staff = user in ("user-1", "user-2") or (
        user.startswith("in-") and user not in ("in-3", "in-4")
    )
    if not staff:
        return 2, None
    if bucket("checkout", user) < threshold(40):
        return 1, "treatment"
    return 2, "control"


@pytest.mark.parametrize("bulk", [False, True])
def test_users_outside_the_splits_segment_are_in_neither_arm(
    client, admin, tenant, services, bulk
) -> None:
    admin.segment(tenant.organization_id, "vip", ["vip-0"])
    admin.request(
        "PUT", f"/organizations/{tenant.organization_id}/segments/staff", STAFF, expect=200
    )
    admin.flag(tenant.environment_id, "checkout", WITHIN)
    if bulk:
        answer = client.simulate_post(
            "/v1/evaluate/bulk",
            json={"flagKey": "checkout", "userIdentifiers": WITHIN_USERS},
            headers=auth(tenant),
        )
        assert answer.status_code == 200
        values = {u: answer.json[u]["value"] for u in WITHIN_USERS}
    else:
        values = {}
        for user in WITHIN_USERS:
            answer = client.simulate_post(
                "/v1/evaluate",
                json={"flagKey": "checkout", "userIdentifier": user},
                headers=auth(tenant),
            )
            values[user] = answer.json["value"]
    source = "v1-bulk" if bulk else "v1"
    rows = logged(services)
    for user in WITHIN_USERS:
        rule, arm = expected_within(user)
        assert values[user] is (rule != 2), user
        assert rows[(user, source)] == (rule, arm, 40.0 if arm else None, None), user
    arms = [rows[(u, source)][1] for u in WITHIN_USERS]
    assert arms.count(None) == 4 and {"treatment", "control"} <= set(arms)


STAFF_BY_TEAM = {
    "userIdentifiers": ["user-1", "user-2"],
    "excludedUserIdentifiers": ["in-3", "in-4"],
    "conditions": [{"attribute": "team", "operator": "EQUALS", "values": ["staff"]}],
}


def _team(user: str) -> str | None:
    return "staff" if user.startswith("in-") else "ops" if user == "user-3" else None


class _Spy:
    """``api.native.fastpath`` as the bulk decoder sees it, counting what it read natively."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.read = 0

    def attribute_columns(self, *args):
        columns = self._inner.attribute_columns(*args)
        self.read += columns is not None
        return columns


@pytest.mark.parametrize("read", ["natively", "by msgspec"])
def test_in_bulk_the_splits_segment_reads_each_users_attributes(
    client, admin, tenant, services, monkeypatch, read
) -> None:
    """The same users and attributes, read into columns by the native decoder or a dict per
    user by msgspec (an escaped name, which the native decoder hands on): the same answers and
    arms, the split applying to the staff by their attributes only."""
    import json

    from api.native import fastpath
    from api.web.public import evaluate

    if fastpath is None:
        pytest.skip("the native path is switched off")
    spy = _Spy(fastpath)
    monkeypatch.setattr(evaluate, "fastpath", spy)
    admin.segment(tenant.organization_id, "vip", ["vip-0"])
    admin.request(
        "PUT", f"/organizations/{tenant.organization_id}/segments/staff", STAFF_BY_TEAM, expect=200
    )
    admin.flag(tenant.environment_id, "checkout", WITHIN)
    attributes = {u: {"team": _team(u), "seats": 3} for u in WITHIN_USERS if _team(u)}
    text = json.dumps({"flagKey": "checkout", "userIdentifiers": WITHIN_USERS,
                       "attributes": attributes})  # fmt: skip
    if read == "by msgspec":
        text = text.replace('"team"', '"\\u0074eam"', 1)
    answer = client.simulate_post(
        "/v1/evaluate/bulk", body=text,
        headers={**auth(tenant), "Content-Type": "application/json"},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert spy.read == (read == "natively")
    rows = logged(services)
    for user in WITHIN_USERS:
        rule, arm = expected_within(user)
        assert answer.json[user]["value"] is (rule != 2), user
        assert rows[(user, "v1-bulk")] == (rule, arm, 40.0 if arm else None, None), user
