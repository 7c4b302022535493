"""The event lake in S3-compatible storage (contract section 8), against a real SeaweedFS.

Real ``flagsight serve`` hosts write straight to the bucket; ``flagsight pipeline run`` on a
data directory of its own loads every host's events into its warehouse, each exactly once,
after a host is SIGKILLed mid-traffic, and nothing acknowledged is lost while the store is
down.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow.fs as pafs
import pytest
import requests

from api.eventlog.reading import read_events
from api.eventlog.schema import EVALUATION, FEEDBACK
from api.infra.host_identity import host_id
from api.settings import Settings
from devtools.engines.seaweedfs import SeaweedFS
from pipelines.cli import run_pipeline_once
from pipelines.definitions import working_database_path
from pipelines.lake import open_lake
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, Tenant, requests_caller
from tests.support.engines import seaweedfs_for
from tests.support.server import GunicornServer
from tests.support.traffic import traffic


def _uri(store: SeaweedFS) -> str:
    """A prefix of its own in the shared bucket, so tests of the module do not mix."""
    return f"s3://{store.bucket}/lake-{time.time_ns()}"


def _host(data_dir: Path, store: SeaweedFS, uri: str, workers: int = 2) -> GunicornServer:
    env = {**store.environment(), "FLAGSIGHT_EVENTS_URI": uri, "FLAGSIGHT_SEAL_RETRY_CAP": "4"}
    return GunicornServer(data_dir, admin_token=ADMIN_TOKEN, workers=workers, env=env)


def _tenant(server: GunicornServer) -> Tenant:
    admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "f", [{"type": "PERCENTAGE", "percentage": 50}])
    server.wait_config_everywhere()
    return tenant


def _settings(store: SeaweedFS, uri: str, data_dir: Path) -> Settings:
    env = {**store.environment(), "FLAGSIGHT_EVENTS_URI": uri, "FLAGSIGHT_DATA_DIR": str(data_dir)}
    return Settings.from_env(env)


def _lake_ids(settings: Settings, event_type: str) -> list[str]:
    """Every evaluation id in the bucket's files of one type, duplicates kept."""
    table = read_events(settings.events_location, event_type, settings.s3)
    return table.column("evaluation_id").to_pylist()


def _wait_in_lake(
    settings: Settings, evaluations: list[str], feedback: list[str], s: float
) -> None:
    deadline = time.monotonic() + s
    while time.monotonic() < deadline:
        try:
            if set(evaluations) <= set(_lake_ids(settings, EVALUATION)) and set(feedback) <= set(
                _lake_ids(settings, FEEDBACK)
            ):
                return
        except OSError:  # a store just started again may answer 500 for a moment: ask again
            pass
        time.sleep(0.5)


def _pipeline(
    store: SeaweedFS, uri: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> duckdb.DuckDBPyConnection:
    """``flagsight pipeline run`` on a data directory of its own; its working database."""
    settings = _settings(store, uri, data_dir)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", store.environment()["AWS_SECRET_ACCESS_KEY"])
    run_pipeline_once(settings, echo=lambda line: None)
    return duckdb.connect(working_database_path(settings), read_only=True)


def _column(con: duckdb.DuckDBPyConnection, sql: str) -> list:
    return [row[0] for row in con.execute(sql).fetchall()]


def _send(server: GunicornServer, tenant: Tenant) -> tuple[list[str], list[str]]:
    """Single and bulk evaluations, feedback on some: the acknowledged ids of each."""
    session = requests.Session()
    session.headers["Authorization"] = f"ApiKey {tenant.api_key}"
    evaluations, feedback = [], []
    for n in range(30):
        answer = session.post(
            f"{server.url}/v1/evaluate", json={"flagKey": "f", "userIdentifier": f"u{n}"}
        )
        assert answer.status_code == 200
        evaluations.append(answer.json()["evaluationId"])
    bulk = session.post(
        f"{server.url}/v1/evaluate/bulk",
        json={"flagKey": "f", "userIdentifiers": [f"b{n}" for n in range(25)]},
    )
    assert bulk.status_code == 200
    evaluations += [entry["evaluationId"] for entry in bulk.json().values()]
    for evaluation_id in evaluations[::3]:
        answer = session.post(
            f"{server.url}/v1/feedback/report",
            json={"evaluationId": evaluation_id, "result": True, "latencyMs": 12.5},
        )
        assert answer.status_code == 204
        feedback.append(evaluation_id)
    return evaluations, feedback


def test_a_hosts_events_reach_the_bucket_and_the_warehouse_of_the_pipeline_host(
    seaweedfs: SeaweedFS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, data = _uri(seaweedfs), tmp_path / "host"
    settings = _settings(seaweedfs, uri, data)
    server = _host(data, seaweedfs, uri).start()
    try:
        evaluations, feedback = _send(server, _tenant(server))
        _wait_in_lake(settings, evaluations, feedback, 15)
    finally:
        server.stop()

    assert sorted(_lake_ids(settings, EVALUATION)) == sorted(evaluations)
    assert sorted(_lake_ids(settings, FEEDBACK)) == sorted(feedback)
    assert not (data / "events").exists()  # nothing sealed to the local disk
    assert list((data / "wal").glob("*.wal")) == []
    prefix = uri.removeprefix("s3://")
    names = [
        info.path.removeprefix(prefix + "/")
        for info in seaweedfs.filesystem().get_file_info(pafs.FileSelector(prefix, recursive=True))
        if info.type == pafs.FileType.File and info.path.endswith(".parquet")
    ]
    own = host_id(settings.host_id_path)
    assert names and all(name.split("/")[2].startswith(f"{own}-") for name in names)
    assert {name.split("/")[0] for name in names} == {
        f"event_type={EVALUATION}",
        f"event_type={FEEDBACK}",
    }

    with _pipeline(seaweedfs, uri, tmp_path / "pipeline", monkeypatch) as con:
        assert sorted(_column(con, "SELECT evaluation_id FROM evaluation_events")) == sorted(
            evaluations
        )
        assert sorted(_column(con, "SELECT evaluation_id FROM feedback_events")) == sorted(feedback)
        assert sorted(_column(con, "SELECT path FROM loaded_files")) == sorted(names)
    # A second run loads nothing again: the ledger keys on the object names.
    with _pipeline(seaweedfs, uri, tmp_path / "pipeline", monkeypatch) as con:
        assert _column(con, "SELECT count(*) FROM evaluation_events") == [len(evaluations)]
        assert _column(con, "SELECT count(*) FROM load_batches WHERE file_count > 0") == [2]


def test_two_hosts_one_killed_mid_traffic_every_acknowledged_event_once(
    seaweedfs: SeaweedFS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = _uri(seaweedfs)
    hosts = [_host(tmp_path / name, seaweedfs, uri, workers=2).start() for name in ("a", "b")]
    acked_evals: list[str] = []
    acked_feedback: list[str] = []
    stop = threading.Event()
    try:
        tenants = [_tenant(host) for host in hosts]
        clients = [
            threading.Thread(
                target=traffic, args=(host.url, tenant.api_key, stop, acked_evals, acked_feedback)
            )
            for host, tenant in zip(hosts, tenants, strict=True)
            for _ in range(2)
        ]
        for client in clients:
            client.start()
        time.sleep(2.5)  # some segments sealed into the bucket, others still open
        hosts[0].kill()  # SIGKILL master, workers and sealer of host a together
        time.sleep(1.0)  # host b goes on
        stop.set()
        for client in clients:
            client.join()
        assert len(acked_evals) > 200 and len(acked_feedback) > 50
        hosts[0].start()  # same data directory: same host id, its segments recovered
        settings = _settings(seaweedfs, uri, tmp_path / "a")
        _wait_in_lake(settings, acked_evals, acked_feedback, 20)
    finally:
        stop.set()
        for host in hosts:
            host.stop()

    lake_evaluations = _lake_ids(settings, EVALUATION)
    lake_feedback = _lake_ids(settings, FEEDBACK)
    assert len(lake_evaluations) == len(set(lake_evaluations)), "an evaluation sealed twice"
    assert len(lake_feedback) == len(set(lake_feedback)), "a feedback event sealed twice"
    ids = {host_id(tmp_path / name / "host-id") for name in ("a", "b")}
    assert len(ids) == 2

    with _pipeline(seaweedfs, uri, tmp_path / "pipeline", monkeypatch) as con:
        warehouse = Counter(_column(con, "SELECT evaluation_id FROM evaluation_events"))
        feedback = Counter(_column(con, "SELECT evaluation_id FROM feedback_events"))
        duplicates = _column(con, "SELECT coalesce(sum(duplicate_rows), 0) FROM load_batches")
        hosts_loaded = {
            path.split("/")[2][:32] for path in _column(con, "SELECT path FROM loaded_files")
        }
    assert set(acked_evals) <= set(warehouse) and max(warehouse.values()) == 1
    assert set(acked_feedback) <= set(feedback) and max(feedback.values()) == 1
    assert duplicates == [0]
    assert hosts_loaded == ids


@pytest.fixture
def own_seaweedfs(tmp_path: Path) -> Iterator[SeaweedFS]:
    """A SeaweedFS of this test alone: it is stopped and started again."""
    yield from seaweedfs_for(tmp_path / "seaweedfs")


def test_while_the_store_is_down_hosts_answer_and_nothing_acknowledged_is_lost(
    own_seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    uri, data = _uri(own_seaweedfs), tmp_path / "host"
    settings = _settings(own_seaweedfs, uri, data)
    server = _host(data, own_seaweedfs, uri).start()
    acked_evals: list[str] = []
    acked_feedback: list[str] = []
    refused: list[tuple[str, int]] = []
    stop = threading.Event()
    try:
        tenant = _tenant(server)
        clients = [
            threading.Thread(
                target=traffic,
                args=(server.url, tenant.api_key, stop, acked_evals, acked_feedback, refused),
            )
            for _ in range(2)
        ]
        for client in clients:
            client.start()
        time.sleep(1.5)
        own_seaweedfs.stop()
        down_at, during, refused_before = time.monotonic(), len(acked_evals), len(refused)
        time.sleep(30)
        assert refused[refused_before:] == []  # every evaluate 200, every feedback 204
        assert len(acked_evals) - during > 1000
        assert server.metric("flagsight_event_lake_unreachable") == 1
        assert server.metric("flagsight_event_log_backlog_segments") >= 2
        assert server.metric("flagsight_event_seal_failures_total") >= 2
        own_seaweedfs.start()
        up_after = time.monotonic() - down_at
        stop.set()
        for client in clients:
            client.join()
        _wait_in_lake(settings, acked_evals, acked_feedback, 60)
        assert server.metric("flagsight_event_lake_unreachable") == 0
    finally:
        stop.set()
        server.stop()

    lake_evaluations = _lake_ids(settings, EVALUATION)
    lake_feedback = _lake_ids(settings, FEEDBACK)
    assert set(acked_evals) <= set(lake_evaluations), f"lost after {up_after:.0f} s down"
    assert set(acked_feedback) <= set(lake_feedback)
    assert len(lake_evaluations) == len(set(lake_evaluations))
    assert len(lake_feedback) == len(set(lake_feedback))
    assert list((data / "wal").glob("*.wal")) == []


def test_objects_of_the_old_layout_keep_their_ledger_key_and_are_moved(
    seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    uri = _uri(seaweedfs)
    settings = _settings(seaweedfs, uri, tmp_path / "data")
    lake = open_lake(settings.events_location, settings.s3)
    filesystem, base = seaweedfs.filesystem(), uri.removeprefix("s3://")
    old = [
        f"{base}/evaluation/date=2026-03-01/h1-a.parquet",
        f"{base}/feedback/date=2026-03-01/h1-a.parquet",
    ]
    resealed = f"{base}/event_type=evaluation/date=2026-03-01/h1-a.parquet"
    for name in [*old, resealed]:
        with filesystem.open_output_stream(name) as out:
            out.write(b"PAR1 a sealed file")
    with filesystem.open_output_stream(f"{base}/evaluation/date=2026-03-01/.h1-b.parquet") as out:
        out.write(b"PAR1 being written")

    listed = [f.relative_path for t in (EVALUATION, FEEDBACK) for f in lake.sealed_files(t)]
    expected = ["event_type=evaluation/date=2026-03-01/h1-a.parquet",
                "event_type=feedback/date=2026-03-01/h1-a.parquet"]  # fmt: skip
    assert listed == expected  # the file in both places is listed once
    assert [lake.relocate_legacy(t) for t in (EVALUATION, FEEDBACK)] == [1, 1]
    assert [
        f.relative_path for t in (EVALUATION, FEEDBACK) for f in lake.sealed_files(t)
    ] == expected
    left = [
        info.path.removeprefix(f"{base}/")
        for info in filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
        if info.type == pafs.FileType.File
    ]
    assert sorted(left) == sorted([*expected, "evaluation/date=2026-03-01/.h1-b.parquet"])
    assert [lake.relocate_legacy(t) for t in (EVALUATION, FEEDBACK)] == [0, 0]
