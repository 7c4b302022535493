"""/metrics tells an operator what was answered: requests by route and status, outcomes."""

from __future__ import annotations

import re

from api.observability.tallies import outcome_label


def metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    match = re.search(rf"^{name}\{{{re.escape(wanted)}\}} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def test_requests_and_evaluation_outcomes_are_counted(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC", "value": True}])
    auth = {"Authorization": f"ApiKey {tenant.api_key}"}
    for _ in range(3):
        client.simulate_post(
            "/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, headers=auth
        )
    client.simulate_post(
        "/v1/evaluate", json={"flagKey": "nope", "userIdentifier": "u"}, headers=auth
    )
    client.simulate_post(
        "/v1/evaluate/bulk", json={"flagKey": "f", "userIdentifiers": ["a", "b"]}, headers=auth
    )
    client.simulate_post("/v1/evaluate", json={"flagKey": "f"}, headers=auth)
    client.simulate_get("/no/such/path")
    text = client.simulate_get("/metrics").text
    assert metric(text, "flagsight_http_requests_total", route="/v1/evaluate", status="200") == 4
    assert metric(text, "flagsight_http_requests_total", route="/v1/evaluate", status="400") == 1
    assert (
        metric(text, "flagsight_http_requests_total", route="/v1/evaluate/bulk", status="200") == 1
    )
    assert metric(text, "flagsight_http_requests_total", route="unmatched", status="404") == 1
    assert metric(text, "flagsight_http_request_seconds_total", route="/v1/evaluate") > 0
    assert metric(text, "flagsight_evaluations_total", outcome="STATIC:true") == 5
    assert metric(text, "flagsight_evaluations_total", outcome="FLAG_NOT_FOUND") == 1
    # The event log counts its appends in memory; /metrics adds them before rendering.
    assert metric(text, "flagsight_events_logged_total", type="evaluation") == 6


def test_outcome_labels() -> None:
    assert [outcome_label(c) for c in (0, 1, 6, 10)] == [
        "NO_MATCH",
        "STATIC:true",
        "PERCENTAGE:false",
        "PLAN_LIMIT_EXCEEDED",
    ]


_CHILD = """
import os, sys
os.environ["PROMETHEUS_MULTIPROC_DIR"] = sys.argv[1]
from api.observability.metrics import Metrics
metrics = Metrics()
metrics.requests.labels(route="/v1/evaluate", status="200").inc()
metrics.serve_config_version(3)
metrics.bulk_evaluate_seconds.observe(0.01)
print(os.getpid())
"""


def test_each_process_metrics_files_are_allocated_whole_before_use(tmp_path) -> None:
    """prometheus_client makes its files sparse; a store into a hole on a full disk is SIGBUS.
    Every file a process makes is one of ``PROCESS_FILE_PREFIXES``, allocated whole."""
    import subprocess
    import sys

    from api.observability.metrics import PROCESS_FILE_BYTES, PROCESS_FILE_PREFIXES

    pid = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout.strip()
    made = sorted(path.name for path in tmp_path.iterdir())
    assert made == sorted(f"{prefix}_{pid}.db" for prefix in PROCESS_FILE_PREFIXES)
    for path in tmp_path.iterdir():
        stat = path.stat()
        assert stat.st_size == PROCESS_FILE_BYTES[path.name.rsplit("_", 1)[0]]
        assert stat.st_blocks * 512 >= stat.st_size, path.name


def test_tallies_lose_nothing_while_another_thread_flushes(monkeypatch) -> None:
    """Counting takes no lock: a flush racing with it must neither lose nor repeat a count,
    and past ``PENDING_MAX`` the counting thread folds by itself."""
    import threading

    from api.observability import tallies as module
    from api.observability.metrics import Metrics
    from api.observability.tallies import Tallies

    monkeypatch.setattr(module, "PENDING_MAX", 1_000)
    metrics = Metrics()
    tallies = Tallies(metrics)
    stop = threading.Event()

    def flush_often() -> None:
        while not stop.is_set():
            tallies.flush()

    flusher = threading.Thread(target=flush_often)
    flusher.start()
    try:
        for i in range(30_000):
            tallies.count_request("/v1/evaluate", 200, 0.5)
            tallies.count_outcomes(b"\x01" if i % 3 else b"\x02\x02")
    finally:
        stop.set()
        flusher.join()
    tallies.flush()
    assert not tallies._pending and not tallies._pending_outcomes
    requests = metrics.requests.labels("/v1/evaluate", "200")._value.get()
    seconds = metrics.request_seconds.labels("/v1/evaluate")._value.get()
    assert (requests, seconds) == (30_000, 15_000)
    outcomes = [metrics.evaluations.labels(outcome_label(code))._value.get() for code in (1, 2)]
    assert outcomes == [20_000, 20_000]


def test_the_metrics_files_keep_ten_times_the_room_a_busy_worker_uses(server, server_admin) -> None:
    """Every public route with good and bad requests, admin, dashboard, OFREP, unknown paths
    and scrapes: each process's files stay under a tenth full, so the small allocation
    (``PROCESS_FILE_BYTES``) never has to grow sparsely."""
    import struct

    import requests

    from api.observability.metrics import PROCESS_FILE_BYTES

    tenant = server_admin.tenant()
    server_admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    server.wait_config_everywhere()  # every worker serves the new keys and flags
    url, key = server.url, {"Authorization": f"ApiKey {tenant.api_key}"}
    with requests.Session() as http:
        for index in range(40):
            user = f"u{index}"
            http.post(
                f"{url}/v1/evaluate", json={"flagKey": "f", "userIdentifier": user}, headers=key
            )
            http.post(f"{url}/v1/evaluate/bulk", json={"flagKey": "f", "userIdentifiers": [user, "x"]},
                      headers=key)  # fmt: skip
            http.post(f"{url}/ofrep/v1/evaluate/flags/f", json={"context": {"targetingKey": user}},
                      headers=key)  # fmt: skip
            http.post(f"{url}/ofrep/v1/evaluate/flags", json={"context": {"targetingKey": user}},
                      headers=key)  # fmt: skip
            http.post(f"{url}/v1/feedback", json={"evaluationId": "nope", "outcome": "SUCCESS"},
                      headers=key)  # fmt: skip
            http.post(f"{url}/v1/evaluate", data=b"junk", headers=key)
            http.post(
                f"{url}/v1/evaluate", json={"flagKey": "f"}, headers={"Authorization": "ApiKey x"}
            )
            for path in (
                "/metrics",
                "/readyz",
                "/healthz",
                "/dashboard/",
                "/openapi.json",
                f"/nope{index}",
            ):
                http.get(f"{url}{path}")
            http.get(f"{url}/admin/v1/organizations", headers={"Authorization": "Bearer wrong"})
    files = sorted((server.data_dir / "run" / "prometheus").glob("*.db"))
    assert files
    for path in files:
        used = struct.unpack("<i", path.read_bytes()[:4])[0]  # prometheus_client's header
        assert used * 10 <= PROCESS_FILE_BYTES[path.name.rsplit("_", 1)[0]], (path.name, used)
