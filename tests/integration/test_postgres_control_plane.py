"""The service with its control plane in PostgreSQL (``FLAGSIGHT_DATABASE_URL``): a scripted
admin session, two hosts on one database, and PostgreSQL stopped and started again under them.

Each "host" is an in-process app with its own data directory, built by ``build_services`` as
``flagsight serve`` builds each worker."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import falcon.testing
import pytest

from api.controlplane.postgres_store import PostgresControlPlaneStore
from api.server.lifecycle import start_services, stop_services
from api.server.wiring import build_services
from api.settings import Settings
from api.web.app import create_asgi_app
from devtools.engines.postgres import PostgresCluster
from tests.integration.test_cli import flagsight
from tests.support.admin import Admin
from tests.support.admin import testclient_caller as in_process
from tests.support.engines import postgres_session
from tests.support.timing import PROMPTLY_S

TOKEN = "pg-admin-token-0123456789"


class Host:
    """One API host: its services started, an admin client and an evaluating client."""

    def __init__(self, data_dir: Path, database_url: str):
        settings = Settings(
            data_dir=data_dir,
            admin_token=TOKEN,
            database_url=database_url,
            seal_interval_s=1.0,
            config_poll_interval_s=0.1,
            webhook_allow_private=True,  # the test's webhook points at loopback
        )
        self.services = build_services(settings)
        self._threads = start_services(self.services)
        self.client = falcon.testing.TestClient(create_asgi_app(self.services))
        self.admin = Admin(in_process(self.client), TOKEN)

    def call(self, method: str, path: str, body: Any = None) -> falcon.testing.Result:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        return self.client.simulate_request(method, f"/admin/v1{path}", json=body, headers=headers)

    def evaluate(self, api_key: str, flag: str = "f", user: str = "u") -> falcon.testing.Result:
        return self.client.simulate_post(
            "/v1/evaluate",
            json={"flagKey": flag, "userIdentifier": user},
            headers={"Authorization": f"ApiKey {api_key}"},
        )

    def stop(self) -> None:
        stop_services(self.services, self._threads)
        self.services.store.close()


@pytest.fixture
def make_host(tmp_path: Path) -> Iterator[Callable[[str], Host]]:
    hosts: list[Host] = []

    def make(database_url: str) -> Host:
        hosts.append(Host(tmp_path / f"host{len(hosts)}", database_url))
        return hosts[-1]

    yield make
    for host in hosts:
        host.stop()


def within(seconds: float, condition: Callable[[], bool]) -> float:
    """How long ``condition()`` took to hold; fails if it did not within ``seconds``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < seconds, f"not within {seconds} s"
        time.sleep(0.02)
    return time.monotonic() - started


def test_a_scripted_admin_session_on_postgres(make_host, postgres_url) -> None:
    host = make_host(postgres_url)
    assert isinstance(host.services.store, PostgresControlPlaneStore)
    admin = host.admin
    tenant = admin.tenant(plan="pro")
    org, env = tenant.organization_id, tenant.environment_id
    assert (
        host.call("POST", f"/organizations/{org}/environments", {"key": "production"}).status_code
        == 409
    )
    assert host.call("GET", "/organizations/org_0000000000000000").status_code == 404
    missing = host.call("PUT", f"/environments/{env}/flags/f", {"enabled": True, "rules": [
        {"type": "SEGMENT", "segment": "beta"}]})  # fmt: skip
    assert missing.status_code == 400 and "rules[0].segment" in missing.json["message"]
    admin.segment(org, "beta", ["alice"])
    admin.flag(
        env, "f", [{"type": "SEGMENT", "segment": "beta"}, {"type": "PERCENTAGE", "percentage": 0}]
    )
    assert host.evaluate(tenant.api_key, user="alice").json["value"] is True
    assert host.evaluate(tenant.api_key, user="bob").json["value"] is False
    patched = admin.request("PATCH", f"/organizations/{org}", {"plan": "team"}, expect=200)
    assert patched["monthlyEvaluationLimit"] == 10_000_000
    assert [f["key"] for f in admin.request("GET", f"/environments/{env}/flags")["items"]] == ["f"]

    rollout = admin.request("PUT", f"/environments/{env}/flags/f/rollout",
                            {"steps": [10, 100], "stepMinutes": 10, "guardrails": ["failureRate"]})  # fmt: skip
    assert (rollout["state"], rollout["percentage"]) == ("running", 10)
    host.call("DELETE", f"/environments/{env}/flags/f/rollout")
    schedule = admin.request("POST", f"/environments/{env}/flags/f/schedules",
                             {"at": "2099-01-01T00:00:00Z", "flag": {"enabled": False, "rules": []}},
                             expect=201)  # fmt: skip
    listed = admin.request("GET", f"/environments/{env}/flags/f/schedules")["items"]
    assert [s["id"] for s in listed] == [schedule["id"]]
    host.call("DELETE", f"/environments/{env}/flags/f/schedules/{schedule['id']}")
    hook = admin.request("POST", f"/organizations/{org}/webhooks",
                         {"url": "http://127.0.0.1:9/hook", "events": ["flag.changed"]}, expect=201)  # fmt: skip
    assert hook["secret"]

    audit = admin.request("GET", f"/organizations/{org}/audit")["items"]
    rollout_change = next(r for r in audit if r["action"] == "rollout.started")
    admin.request("POST", f"/audit/{rollout_change['id']}/restore", expect=201)
    assert admin.request("GET", f"/environments/{env}/flags/f")["rules"][1]["percentage"] == 0
    assert host.evaluate(tenant.api_key, user="bob").json["value"] is False

    assert host.call("DELETE", f"/api-keys/{tenant.api_key_id}").status_code == 204
    assert host.evaluate(tenant.api_key).status_code == 401
    assert host.call("DELETE", f"/environments/{env}/flags/f").status_code == 204
    assert host.call("GET", f"/environments/{env}/flags/f").status_code == 404


def test_two_hosts_see_each_others_changes_within_a_second(make_host, postgres_url) -> None:
    first, second = make_host(postgres_url), make_host(postgres_url)
    tenant = first.admin.tenant()
    first.admin.flag(tenant.environment_id, "f", [{"type": "STATIC", "value": True}])
    within(PROMPTLY_S, lambda: second.evaluate(tenant.api_key).json.get("value") is True)
    second.admin.flag(tenant.environment_id, "f", [{"type": "STATIC", "value": False}])
    within(PROMPTLY_S, lambda: first.evaluate(tenant.api_key).json.get("value") is False)
    assert second.call("DELETE", f"/api-keys/{tenant.api_key_id}").status_code == 204
    within(PROMPTLY_S, lambda: first.evaluate(tenant.api_key).status_code == 401)
    assert first.services.store.signing_key() == second.services.store.signing_key()


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL of this test's own, which it stops and starts (the session's stays up)."""
    yield from postgres_session()


def test_postgres_down_keeps_flags_served_refuses_admin_writes_and_recovers(
    make_host, own_cluster
) -> None:
    host = make_host(own_cluster.url)
    tenant = host.admin.tenant()
    host.admin.flag(tenant.environment_id, "f", [{"type": "STATIC", "value": True}])
    version = host.services.config.version

    own_cluster.stop("fast")
    started = time.monotonic()
    slowest = 0.0
    while time.monotonic() - started < 1.0:  # several failed polls (every 0.1 s)
        t0 = time.monotonic()
        answer = host.evaluate(tenant.api_key)
        slowest = max(slowest, time.monotonic() - t0)
        assert answer.status_code == 200 and answer.json["value"] is True, answer.json
    # Only the calls in flight when the database went away may wait, at most its connection
    # and statement timeouts (docs/metering.md, "PostgreSQL unreachable"); then none does.
    assert slowest < 2.0, "evaluation waited on PostgreSQL past the documented timeouts"
    assert host.services.config.version == version

    write = host.call(
        "PUT", f"/environments/{tenant.environment_id}/flags/g", {"enabled": True, "rules": []}
    )
    assert write.status_code == 503 and write.headers.get("Retry-After")
    assert write.json == {
        "status": 503,
        "error": "Service Unavailable",
        "message": "The control plane is busy or unavailable; nothing was changed. Retry shortly.",
    }
    assert host.call("GET", f"/environments/{tenant.environment_id}/flags").status_code == 503
    assert host.client.simulate_get("/readyz").status_code == 503
    assert host.evaluate(tenant.api_key).status_code == 200

    own_cluster.start()
    within(15.0, lambda: host.call(
        "PUT", f"/environments/{tenant.environment_id}/flags/f", {"enabled": True, "rules": []}
    ).status_code == 200)  # fmt: skip
    within(PROMPTLY_S, lambda: host.evaluate(tenant.api_key).json["value"] is False)
    assert host.client.simulate_get("/readyz").status_code == 200


def test_flagsight_init_creates_the_schema_in_postgres(tmp_path, postgres_url, monkeypatch):
    monkeypatch.setenv("FLAGSIGHT_DATABASE_URL", postgres_url)
    result = flagsight(tmp_path / "data", "init")
    assert result.returncode == 0, result.stderr
    store = PostgresControlPlaneStore(postgres_url)
    try:
        assert store.admin_token_hash() is not None
        assert len(store.list_organizations()) == 1  # the demo
    finally:
        store.close()
    assert not (tmp_path / "data" / "controlplane.sqlite3").exists()
