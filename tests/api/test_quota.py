"""The organization's monthly quota a machine can read (issue 12): ``RateLimit-Policy`` and
``RateLimit`` (draft-ietf-httpapi-ratelimit-headers-11) on every /v1 and OFREP evaluate
answer, and ``GET /v1/usage`` with an API key, the admin usage call's body."""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from pathlib import Path

import falcon.testing
import pytest

from api.server.lifecycle import start_services, stop_services
from api.server.wiring import build_services
from api.settings import Settings
from api.web.app import create_asgi_app
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, Tenant
from tests.support.admin import testclient_caller as in_process

START = calendar.timegm((2031, 1, 31, 23, 0, 0))  # an hour before February
POLICY = re.compile(r'^"monthly";q=(\d+)$')
LIMIT = re.compile(r'^"monthly";r=(\d+);t=(\d+)$')


class Clock:
    def __init__(self) -> None:
        self.now = float(START)

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def clocked(tmp_path: Path, clock: Clock) -> Iterator[falcon.testing.TestClient]:
    settings = Settings(data_dir=tmp_path / "data", admin_token=ADMIN_TOKEN)
    services = build_services(settings, clock=clock)
    housekeeping = start_services(services)
    yield falcon.testing.TestClient(create_asgi_app(services))
    stop_services(services, housekeeping)


@pytest.fixture
def small(clocked: falcon.testing.TestClient) -> Tenant:
    admin = Admin(in_process(clocked), ADMIN_TOKEN)
    tenant = admin.tenant(plan="enterprise", limit=10)  # hard threshold 11
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    admin.flag(tenant.environment_id, "g", [{"type": "STATIC"}])
    return tenant


def quota(answer: falcon.testing.Result) -> tuple[int, int, int]:
    """(q, r, t) from the answer's fields, which must follow the draft's syntax."""
    policy = POLICY.match(answer.headers["RateLimit-Policy"])
    limit = LIMIT.match(answer.headers["RateLimit"])
    assert policy and limit, (
        answer.headers.get("RateLimit-Policy"),
        answer.headers.get("RateLimit"),
    )
    return int(policy[1]), int(limit[1]), int(limit[2])


def calls(tenant: Tenant) -> list[tuple[str, dict]]:
    return [
        ("/v1/evaluate", {"flagKey": "f", "userIdentifier": "u1"}),
        ("/v1/evaluate", {"flagKey": "missing", "userIdentifier": "u1"}),
        ("/v1/evaluate/bulk", {"flagKey": "f", "userIdentifiers": ["u1", "u2"]}),
        ("/ofrep/v1/evaluate/flags/f", {"context": {"targetingKey": "u1"}}),
        ("/ofrep/v1/evaluate/flags/missing", {"context": {"targetingKey": "u1"}}),
        ("/ofrep/v1/evaluate/flags", {"context": {"targetingKey": "u1"}}),
    ]


def test_every_evaluate_answer_carries_the_monthly_quota(
    clocked: falcon.testing.TestClient, small: Tenant, clock: Clock
) -> None:
    key = {"Authorization": f"ApiKey {small.api_key}"}
    used = 0
    for path, body in calls(small):
        clock.now += 1  # the fields are computed at most once a second per organization
        answer = clocked.simulate_post(path, json=body, headers=key)
        assert answer.status_code in (200, 404), (path, answer.text)
        used += 2 if path.endswith(("bulk", "/flags")) else 1  # what is left after this answer
        assert quota(answer) == (11, 11 - used, 3600 - (clock.now - START)), path
    usage = clocked.simulate_get("/v1/usage", headers=key).json
    assert usage["evaluations"] == used == 8


def test_the_quota_reaches_zero_at_the_hard_threshold(
    clocked: falcon.testing.TestClient, small: Tenant, clock: Clock
) -> None:
    key = {"Authorization": f"ApiKey {small.api_key}"}
    for i in range(11):
        clocked.simulate_post("/v1/evaluate", json={"flagKey": "f", "userIdentifier": f"u{i}"},
                              headers=key)  # fmt: skip
    clock.now += 1
    refused = clocked.simulate_post(
        "/ofrep/v1/evaluate/flags", json={"context": {"targetingKey": "u"}}, headers=key
    )
    assert refused.status_code == 429
    assert quota(refused)[:2] == (11, 0)
    assert int(refused.headers["Retry-After"]) >= quota(refused)[2]  # the draft's rule
    blocked = clocked.simulate_post(
        "/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, headers=key
    )
    assert blocked.json["error"]["type"] == "PLAN_LIMIT_EXCEEDED" and quota(blocked)[1] == 0


def test_the_quota_starts_again_with_the_month(
    clocked: falcon.testing.TestClient, small: Tenant, clock: Clock
) -> None:
    key = {"Authorization": f"ApiKey {small.api_key}"}
    clocked.simulate_post("/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, headers=key)
    clock.now = calendar.timegm((2031, 2, 1, 0, 0, 5))
    answer = clocked.simulate_post(
        "/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, headers=key
    )
    assert quota(answer) == (11, 10, 28 * 86400 - 5)


def test_v1_usage_is_the_admin_usage_body(
    clocked: falcon.testing.TestClient, small: Tenant
) -> None:
    key = {"Authorization": f"ApiKey {small.api_key}"}
    for user in ("a", "b", "c"):
        clocked.simulate_post(
            "/v1/evaluate", json={"flagKey": "f", "userIdentifier": user}, headers=key
        )
    mine = clocked.simulate_get("/v1/usage", headers=key)
    admin = clocked.simulate_get(
        f"/admin/v1/organizations/{small.organization_id}/usage",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert mine.status_code == 200 and mine.json == admin.json
    assert mine.json == {
        "month": "2031-01", "evaluations": 3, "limit": 10, "hardLimit": 11,
        "overage": False, "blocked": False,
    }  # fmt: skip
    refused = clocked.simulate_get("/v1/usage", headers={"Authorization": "ApiKey nope"})
    assert refused.status_code == 401 and refused.json["status"] == 401


def test_v1_usage_refuses_a_key_whose_organization_is_gone(
    client: falcon.testing.TestClient, tenant: Tenant, services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The moment between an organization's removal and its keys': the key is no longer
    valid, as for a key whose environment is gone (401, the one error documented)."""
    monkeypatch.setattr(services.config, "organization", lambda organization_id: None)
    answer = client.simulate_get("/v1/usage", headers={"Authorization": f"ApiKey {tenant.api_key}"})
    assert (answer.status_code, answer.json["error"]) == (401, "Unauthorized")
