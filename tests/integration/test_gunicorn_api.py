"""The API under real gunicorn: several workers, concurrent clients, config propagation."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from tests.support.admin import Admin
from tests.support.server import GunicornServer

UNAUTHORIZED = {
    "status": 401,
    "error": "Unauthorized",
    "message": "Missing or invalid Authorization header",
}


def test_metering_is_exact_across_workers_and_concurrent_clients(
    server: GunicornServer, server_admin: Admin
) -> None:
    tenant = server_admin.tenant(plan="enterprise", limit=100)
    server_admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    time.sleep(1.0)  # contract 2: every worker uses an admin change within one second

    def one(i: int) -> dict:
        with requests.Session() as s:
            return s.post(
                f"{server.url}/v1/evaluate",
                json={"flagKey": "f", "userIdentifier": f"user-{i}"},
                headers={"Authorization": f"ApiKey {tenant.api_key}"},
                timeout=10,
            ).json()

    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(one, range(300)))
    served = [a for a in answers if a["error"] is None]
    refused = [a for a in answers if a["error"] and a["error"]["type"] == "PLAN_LIMIT_EXCEEDED"]
    assert (len(served), len(refused)) == (110, 190)
    assert len(server.worker_pids()) == 2
    usage = server_admin.request(
        "GET", f"/organizations/{tenant.organization_id}/usage", expect=200
    )
    assert (usage["evaluations"], usage["blocked"]) == (110, True)
    assert one(999)["error"]["type"] == "PLAN_LIMIT_EXCEEDED"


def test_an_admin_change_reaches_every_worker_within_a_second(
    server: GunicornServer, server_admin: Admin
) -> None:
    tenant = server_admin.tenant()
    server_admin.flag(tenant.environment_id, "f", [{"type": "STATIC", "value": True}])
    session = requests.Session()
    session.headers["Authorization"] = f"ApiKey {tenant.api_key}"

    def values(n: int = 40) -> set[bool]:
        return {
            session.post(
                f"{server.url}/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, timeout=5
            ).json()["value"]
            for _ in range(n)
        }

    time.sleep(1.0)
    assert values() == {True}
    server_admin.flag(tenant.environment_id, "f", [{"type": "STATIC", "value": False}])
    time.sleep(1.0)
    assert values() == {False}
    server_admin.request("DELETE", f"/api-keys/{tenant.api_key_id}", expect=204)
    time.sleep(1.0)
    refused = {
        session.post(
            f"{server.url}/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, timeout=5
        ).status_code
        for _ in range(20)
    }
    assert refused == {401}


def test_operations_endpoints(server: GunicornServer, server_admin: Admin) -> None:
    tenant = server_admin.tenant()
    requests.post(
        f"{server.url}/v1/evaluate",
        json={"flagKey": "f", "userIdentifier": "u"},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
        timeout=5,
    )
    assert requests.get(f"{server.url}/healthz", timeout=5).json() == {"status": "ok"}
    ready = requests.get(f"{server.url}/readyz", timeout=5)
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    metrics = requests.get(f"{server.url}/metrics", timeout=5)
    assert metrics.headers["Content-Type"].startswith("text/plain")
    assert 'flagsight_events_logged_total{type="evaluation"}' in metrics.text
    assert requests.get(f"{server.url}/openapi.json", timeout=5).json()["openapi"] == "3.1.0"


def test_bulk_of_ten_thousand_over_http(server: GunicornServer, server_admin: Admin) -> None:
    tenant = server_admin.tenant()
    server_admin.flag(tenant.environment_id, "f", [{"type": "PERCENTAGE", "percentage": 50}])
    time.sleep(1.0)  # contract 2: every worker uses an admin change within one second
    users = [f"user-{i}" for i in range(10_000)]
    answer = requests.post(
        f"{server.url}/v1/evaluate/bulk",
        json={"flagKey": "f", "userIdentifiers": users},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
        timeout=30,
    )
    assert answer.status_code == 200
    body = answer.json()
    assert list(body) == users
    assert 4_700 < sum(entry["value"] for entry in body.values()) < 5_300


def test_401_body_under_gunicorn(server: GunicornServer) -> None:
    answer = requests.post(
        f"{server.url}/v1/evaluate", json={}, headers={"Authorization": "Bearer x"}, timeout=5
    )
    assert (answer.status_code, answer.json()) == (401, UNAUTHORIZED)


def test_ctrl_c_stops_the_server_without_leak_reports(tmp_path: Path) -> None:
    """Ctrl-C on ``flagsight serve`` (SIGINT to its process group: gunicorn's quick shutdown,
    which skips the ASGI lifespan's shutdown) ended each worker with about forty lines of
    "nanobind: leaked instances" from DuckDB: the worker's start-up objects were still frozen
    out of the cyclic collector when the interpreter exited."""
    server = GunicornServer(tmp_path / "data", admin_token="ctrl-c-admin-token-0123456789")
    server.start()
    try:
        settled = time.monotonic() + 60  # both workers through their start-up
        while server.log_path.read_text().count('"worker started"') < 2:
            assert time.monotonic() < settled, server.log_path.read_text()[-3000:]
            time.sleep(0.1)
        os.killpg(server.proc.pid, signal.SIGINT)
        server.proc.wait(60)  # about a second; generous for a loaded machine
    finally:
        server.kill()
    log = server.log_path.read_text()
    assert "leaked" not in log, log[-3000:]
