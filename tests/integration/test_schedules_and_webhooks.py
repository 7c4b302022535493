"""Scheduled changes and webhooks through a real ``flagsight serve`` (gunicorn, 2 workers)
and a real HTTP receiver on loopback (contract section 10)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from flagsight_core import StaticRule

from api.backends import open_store
from api.controlplane.changes import FlagBody
from api.settings import Settings
from devtools.engines.ports import free_port
from tests.support.admin import Admin, Tenant, requests_caller
from tests.support.receiver import Receiver
from tests.support.server import GunicornServer

ADMIN_TOKEN = "admin-test-token-0123456789"


@pytest.fixture(params=["embedded", "postgres"])
def backend(request: pytest.FixtureRequest) -> dict[str, str]:
    """The embedded default, or the control plane and meter in PostgreSQL (issue 15: each of
    these works on both)."""
    if request.param == "embedded":
        return {}
    return {"FLAGSIGHT_DATABASE_URL": request.getfixturevalue("postgres_url")}


@pytest.fixture
def server(tmp_path: Path, backend: dict[str, str]) -> Iterator[GunicornServer]:
    srv = GunicornServer(tmp_path / "data", admin_token=ADMIN_TOKEN, env=backend).start()
    yield srv
    srv.stop()


@pytest.fixture
def server_admin(server: GunicornServer) -> Admin:
    return Admin(requests_caller(server.url), ADMIN_TOKEN)


def served_values(server: GunicornServer, tenant: Tenant, n: int = 30) -> set[bool]:
    """The flag's value as answered over ``n`` fresh connections (spread over the workers)."""
    headers = {"Authorization": f"ApiKey {tenant.api_key}", "Connection": "close"}
    return {
        requests.post(
            f"{server.url}/v1/evaluate",
            json={"flagKey": "launch", "userIdentifier": "u"},
            headers=headers,
            timeout=5,
        ).json()["value"]
        for _ in range(n)
    }


def test_a_schedule_is_served_by_every_worker_within_a_second_of_its_time(
    server: GunicornServer, server_admin: Admin
) -> None:
    tenant = server_admin.tenant()
    server_admin.flag(tenant.environment_id, "launch", [{"type": "STATIC"}], enabled=False)
    server.wait_config_everywhere()  # every worker serves the new keys and flags
    at = time.time() + 2.0
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1000):03d}Z"
    made = server_admin.request(
        "POST", f"/environments/{tenant.environment_id}/flags/launch/schedules",
        {"at": iso, "flag": {"enabled": True, "rules": [{"type": "STATIC"}]}}, expect=201,
    )  # fmt: skip
    assert served_values(server, tenant, 10) == {False}
    time.sleep(max(0.0, at + 1.0 - time.time()))
    assert served_values(server, tenant) == {True}
    listed = server_admin.request(
        "GET", f"/environments/{tenant.environment_id}/flags/launch/schedules", expect=200
    )["items"]
    assert [(s["id"], s["state"]) for s in listed] == [(made["id"], "applied")]
    audit = server_admin.request("GET", f"/organizations/{tenant.organization_id}/audit")
    assert (audit["items"][0]["action"], audit["items"][0]["actor"]) == (
        "schedule.applied", "schedule"
    )  # fmt: skip


def test_a_schedule_due_while_the_service_was_down_is_applied_at_start_up(
    server: GunicornServer, server_admin: Admin
) -> None:
    tenant = server_admin.tenant()
    server_admin.flag(tenant.environment_id, "launch", [{"type": "STATIC"}], enabled=False)
    server.stop()
    store = open_store(
        Settings(
            data_dir=server.data_dir, database_url=server.extra_env.get("FLAGSIGHT_DATABASE_URL")
        )
    )
    store.create_schedule(
        tenant.environment_id, "launch", time.time() + 0.2, FlagBody(True, False, (StaticRule(),))
    )
    store.close()
    time.sleep(0.5)
    server.start()
    assert served_values(server, tenant) == {True}


def wait_for(predicate, timeout_s: float) -> bool:  # noqa: ANN001 - any callable
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_every_event_arrives_once_signed_after_the_receiver_was_down_and_a_restart(
    tmp_path: Path, backend: dict[str, str]
) -> None:
    server = GunicornServer(
        tmp_path / "data", admin_token=ADMIN_TOKEN,
        env={"FLAGSIGHT_WEBHOOK_RETRY_BASE": "0.2", "FLAGSIGHT_WEBHOOK_RETRY_CAP": "1",
             "FLAGSIGHT_WEBHOOK_ALLOW_PRIVATE": "1", **backend},
    ).start()  # fmt: skip
    receiver = Receiver(free_port())
    try:
        admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
        tenant = admin.tenant()
        hook = admin.request(
            "POST", f"/organizations/{tenant.organization_id}/webhooks",
            {"url": f"http://127.0.0.1:{receiver.port}/hook", "events": ["flag.changed"]},
            expect=201,
        )  # fmt: skip
        receiver.secret = hook["secret"]
        receiver.start()
        admin.flag(tenant.environment_id, "launch", [{"type": "STATIC"}])
        assert wait_for(lambda: len(receiver.events) == 1, 10)
        receiver.stop()  # down: the next changes queue up and their attempts fail
        for n in range(5):
            admin.flag(tenant.environment_id, "launch", [{"type": "STATIC"}], enabled=n % 2 == 0)
        time.sleep(1.5)
        server.stop()
        server.start()
        admin.flag(tenant.environment_id, "launch", [{"type": "PERCENTAGE", "percentage": 5}])
        time.sleep(1.0)
        receiver.start()
        assert wait_for(lambda: len(receiver.events) == 7, 20), len(receiver.events)
        time.sleep(2.0)  # nothing more arrives: each event once
    finally:
        receiver.stop()
        server.stop()
    assert receiver.bad_signatures == 0
    assert sorted(len(copies) for copies in receiver.events.values()) == [1] * 7
    changes = sorted(receiver.events.values(), key=lambda copies: copies[0]["at"])
    assert [c[0]["type"] for c in changes] == ["flag.changed"] * 7
    assert [c[0]["data"]["after"]["enabled"] for c in changes] == [
        True, True, False, True, False, True, True
    ]  # fmt: skip
    assert changes[0][0]["data"]["before"] is None
