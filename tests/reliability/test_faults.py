"""Faults, each a test: the event log's disk full or unwritable, the control plane locked or
briefly unavailable, a worker killed mid-request, the pipeline killed mid-run and run again,
and the clock crossing a month boundary. Nothing acknowledged is lost, nothing counted twice."""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import falcon.testing
import pytest
import requests

from api.controlplane.sqlite_store import SqliteControlPlaneStore
from api.server.lifecycle import start_services, stop_services
from api.server.wiring import build_services
from api.serving.services import Services
from api.settings import Settings
from api.web.app import create_asgi_app
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, requests_caller
from tests.support.admin import testclient_caller as in_process
from tests.support.server import REPO, GunicornServer


def lake_ids(events: Path, event_type: str) -> list[str]:
    if not list((events / f"event_type={event_type}").glob("date=*/*.parquet")):
        return []
    query = (
        f"SELECT evaluation_id FROM read_parquet('{events}/event_type={event_type}/*/*.parquet')"
    )
    return [row[0] for row in duckdb.sql(query).fetchall()]


def lost_events(metrics_text: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics_text.splitlines()
        if line.startswith("flagsight_events_lost")
    )


class Client:
    """One SDK-like client: remembers only what the server acknowledged."""

    def __init__(self, url: str, api_key: str):
        self.url = url
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"ApiKey {api_key}"
        self.evaluations: list[str] = []
        self.feedback: list[str] = []

    def evaluate(self, user: str) -> requests.Response:
        answer = self.session.post(
            f"{self.url}/v1/evaluate", json={"flagKey": "f", "userIdentifier": user}, timeout=10
        )
        if answer.status_code == 200:
            self.evaluations.append(answer.json()["evaluationId"])
        return answer

    def report(self, evaluation_id: str) -> requests.Response:
        answer = self.session.post(
            f"{self.url}/v1/feedback/report",
            json={"evaluationId": evaluation_id, "result": True},
            timeout=10,
        )
        if answer.status_code == 204:
            self.feedback.append(evaluation_id)
        return answer


# -- the event log's disk full ----------------------------------------------------------------


@pytest.fixture
def tiny_wal(tmp_path: Path) -> Iterator[Path]:
    """``data/wal`` on a real 4 MiB tmpfs (root with mount rights; skipped otherwise)."""
    wal = tmp_path / "data" / "wal"
    wal.mkdir(parents=True)
    mounted = os.geteuid() == 0 and (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(wal)], capture_output=True
        ).returncode
        == 0
    )
    if not mounted:
        pytest.skip("cannot mount a tmpfs here; tests/eventlog covers the boundary in-process")
    yield wal
    subprocess.run(["umount", "-l", str(wal)], check=True)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, bytes(1 << 12))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def test_full_event_log_disk_refuses_feedback_keeps_evaluating_and_loses_nothing_acknowledged(
    tiny_wal: Path,
) -> None:
    data = tiny_wal.parent
    server = GunicornServer(data, admin_token=ADMIN_TOKEN).start()
    try:
        admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
        tenant = admin.tenant()
        admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
        server.wait_config_everywhere()  # every worker serves the new keys and flags
        client = Client(server.url, tenant.api_key)
        for i in range(40):
            assert client.evaluate(f"before-{i}").status_code == 200
            assert client.report(client.evaluations[-1]).status_code == 204
        acknowledged = (list(client.evaluations), list(client.feedback))

        filler = fill(tiny_wal)
        # The open segments' last pages may still hold a few small frames: those are really
        # written and answered 204. Then the disk refuses, and feedback answers 503.
        refused: list[requests.Response] = []
        for i in range(2000):
            answer = client.report(acknowledged[0][i % 40])
            if answer.status_code != 204:
                refused.append(answer)
                if len(refused) == 10:
                    break
        served = [client.evaluate(f"full-{i}") for i in range(20)]
        assert {r.status_code for r in refused} == {503}
        assert refused[0].json()["status"] == 503 and refused[0].headers["Retry-After"]
        assert {r.status_code for r in served} == {200}
        assert all(r.json()["value"] is True for r in served)  # flags keep working
        metrics = "".join(requests.get(f"{server.url}/metrics", timeout=5).text for _ in range(4))
        assert lost_events(metrics) > 0  # the loss is counted, not silent
        assert requests.get(f"{server.url}/readyz", timeout=5).status_code in (200, 503)

        filler.unlink()  # the disk has room again: the log heals without a restart
        healed = [client.report(acknowledged[0][i]) for i in range(10)]
        assert {r.status_code for r in healed} == {204}
        after = client.evaluate("after")
        assert after.status_code == 200
    finally:
        server.stop()
    evaluations, feedback = (
        lake_ids(data / "events", "evaluation"),
        lake_ids(data / "events", "feedback"),
    )
    assert set(acknowledged[0]) | {after.json()["evaluationId"]} <= set(evaluations)
    assert set(client.feedback) <= set(feedback)
    assert len(evaluations) == len(set(evaluations))
    assert sorted(feedback) == sorted(client.feedback)  # no 503 was stored behind our back


# -- the event log's directory unwritable ---------------------------------------------------


def test_unwritable_event_log_refuses_feedback_with_503_and_heals(
    services: Services, client: falcon.testing.TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root ignores file modes, so the refusal is injected where the log touches the disk."""
    admin = Admin(in_process(client), ADMIN_TOKEN)
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    auth = {"Authorization": f"ApiKey {tenant.api_key}"}

    def evaluate(user: str) -> falcon.testing.Result:
        return client.simulate_post(
            "/v1/evaluate", json={"flagKey": "f", "userIdentifier": user}, headers=auth
        )

    def report(evaluation_id: str) -> falcon.testing.Result:
        return client.simulate_post(
            "/v1/feedback/report",
            json={"evaluationId": evaluation_id, "result": True},
            headers=auth,
        )

    acked = [evaluate(f"u{i}").json["evaluationId"] for i in range(5)]
    assert {report(i).status_code for i in acked} == {204}
    wal = str(services.settings.wal_dir)
    real_open, real_write = os.open, os.write

    def in_wal(fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(wal)
        except OSError:
            return False

    def refuse_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).startswith(wal):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    def refuse_write(fd: int, data: Any) -> int:
        if in_wal(fd):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_write(fd, data)

    with monkeypatch.context() as patch:
        patch.setattr(os, "open", refuse_open)
        patch.setattr(os, "write", refuse_write)
        refused = report(acked[0])
        still = evaluate("during")
    assert refused.status_code == 503 and refused.json["status"] == 503
    assert refused.headers["Retry-After"]
    assert still.status_code == 200 and still.json["value"] is True
    assert services.metrics.events_lost.labels("evaluation")._value.get() == 1
    assert report(acked[1]).status_code == 204  # healed
    services.event_log.close()
    events = services.settings.data_dir / "events"
    assert set(acked) <= set(lake_ids(events, "evaluation"))
    assert sorted(lake_ids(events, "feedback")) == sorted([*acked, acked[1]])


# -- the control plane locked or briefly unavailable ----------------------------------------


def hold_exclusive_lock(path: Path, seconds: float, locked: threading.Event) -> None:
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    locked.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


def test_locked_control_plane_keeps_evaluation_serving_and_admin_writes_wait(
    server: GunicornServer, server_admin: Admin
) -> None:
    tenant = server_admin.tenant()
    server_admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    server.wait_config_everywhere()  # every worker serves the new keys and flags
    client = Client(server.url, tenant.api_key)
    locked = threading.Event()
    holder = threading.Thread(
        target=hold_exclusive_lock, args=(server.data_dir / "controlplane.sqlite3", 3.0, locked)
    )
    holder.start()
    locked.wait(10)
    started = time.monotonic()
    answers, slowest = [], 0.0
    while time.monotonic() - started < 2.5:  # while the lock is held
        t0 = time.monotonic()
        answers.append(client.evaluate("u").status_code)
        slowest = max(slowest, time.monotonic() - t0)
    write = server_admin.request(
        "PUT", f"/environments/{tenant.environment_id}/flags/g", {"enabled": True, "rules": []}
    )
    holder.join()
    assert set(answers) == {200} and len(answers) > 20
    # the lock is held 3 s: an evaluation that waited on it would take over 2 s
    assert slowest < 2.0, "evaluation waited on the control-plane lock"
    assert write["key"] == "g"  # the write waited for the lock (busy timeout), then succeeded
    assert time.monotonic() - started >= 2.5


def test_a_control_plane_locked_past_the_busy_timeout_answers_503_not_500(
    settings: Settings,
) -> None:
    services = build_services(settings)
    services.store = SqliteControlPlaneStore(settings.control_plane_path, busy_timeout_s=0.2)
    housekeeping = start_services(services)
    try:
        client = falcon.testing.TestClient(create_asgi_app(services))
        admin = Admin(in_process(client), ADMIN_TOKEN)
        tenant = admin.tenant()
        admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
        locked = threading.Event()
        holder = threading.Thread(
            target=hold_exclusive_lock, args=(settings.control_plane_path, 1.5, locked)
        )
        holder.start()
        locked.wait(10)
        write = client.simulate_put(
            f"/admin/v1/environments/{tenant.environment_id}/flags/g",
            json={"enabled": True, "rules": []},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        evaluation = client.simulate_post(
            "/v1/evaluate",
            json={"flagKey": "f", "userIdentifier": "u"},
            headers={"Authorization": f"ApiKey {tenant.api_key}"},
        )
        holder.join()
        assert write.status_code == 503, write.text
        assert write.json["status"] == 503 and write.headers.get("Retry-After")
        assert evaluation.status_code == 200 and evaluation.json["value"] is True
        retried = admin.request(
            "PUT", f"/environments/{tenant.environment_id}/flags/g", {"enabled": True, "rules": []}
        )
        assert retried["key"] == "g"
    finally:
        stop_services(services, housekeeping)


def test_control_plane_briefly_unavailable_keeps_the_last_config_serving(
    services: Services, client: falcon.testing.TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = Admin(in_process(client), ADMIN_TOKEN)
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    version = services.config.version
    with monkeypatch.context() as patch:
        patch.setattr(services.store, "config_version", unavailable)
        patch.setattr(services.store, "read_config", unavailable)
        time.sleep(0.5)  # several failed reloads (the poll interval is 0.1 s)
        answer = client.simulate_post(
            "/v1/evaluate",
            json={"flagKey": "f", "userIdentifier": "u"},
            headers={"Authorization": f"ApiKey {tenant.api_key}"},
        )
        ready = client.simulate_get("/readyz")
    assert answer.status_code == 200 and answer.json["value"] is True
    assert services.config.version == version
    assert ready.status_code == 503  # readiness says so; liveness does not flap
    assert client.simulate_get("/healthz").status_code == 200
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC", "value": False}])
    time.sleep(0.3)
    assert services.config.version > version  # it reloads once the file answers again


# -- a worker killed in the middle of requests ------------------------------------------------


def test_a_worker_killed_mid_requests_loses_nothing_acknowledged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = GunicornServer(data, admin_token=ADMIN_TOKEN, workers=2).start()
    try:
        admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
        tenant = admin.tenant(plan="enterprise", limit=10**9)
        admin.flag(tenant.environment_id, "f", [{"type": "PERCENTAGE", "percentage": 50}])
        server.wait_config_everywhere()  # every worker serves the new keys and flags
        clients = [Client(server.url, tenant.api_key) for _ in range(4)]
        failures: list[str] = []
        stop = threading.Event()

        def traffic(client: Client, n: int) -> None:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    answer = client.evaluate(f"c{n}-{i}")
                    if answer.status_code == 200:
                        client.report(answer.json()["evaluationId"])
                    elif answer.status_code != 200:
                        failures.append(f"status {answer.status_code}")
                except requests.RequestException as exc:  # the killed worker's connections
                    failures.append(type(exc).__name__)

        threads = [threading.Thread(target=traffic, args=(c, n)) for n, c in enumerate(clients)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        victim = server.worker_pids()[0]
        os.kill(victim, signal.SIGKILL)
        time.sleep(3.0)  # gunicorn replaces the worker; traffic goes on
        stop.set()
        for t in threads:
            t.join()
        pids = server.worker_pids()
        assert len(pids) == 2 and victim not in pids
        usage = admin.request("GET", f"/organizations/{tenant.organization_id}/usage", expect=200)
    finally:
        server.stop()
    evaluations = [e for c in clients for e in c.evaluations]
    feedback = [e for c in clients for e in c.feedback]
    assert len(evaluations) > 100 and len(feedback) > 100
    assert all(not f.startswith("status") for f in failures), failures  # only dropped connections
    # metered: every acknowledged one, plus at most the requests cut off mid-flight
    assert len(evaluations) <= usage["evaluations"] <= len(evaluations) + len(failures)
    in_lake = lake_ids(data / "events", "evaluation")
    assert set(evaluations) <= set(in_lake) and len(in_lake) == len(set(in_lake))
    fed = lake_ids(data / "events", "feedback")
    assert set(feedback) <= set(fed) and len(fed) == len(set(fed))


# -- the pipeline killed mid-run, then run again ---------------------------------------------


def expected_figures(events: Path) -> dict[tuple[str, str], tuple[int, int]]:
    """(environment, flag) -> (evaluations, evaluations with feedback), from the lake itself."""
    query = f"""
        WITH e AS (SELECT * FROM read_parquet('{events}/event_type=evaluation/*/*.parquet')),
             f AS (SELECT DISTINCT evaluation_id FROM read_parquet('{events}/event_type=feedback/*/*.parquet'))
        SELECT e.environment_id, e.flag_key, count(*), count(f.evaluation_id)
        FROM e LEFT JOIN f USING (evaluation_id) GROUP BY ALL
    """
    return {(env, flag): (n, fb) for env, flag, n, fb in duckdb.sql(query).fetchall()}


def warehouse_figures(warehouse: Path) -> dict[tuple[str, str], tuple[int, int]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute(
            "SELECT environment_id, flag_key, evaluations, feedback_count "
            "FROM flag_environment_metrics"
        ).fetchall()
    return {(env, flag): (n, fb) for env, flag, n, fb in rows}


def pipeline(data: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FLAGSIGHT_DATA_DIR": str(data), "FLAGSIGHT_ADMIN_TOKEN": ADMIN_TOKEN}
    return subprocess.Popen(
        [sys.executable, "-m", "api.cli", "pipeline", "run"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


def produce(server: GunicornServer, tenant_key: str, n: int, tag: str) -> None:
    client = Client(server.url, tenant_key)
    for i in range(n):
        answer = client.evaluate(f"{tag}-{i}")
        if i % 3 == 0:
            client.report(answer.json()["evaluationId"])


def test_a_pipeline_killed_mid_run_and_run_again_counts_everything_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = GunicornServer(data, admin_token=ADMIN_TOKEN).start()
    try:
        admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
        tenant = admin.tenant()
        admin.flag(tenant.environment_id, "f", [{"type": "PERCENTAGE", "percentage": 30}])
        server.wait_config_everywhere()  # every worker serves the new keys and flags
        produce(server, tenant.api_key, 300, "first")
    finally:
        server.stop()  # sealed
    for delay in (2.5, 4.0, 5.5):  # startup, loading, deriving/publishing
        run = pipeline(data)
        time.sleep(delay)
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(10)
    assert pipeline(data).wait(120) == 0
    events = data / "events"
    assert warehouse_figures(data / "warehouse.duckdb") == expected_figures(events)

    server = GunicornServer(data, admin_token=ADMIN_TOKEN).start()
    try:
        produce(server, tenant.api_key, 200, "second")
    finally:
        server.stop()
    run = pipeline(data)
    time.sleep(3.5)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(10)
    assert pipeline(data).wait(120) == 0
    assert pipeline(data).wait(120) == 0  # and once more over the same files: no change
    figures = warehouse_figures(data / "warehouse.duckdb")
    assert figures == expected_figures(events)
    assert figures[(tenant.environment_id, "f")][0] == 500


# -- the clock crossing a month boundary ------------------------------------------------------


class Clock:
    def __init__(self, moment: datetime):
        self.now = moment.timestamp()

    def __call__(self) -> float:
        return self.now


def test_the_month_boundary_resets_usage_and_counts_nothing_twice(settings: Settings) -> None:
    clock = Clock(datetime(2031, 1, 31, 23, 59, 58, tzinfo=UTC))
    services = build_services(settings, clock=clock)
    housekeeping = start_services(services)
    try:
        client = falcon.testing.TestClient(create_asgi_app(services))
        admin = Admin(in_process(client), ADMIN_TOKEN)
        tenant = admin.tenant(plan="enterprise", limit=10)  # hard threshold 11
        admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
        auth = {"Authorization": f"ApiKey {tenant.api_key}"}

        def evaluate(users: list[str]) -> dict[str, Any]:
            return client.simulate_post(
                "/v1/evaluate/bulk", json={"flagKey": "f", "userIdentifiers": users}, headers=auth
            ).json

        def usage() -> dict[str, Any]:
            return admin.request(
                "GET", f"/organizations/{tenant.organization_id}/usage", expect=200
            )

        january = evaluate([f"j{i}" for i in range(8)])
        clock.now += 1.5  # 23:59:59.5
        late = evaluate([f"k{i}" for i in range(5)])
        assert [a["error"] for a in january.values()] == [None] * 8
        assert [a["error"] and a["error"]["type"] for a in late.values()] == [None] * 3 + [
            "PLAN_LIMIT_EXCEEDED"
        ] * 2
        assert usage() == {
            "month": "2031-01", "evaluations": 11, "limit": 10, "hardLimit": 11,
            "overage": True, "blocked": True,
        }  # fmt: skip
        clock.now += 0.5  # 2031-02-01T00:00:00Z
        february = evaluate([f"f{i}" for i in range(4)])
        assert [a["error"] for a in february.values()] == [None] * 4
        assert usage() == {
            "month": "2031-02", "evaluations": 4, "limit": 10, "hardLimit": 11,
            "overage": False, "blocked": False,
        }  # fmt: skip
        assert services.meter.usage(tenant.organization_id, 203101) == 11  # January kept
    finally:
        stop_services(services, housekeeping)
    events = settings.data_dir / "events"
    rows = duckdb.sql(
        f"SELECT strftime(evaluated_at, '%Y-%m') AS month, count(*), count(DISTINCT evaluation_id),"
        f" count(*) FILTER (error_type IS NULL) "
        f"FROM read_parquet('{events}/event_type=evaluation/*/*.parquet') GROUP BY month ORDER BY month"
    ).fetchall()
    assert rows == [("2031-01", 13, 13, 11), ("2031-02", 4, 4, 4)]
