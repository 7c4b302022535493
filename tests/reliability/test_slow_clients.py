"""Clients that send too little, too slowly, or nothing at all, against a real server: a body
shorter than its Content-Length is refused (never served, metered or logged)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, Tenant, requests_caller
from tests.support.server import GunicornServer


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GunicornServer]:
    srv = GunicornServer(tmp_path_factory.mktemp("slow") / "data", admin_token=ADMIN_TOKEN).start()
    yield srv
    srv.kill()


@pytest.fixture(scope="module")
def slow_tenant(slow_server: GunicornServer) -> Tenant:
    admin = Admin(requests_caller(slow_server.url), ADMIN_TOKEN)
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    time.sleep(1.2)  # every worker knows the new key (contract: within a second)
    return tenant


def usage(server: GunicornServer, tenant: Tenant) -> int:
    admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
    path = f"/organizations/{tenant.organization_id}/usage"
    return admin.request("GET", path, expect=200)["evaluations"]


def evaluation_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "events").glob("evaluation/date=*/*.parquet"))


def test_a_body_shorter_than_its_content_length_is_not_served(
    slow_server: GunicornServer, slow_tenant: Tenant
) -> None:
    body = b'{"flagKey":"f","userIdentifier":"u"}'
    head = (
        b"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: ApiKey " + slow_tenant.api_key.encode() + b"\r\n"
        b"Content-Length: %d\r\n\r\n" % (len(body) + 40)
    )
    with socket.create_connection(("127.0.0.1", slow_server.port), timeout=10) as sock:
        sock.sendall(head + body)
        sock.shutdown(socket.SHUT_WR)  # the rest never comes
        answer = b"".join(iter(lambda: sock.recv(4096), b""))
    assert b" 200 " not in answer.split(b"\r\n", 1)[0]
    time.sleep(2.5)  # the sealing interval is 1 s: anything logged would be in a file by now
    assert usage(slow_server, slow_tenant) == 0
    assert evaluation_files(slow_server.data_dir) == []
    whole = requests.post(
        f"{slow_server.url}/v1/evaluate",
        data=body,
        headers={
            "Authorization": f"ApiKey {slow_tenant.api_key}",
            "Content-Type": "application/json",
        },
        timeout=10,
    )
    assert whole.status_code == 200 and usage(slow_server, slow_tenant) == 1
