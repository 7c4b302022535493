"""Acknowledged events survive SIGKILL of every worker and the master (contract section 3)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import duckdb

from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, requests_caller
from tests.support.server import GunicornServer
from tests.support.traffic import traffic


def _ids_in_lake(events: Path, event_type: str) -> list[str]:
    files = list((events / f"event_type={event_type}").glob("date=*/*.parquet"))
    if not files:
        return []
    query = (
        f"SELECT evaluation_id FROM read_parquet('{events}/event_type={event_type}/*/*.parquet')"
    )
    return [row[0] for row in duckdb.sql(query).fetchall()]


def test_every_acknowledged_event_is_in_parquet_exactly_once_after_sigkill(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = GunicornServer(data, admin_token=ADMIN_TOKEN, workers=3).start()
    try:
        admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
        tenant = admin.tenant()
        admin.flag(tenant.environment_id, "f", [{"type": "PERCENTAGE", "percentage": 50}])
        acked_evals: list[str] = []
        acked_feedback: list[str] = []
        stop = threading.Event()
        clients = [
            threading.Thread(
                target=traffic,
                args=(server.url, tenant.api_key, stop, acked_evals, acked_feedback),
            )
            for _ in range(4)
        ]
        for t in clients:
            t.start()
        time.sleep(2.5)  # long enough for some segments to be sealed, others still open
        server.kill()  # SIGKILL master and workers together, mid-traffic
        stop.set()
        for t in clients:
            t.join()
    finally:
        server.kill()

    assert len(acked_evals) > 200 and len(acked_feedback) > 50
    restarted = GunicornServer(data, admin_token=ADMIN_TOKEN, workers=2).start()
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            evaluations = _ids_in_lake(data / "events", "evaluation")
            if set(acked_evals) <= set(evaluations):
                break
            time.sleep(0.3)
    finally:
        restarted.stop()

    evaluations = _ids_in_lake(data / "events", "evaluation")
    feedback = _ids_in_lake(data / "events", "feedback")
    assert len(evaluations) == len(set(evaluations)), "an evaluation event was sealed twice"
    assert len(feedback) == len(set(feedback)), "a feedback event was sealed twice"
    assert set(acked_evals) <= set(evaluations)
    assert set(acked_feedback) <= set(feedback)
