"""Local evaluation (contract section 11) on servers of their own: the service down at the
start and lost mid-way, two hosts on PostgreSQL, and 1,000 open streams on one host. Apart
from ``test_local_mode.py`` (one shared server) so that the two run side by side."""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from flagsight_sdk import FlagsightClient
from flagsight_sdk.model import FAILURE_REFUSED

from api.eventlog.schema import EVALUATION
from tests.sdk.conftest import wait_for_events
from tests.sdk.test_local_mode import ADMIN_TOKEN, local_client, of_environment, wait_until
from tests.support.admin import Admin, Tenant, requests_caller
from tests.support.server import GunicornServer
from tests.support.timing import PROMPTLY_S


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[GunicornServer]:
    server = GunicornServer(tmp_path / "data", admin_token=ADMIN_TOKEN)
    yield server
    if server.proc is not None and server.proc.poll() is None:
        server.kill()


def test_down_at_start_lost_midway_and_back_nothing_reported_is_lost(
    own_server: GunicornServer,
) -> None:
    """Before the first ruleset: False with a failure, within the timeout. Lost mid-way: the
    last ruleset keeps answering while granted quota lasts, and the reports made meanwhile
    arrive when the service is back."""
    client = FlagsightClient("fsk_unknown", own_server.url, local=True, timeout_s=0.3)
    started = time.monotonic()
    first = client.evaluate("launch", "u")
    assert time.monotonic() - started < 0.3 + PROMPTLY_S  # its timeout, not a wait for ever
    assert (first.value, first.failure) == (False, "TIMEOUT")
    client.close(0.5)

    own_server.start()
    admin = Admin(requests_caller(own_server.url), ADMIN_TOKEN)
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "launch", [{"type": "STATIC"}])
    own_server.wait_config_everywhere()
    client = local_client(own_server, tenant, timeout_s=0.5)
    try:
        before = [client.evaluate("launch", f"before-{n}") for n in range(100)]
        assert all(a.value for a in before)
        own_server.kill()  # lost mid-way
        during = [client.evaluate("launch", f"during-{n}") for n in range(100)]
        assert all(a.value and a.evaluation_id for a in during)  # the grant outlives the link
        own_server.start()
        assert client.local is not None
        assert client.local.reports.flush(60)
    finally:
        client.close()

    mine = of_environment(tenant.environment_id)
    events = wait_for_events(own_server, EVALUATION, mine, 200)
    ids = events["evaluation_id"].to_pylist()
    assert sorted(ids) == sorted(a.evaluation_id for a in before + during)


@pytest.fixture
def two_hosts(tmp_path: Path, postgres_url: str) -> Iterator[list[GunicornServer]]:
    """Two ``flagsight serve`` sharing one PostgreSQL control plane and meter."""
    hosts = [
        GunicornServer(
            tmp_path / f"host-{n}" / "data",
            admin_token=ADMIN_TOKEN,
            env={"FLAGSIGHT_DATABASE_URL": postgres_url},
        )
        for n in (1, 2)
    ]
    for host in hosts:
        (host.data_dir.parent).mkdir(parents=True, exist_ok=True)
        host.start(timeout_s=60)
    yield hosts
    for host in hosts:
        host.kill()


def test_on_postgresql_a_change_and_a_revocation_on_one_host_reach_a_client_of_the_other(
    two_hosts: list[GunicornServer],
) -> None:
    first, second = two_hosts
    admin = Admin(requests_caller(first.url), ADMIN_TOKEN)
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "launch", [{"type": "STATIC", "value": False}])
    second.wait_config_everywhere()
    client = local_client(second, tenant)
    try:
        assert client.evaluate("launch", "u").value is False
        admin.flag(tenant.environment_id, "launch", [{"type": "STATIC"}])
        took = wait_until(lambda: client.evaluate("launch", "u").value is True, PROMPTLY_S)
        assert took is not None, f"a change made on the other host took over {PROMPTLY_S} s"
        admin.request("DELETE", f"/api-keys/{tenant.api_key_id}", expect=204)
        took = wait_until(
            lambda: client.evaluate("launch", "u").failure == FAILURE_REFUSED, PROMPTLY_S
        )
        assert took is not None, f"a revocation made on the other host took over {PROMPTLY_S} s"
    finally:
        client.close(1)


def test_a_host_holds_1000_streams_of_two_keys_bounds_each_key_and_tells_them_of_a_change(
    own_server: GunicornServer,
) -> None:
    """Two keys hold 500 streams each, the most a key may hold on a host (contract 11): the
    501st of one key gets 429 with Retry-After, while the host keeps evaluating, accepting the
    other key's requests and telling every stream of the changed environment within seconds."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    own_server.start()
    admin = Admin(requests_caller(own_server.url), ADMIN_TOKEN)
    tenants = [admin.tenant(), admin.tenant()]
    for tenant in tenants:
        admin.flag(tenant.environment_id, "launch", [{"type": "STATIC"}])
    own_server.wait_config_everywhere()

    def stream_request(tenant: Tenant) -> bytes:
        return (
            f"GET /v1/stream HTTP/1.1\r\nHost: t\r\nAuthorization: ApiKey {tenant.api_key}\r\n\r\n"
        ).encode()

    streams: dict[str, list[socket.socket]] = {t.api_key: [] for t in tenants}
    try:
        for tenant in tenants:
            for _ in range(500):
                sock = socket.create_connection(("127.0.0.1", own_server.port), timeout=10)
                sock.sendall(stream_request(tenant))
                streams[tenant.api_key].append(sock)
        for sock in [s for socks in streams.values() for s in socks]:
            assert b"event: ruleset" in sock.recv(4096)  # every stream opened
        refused = requests.get(
            f"{own_server.url}/v1/stream",
            headers={"Authorization": f"ApiKey {tenants[0].api_key}"},
            timeout=5,
        )
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "10"
        assert "500 event streams" in refused.json()["message"]
        for tenant in tenants:
            answer = requests.post(
                f"{own_server.url}/v1/evaluate",
                json={"flagKey": "launch", "userIdentifier": "u"},
                headers={"Authorization": f"ApiKey {tenant.api_key}"},
                timeout=5,
            )
            assert answer.status_code == 200 and answer.json()["value"] is True
        assert own_server.metric("flagsight_streams_open") == 1_000
        changed = tenants[0]
        admin.flag(changed.environment_id, "launch", [{"type": "STATIC"}], enabled=False)
        for sock in streams[changed.api_key]:
            sock.settimeout(10)  # a second on an idle machine; generous on a loaded one
            assert b"event: ruleset" in sock.recv(4096)
    finally:
        for sock in [s for socks in streams.values() for s in socks]:
            sock.close()
    assert wait_until(lambda: own_server.metric("flagsight_streams_open") == 0, 15) is not None
    again = requests.get(
        f"{own_server.url}/v1/stream",
        headers={"Authorization": f"ApiKey {tenants[0].api_key}"},
        timeout=5,
        stream=True,
    )
    assert again.status_code == 200  # the slots came back with the closed streams
    again.close()
