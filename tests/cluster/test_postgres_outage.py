"""PostgreSQL stopped for 10 s under traffic on two hosts (contract section 8, issue 14):
flags keep being served from each host's last configuration, admin writes answer 503 with the
contract body, everything recovers without a restart, and the month's count stays within the
bound docs/deployment.md states."""

from __future__ import annotations

import itertools
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from devtools.engines.postgres import PostgresCluster
from tests.support.admin import Admin, requests_caller
from tests.support.server import GunicornServer
from tests.support.timing import PROMPTLY_S

ADMIN_TOKEN = "outage-admin-token-0123456789"
OUTAGE_S = 10.0


@pytest.fixture
def database() -> Iterator[PostgresCluster]:
    """A PostgreSQL of this test's own, since the test stops it."""
    directory = Path(tempfile.mkdtemp(prefix="flagsight-pg-outage-"))
    os.chmod(directory, 0o755)
    cluster = PostgresCluster(directory / "cluster").start()
    yield cluster
    cluster.stop("immediate")


def test_flags_keep_being_served_while_postgres_is_down_and_all_recovers(
    database: PostgresCluster, tmp_path: Path
) -> None:
    env = {"FLAGSIGHT_DATABASE_URL": database.url}
    for n in (1, 2):
        (tmp_path / f"host-{n}").mkdir()
    hosts = [
        GunicornServer(tmp_path / f"host-{n}" / "data", admin_token=ADMIN_TOKEN, env=env).start(60)
        for n in (1, 2)
    ]
    try:
        admin = Admin(requests_caller(hosts[0].url), ADMIN_TOKEN)
        tenant = admin.tenant()
        admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
        time.sleep(1.0)
        answers: dict[str, list[int]] = {"before": [], "during": [], "after": []}
        phase = ["before"]
        stop = threading.Event()

        def traffic(host: GunicornServer) -> None:
            session = requests.Session()
            headers = {"Authorization": f"ApiKey {tenant.api_key}"}
            for n in itertools.count():
                if stop.is_set():
                    return
                answer = session.post(
                    f"{host.url}/v1/evaluate",
                    json={"flagKey": "f", "userIdentifier": f"u{n}"},
                    headers=headers, timeout=5,
                )  # fmt: skip
                ok = answer.status_code == 200 and answer.json()["value"] is True
                answers[phase[0]].append(200 if ok else answer.status_code)

        threads = [threading.Thread(target=traffic, args=(h,)) for h in hosts for _ in range(2)]
        for thread in threads:
            thread.start()
        time.sleep(2)
        phase[0] = "during"
        database.stop("immediate")
        refused = requests.put(
            f"{hosts[1].url}/admin/v1/environments/{tenant.environment_id}/flags/g",
            json={"enabled": True, "archived": False, "rules": [{"type": "STATIC"}]},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=30,
        )
        usage_while_down = [
            requests.get(f"{hosts[1].url}{path}", headers=headers, timeout=30)
            for path, headers in (
                (f"/admin/v1/organizations/{tenant.organization_id}/usage",
                 {"Authorization": f"Bearer {ADMIN_TOKEN}"}),
                ("/v1/usage", {"Authorization": f"ApiKey {tenant.api_key}"}),
            )
        ]  # fmt: skip
        time.sleep(OUTAGE_S)
        database.start()
        phase[0] = "after"
        recovered = None
        deadline = time.monotonic() + 30
        while recovered is None or recovered.status_code != 200:
            assert time.monotonic() < deadline, "admin writes did not recover"
            time.sleep(0.5)
            recovered = requests.put(
                f"{hosts[1].url}/admin/v1/environments/{tenant.environment_id}/flags/g",
                json={"enabled": True, "archived": False, "rules": [{"type": "STATIC"}]},
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                timeout=10,
            )
        time.sleep(3)
        stop.set()
        for thread in threads:
            thread.join()

        assert refused.status_code == 503
        assert refused.json()["status"] == 503 and refused.json()["error"] == "Service Unavailable"
        assert "Retry-After" in refused.headers
        for answer in usage_while_down:  # the count is not known: no older figure for it
            assert answer.status_code == 503, answer.text
            assert "Retry-After" in answer.headers
        # The admin call reads the organization from the control plane first, which is down
        # as well; the public one knows the key from the hosts' cache and asks the meter.
        assert "evaluation count cannot be read now" in usage_while_down[1].json()["message"]
        for name, codes in answers.items():
            assert codes and set(codes) == {200}, (name, sorted(set(codes)))
        assert len(answers["during"]) > 100  # flags were served all through the outage
        # Served on the new flag by the other host without a restart: once its pool is back.
        # psycopg_pool tries again after 1, 2, 4, 8 ... s, so a host whose next attempt falls
        # just after the server's return reconnects up to about the outage's length later
        # than the host that took the write (docs/control-plane.md, "recovery").
        headers = {"Authorization": f"ApiKey {tenant.api_key}"}
        deadline, probes = time.monotonic() + OUTAGE_S + 5, 0
        while True:
            probes += 1
            answer = requests.post(f"{hosts[0].url}/v1/evaluate", json={"flagKey": "g",
                                   "userIdentifier": "u"}, headers=headers, timeout=5)  # fmt: skip
            if answer.json()["value"] is True:
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        served = sum(len(codes) for codes in answers.values()) + probes
        usage_path = f"/organizations/{tenant.organization_id}/usage"
        time.sleep(6)  # every worker reports its lease (every 5 s) and its outage credit
        # On a loaded machine the worker that answers may not have reconnected yet: it says
        # 503 until then (docs/metering.md), and its figure is its last report's until its
        # next; every worker reports within a few intervals of 5 s.
        deadline = time.monotonic() + 6 * PROMPTLY_S
        while True:
            usage = admin.request("GET", usage_path)
            if "evaluations" in usage and abs(usage["evaluations"] - served) <= 2:
                break
            assert time.monotonic() < deadline, (usage, served)
            time.sleep(0.5)
    finally:
        for host in hosts:
            host.kill()
