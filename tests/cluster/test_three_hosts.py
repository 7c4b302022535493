"""One service on three hosts (contract section 8, issue 14): three ``flagsight serve`` with
their own data directories, sharing one PostgreSQL and one bucket in SeaweedFS, all real."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
import requests

from api.settings import Settings
from devtools.engines.postgres import PostgresCluster
from devtools.engines.seaweedfs import SeaweedFS
from pipelines.cli import run_pipeline_once
from pipelines.definitions import working_database_path
from tests.support.admin import Admin, Tenant, requests_caller
from tests.support.engines import fresh_database
from tests.support.server import GunicornServer
from tests.support.timing import PROMPTLY_S

ADMIN_TOKEN = "cluster-admin-token-0123456789"
HOSTS = 3
PROPAGATION_S = PROMPTLY_S


@dataclass
class Cluster:
    hosts: list[GunicornServer]
    env: dict[str, str]
    root: Path

    @property
    def admin(self) -> Admin:
        return Admin(requests_caller(self.hosts[0].url), ADMIN_TOKEN)

    def settings(self, data_dir: Path) -> Settings:
        return Settings.from_env({**self.env, "FLAGSIGHT_DATA_DIR": str(data_dir)})


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory,
    postgres_cluster: PostgresCluster,
    seaweedfs: SeaweedFS,
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster")
    env = {
        "FLAGSIGHT_DATABASE_URL": fresh_database(postgres_cluster),
        "FLAGSIGHT_EVENTS_URI": f"s3://{seaweedfs.bucket}/three-hosts",
        **seaweedfs.environment(),
    }
    for n in range(1, HOSTS + 1):
        (root / f"host-{n}").mkdir()
    hosts = [
        GunicornServer(root / f"host-{n}" / "data", admin_token=ADMIN_TOKEN, env=env)
        for n in range(1, HOSTS + 1)
    ]
    for host in hosts:
        host.start(timeout_s=60)
    yield Cluster(hosts, env, root)
    for host in hosts:
        host.kill()


def evaluate(host: GunicornServer, tenant: Tenant, flag: str, user: str) -> requests.Response:
    return requests.post(
        f"{host.url}/v1/evaluate",
        json={"flagKey": flag, "userIdentifier": user},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
        timeout=10,
    )


def until(condition, timeout_s: float) -> float:  # noqa: ANN001
    """Seconds until ``condition()`` held; fails after ``timeout_s``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, "not within the time allowed"
        time.sleep(0.02)
    return time.monotonic() - started


def test_a_free_organization_hammered_on_every_host_is_served_exactly_its_hard_threshold(
    cluster: Cluster,
) -> None:
    tenant = cluster.admin.tenant(plan="free")
    cluster.admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    time.sleep(PROPAGATION_S)
    served = [0] * (HOSTS * 4)
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}

    def hammer(slot: int) -> None:
        host = cluster.hosts[slot % HOSTS]
        session = requests.Session()
        rng = random.Random(slot)
        deadline = time.monotonic() + 120
        for n in itertools.count():
            assert time.monotonic() < deadline, "the hard threshold was never reached"
            if rng.random() < 0.5:
                answer = session.post(
                    f"{host.url}/v1/evaluate",
                    json={"flagKey": "f", "userIdentifier": f"u{slot}-{n}"},
                    headers=headers, timeout=10,
                ).json()  # fmt: skip
                entries = [answer]
            else:
                users = [f"u{slot}-{n}-{i}" for i in range(rng.randrange(1, 200))]
                entries = list(session.post(
                    f"{host.url}/v1/evaluate/bulk",
                    json={"flagKey": "f", "userIdentifiers": users},
                    headers=headers, timeout=10,
                ).json().values())  # fmt: skip
            granted = [
                e for e in entries if (e.get("error") or {}).get("type") != "PLAN_LIMIT_EXCEEDED"
            ]
            served[slot] += len(granted)
            if len(granted) < len(entries):
                return

    with ThreadPoolExecutor(len(served)) as pool:
        list(pool.map(hammer, range(len(served))))
    assert sum(served) == 11_000
    usage = cluster.admin.request("GET", f"/organizations/{tenant.organization_id}/usage")
    assert usage["evaluations"] == 11_000 and usage["blocked"] is True


def test_an_admin_change_and_a_revocation_reach_every_host_within_a_second(
    cluster: Cluster,
) -> None:
    tenant = cluster.admin.tenant()
    cluster.admin.flag(tenant.environment_id, "g", [{"type": "STATIC"}], enabled=False)
    time.sleep(PROPAGATION_S)
    assert all(evaluate(h, tenant, "g", "u").json()["value"] is False for h in cluster.hosts)

    Admin(requests_caller(cluster.hosts[0].url), ADMIN_TOKEN).flag(
        tenant.environment_id, "g", [{"type": "STATIC"}], enabled=True
    )
    for other in cluster.hosts[1:]:
        until(lambda h=other: evaluate(h, tenant, "g", "u").json()["value"] is True, PROPAGATION_S)

    Admin(requests_caller(cluster.hosts[2].url), ADMIN_TOKEN).request(
        "DELETE", f"/api-keys/{tenant.api_key_id}", expect=204
    )
    until(lambda: evaluate(cluster.hosts[0], tenant, "g", "u").status_code == 401, PROPAGATION_S)


def test_a_host_killed_mid_traffic_loses_and_duplicates_no_acknowledged_event(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = cluster.admin.tenant()
    cluster.admin.flag(tenant.environment_id, "k", [{"type": "STATIC"}])
    time.sleep(PROPAGATION_S)
    acknowledged: list[str] = []
    feedback_acknowledged: list[str] = []
    stop = threading.Event()

    def traffic(host: GunicornServer, name: str) -> None:
        session = requests.Session()
        headers = {"Authorization": f"ApiKey {tenant.api_key}"}
        for n in itertools.count():
            if stop.is_set():
                return
            try:
                answer = session.post(
                    f"{host.url}/v1/evaluate",
                    json={"flagKey": "k", "userIdentifier": f"{name}-{n}"},
                    headers=headers, timeout=5,
                )  # fmt: skip
                if answer.status_code == 200:
                    evaluation_id = answer.json()["evaluationId"]
                    acknowledged.append(evaluation_id)
                    report = session.post(
                        f"{host.url}/v1/feedback/report",
                        json={"evaluationId": evaluation_id, "result": True},
                        headers=headers, timeout=5,
                    )  # fmt: skip
                    if report.status_code == 204:
                        feedback_acknowledged.append(evaluation_id)
            except requests.RequestException:
                time.sleep(0.05)  # the killed host: its clients retry elsewhere later

    threads = [
        threading.Thread(target=traffic, args=(host, f"h{i}-{t}"))
        for i, host in enumerate(cluster.hosts)
        for t in range(2)
    ]
    for thread in threads:
        thread.start()
    time.sleep(3)
    victim = cluster.hosts[1]
    victim.kill()
    time.sleep(1)
    victim.start(timeout_s=60)
    time.sleep(2)
    stop.set()
    for thread in threads:
        thread.join()
    for host in cluster.hosts:  # sealing on a graceful stop flushes what is left to the bucket
        host.stop()
        host.start(timeout_s=60)

    for name, value in cluster.env.items():  # the pipeline host's environment
        monkeypatch.setenv(name, value)
    pipeline = cluster.settings(tmp_path / "pipeline")
    run_pipeline_once(pipeline, echo=lambda _: None)
    with duckdb.connect(str(working_database_path(pipeline)), read_only=True) as con:
        evaluations = con.execute(
            "SELECT evaluation_id, count(*) FROM evaluation_events WHERE organization_id = ?"
            " GROUP BY ALL",
            [tenant.organization_id],
        ).fetchall()
        feedback = con.execute(
            "SELECT evaluation_id, count(*) FROM feedback_events WHERE organization_id = ?"
            " GROUP BY ALL",
            [tenant.organization_id],
        ).fetchall()
    assert len(acknowledged) > 500
    assert {i for i, _ in evaluations} >= set(acknowledged)  # none lost
    assert all(n == 1 for _, n in evaluations)  # none twice
    assert {i for i, _ in feedback} >= set(feedback_acknowledged)
    assert all(n == 1 for _, n in feedback)

    # Every host shows the run's figures within 60 s (the snapshot in the bucket, polled).
    metrics = f"/admin/v1/environments/{tenant.environment_id}/flags/k/metrics"
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    def shown(host: GunicornServer) -> bool:
        answer = requests.get(f"{host.url}{metrics}", headers=auth, timeout=5)
        return answer.status_code == 200 and answer.json()["evaluations"] == len(evaluations)

    for host in cluster.hosts:
        until(lambda h=host: shown(h), 60)
