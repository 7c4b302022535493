"""Contract 12's privacy: attribute values never reach the event log, the warehouse, the logs or
the metrics. A real ``flagsight serve`` (gunicorn, its workers and sealer process, logging at
debug) is sent evaluations whose attributes hold one unique marker, through every door that
takes them (single, bulk, OFREP single and bulk, the SDK) and in requests it refuses; its
events are sealed and the insights pipeline runs over them; then every file under the data
directory, read as what it is (Parquet and DuckDB decoded, as their pages are compressed),
the server's whole log and ``/metrics`` are searched for the marker.

The search is shown to see what it should: the user identifiers, which events do record, are
found where the marker is not.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
import requests
from flagsight_sdk import FlagsightClient

from api.eventlog.schema import EVALUATION
from api.settings import Settings
from pipelines.cli import run_pipeline_once
from tests.conftest import ADMIN_TOKEN
from tests.sdk.conftest import wait_for_events
from tests.support.admin import Admin, Tenant, requests_caller
from tests.support.server import GunicornServer

MARKER = f"attr-{uuid.uuid4().hex}"
"""In every attribute value sent; nowhere else."""
USER = f"user-{uuid.uuid4().hex}"
"""A user identifier: recorded with each event by design, so the search must find it."""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[GunicornServer, Tenant]]:
    server = GunicornServer(
        tmp_path / "data", admin_token=ADMIN_TOKEN, env={"FLAGSIGHT_LOG_LEVEL": "debug"}
    )
    server.start()
    try:
        admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
        tenant = admin.tenant(plan="enterprise", limit=10**6)
        env = tenant.environment_id
        admin.segment(tenant.organization_id, "beta", [USER])
        admin.flag(env, "static", [{"type": "STATIC", "value": True}])
        admin.flag(env, "rollout", [{"type": "SEGMENT", "segment": "beta", "value": True},
                                    {"type": "PERCENTAGE", "percentage": 50}])  # fmt: skip
        admin.flag(env, "off", [{"type": "STATIC"}], enabled=False)
        server.wait_config_everywhere()
        yield server, tenant
    finally:
        server.kill()  # a no-op once the test stopped it


def attributes(n: int) -> dict[str, object]:
    """Attributes whose every string holds the marker, in each shape contract 12 takes."""
    return {"plan": f"{MARKER}-{n}", "email": f"{MARKER}@example.com", "tags": [MARKER, "x"],
            "seats": n, "beta": True}  # fmt: skip


def send_everything(server: GunicornServer, tenant: Tenant) -> int:
    """Every door that takes attributes, served and refused; the evaluations served."""
    api = requests.Session()
    api.headers["Authorization"] = f"ApiKey {tenant.api_key}"
    url, served = server.url, 0

    def post(path: str, body: dict, status: int = 200) -> requests.Response:
        answer = api.post(url + path, json=body, timeout=10)
        assert answer.status_code == status, answer.text
        assert MARKER not in answer.text
        return answer

    for n, flag in enumerate(("static", "rollout", "off", "missing")):
        post("/v1/evaluate", {"flagKey": flag, "userIdentifier": USER, "attributes": attributes(n)})
        users = [USER, f"{USER}-b", f"{USER}-c"]
        post("/v1/evaluate/bulk", {"flagKey": flag, "userIdentifiers": users,
                                   "attributes": {u: attributes(i) for i, u in enumerate(users)}})  # fmt: skip
        context = {"targetingKey": USER, **attributes(n), "device": {"id": MARKER},
                   "mixed": [MARKER, 1], "nothing": None}  # fmt: skip
        post(f"/ofrep/v1/evaluate/flags/{flag}", {"context": context},
             404 if flag == "missing" else 200)  # fmt: skip
        served += 1 + len(users) + 1
    bulk = post("/ofrep/v1/evaluate/flags", {"context": {"targetingKey": USER, **attributes(9)}})
    served += len(bulk.json()["flags"])

    too_long = {"plan": MARKER * 40}
    post("/v1/evaluate", {"flagKey": "static", "userIdentifier": USER,
                          "attributes": too_long}, 400)  # fmt: skip
    post("/v1/evaluate", {"flagKey": "static", "userIdentifier": USER,
                          "attributes": {"bad name": MARKER}}, 400)  # fmt: skip
    post("/v1/evaluate/bulk", {"flagKey": "static", "userIdentifiers": [USER],
                               "attributes": {"stranger": {"plan": MARKER}}}, 400)  # fmt: skip
    post("/ofrep/v1/evaluate/flags/static", {"context": {"targetingKey": USER, **too_long}}, 400)
    post("/ofrep/v1/evaluate/flags", {"context": {"targetingKey": USER, "tags": [MARKER] * 101}},
         400)  # fmt: skip

    sdk = FlagsightClient(tenant.api_key, url)
    try:
        assert sdk.evaluate("static", USER, attributes(20)).value is True
        answers = sdk.evaluate_bulk("rollout", [USER, f"{USER}-d"], {USER: attributes(21)})
        assert answers[USER].value is True  # a member of the segment
        served += 3
    finally:
        sdk.close()
    return served


def readable(path: Path) -> bytes:
    """What a file holds, as text where its format compresses it."""
    if path.suffix == ".parquet":
        return json.dumps(pq.read_table(path).to_pylist(), default=str).encode()
    if path.suffix in (".arrow", ".arrows", ".ipc", ".feather"):
        with path.open("rb") as source:
            return json.dumps(ipc.open_stream(source).read_all().to_pylist(), default=str).encode()
    if path.suffix == ".duckdb":
        with duckdb.connect(str(path), read_only=True) as db:
            tables = db.execute(
                "SELECT table_schema, table_name FROM information_schema.tables"
            ).fetchall()
            rows = [
                db.execute(f'SELECT * FROM "{schema}"."{name}"').fetchall()
                for schema, name in tables
            ]
        return json.dumps(rows, default=str).encode()
    return path.read_bytes()


def search(root: Path, needle: str) -> tuple[list[str], int]:
    """The files under ``root`` whose content holds ``needle``, and how many files were read."""
    found, read = [], 0
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.suffix in (".wal", ".tmp") and path.stat().st_size == 0:
            continue
        content = readable(path)  # a Parquet or DuckDB file it cannot decode fails the test
        read += 1
        if needle.encode() in content:
            found.append(str(path.relative_to(root)))
    return found, read


def test_no_attribute_value_reaches_a_file_a_log_or_a_metric(
    served: tuple[GunicornServer, Tenant],
) -> None:
    server, tenant = served
    count = send_everything(server, tenant)
    metrics = requests.get(f"{server.url}/metrics", timeout=10).text
    assert "flagsight_http_requests" in metrics and MARKER not in metrics

    mine = lambda t: t.filter(pc.equal(t["environment_id"], tenant.environment_id))  # noqa: E731
    assert wait_for_events(server, EVALUATION, mine, count).num_rows == count
    server.stop()  # gracefully: the sealer seals what the workers handed off, logs are whole
    settings = Settings(data_dir=server.data_dir, admin_token=ADMIN_TOKEN)
    run_pipeline_once(settings, echo=lambda line: None)

    files, read = search(server.data_dir, MARKER)
    assert files == []
    log = server.log_path.read_text()
    assert MARKER not in log
    assert os.path.getsize(server.log_path) > 0

    # The search sees what it should: the identifiers are in the events, and the warehouse's
    # tables are read (the flags evaluated are named there).
    with_user, _ = search(server.data_dir / "events", USER)
    assert any(name.endswith(".parquet") for name in with_user), with_user
    warehouse = [name for name in search(server.data_dir, "rollout")[0] if name.endswith(".duckdb")]
    assert "warehouse.duckdb" in warehouse
    assert read >= 10
