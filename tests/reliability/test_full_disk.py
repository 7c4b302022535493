"""The whole data directory on a real, small tmpfs that fills up under a live server (issue 12):
evaluate answers 200 throughout, for organizations whose meter slots are on pages never touched
before; a worker killed meanwhile is replaced by one that boots on the full disk; no worker dies
otherwise; and once space returns the event log takes writes again without a restart."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, Tenant, requests_caller
from tests.support.server import GunicornServer

TENANTS = 40


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """``data/`` on a 32 MiB tmpfs, unmounted whatever the test did."""
    data = tmp_path / "data"
    data.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(data)], check=True)
    try:
        yield data
    finally:
        subprocess.run(["umount", "-l", str(data)], check=True)


def fill(disk: Path) -> Path:
    """Write zeros until the filesystem refuses: not a byte left."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, bytes(1 << 16))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    try:
        while True:
            os.write(fd, b"\0")
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def evaluate(server: GunicornServer, tenant: Tenant, user: str) -> requests.Response:
    return requests.post(
        f"{server.url}/v1/evaluate",
        json={"flagKey": "f", "userIdentifier": user},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
        timeout=10,
    )


def worker_deaths(server: GunicornServer) -> int:
    """Workers the master saw die: gunicorn logs each one killed by a signal (SIGBUS, our
    SIGKILL) and each that exited on its own (a failed boot)."""
    log = server.log_path.read_text()
    return log.count("was sent SIG") + log.count("exited with code")


def figure(metrics: str, name: str) -> float:
    """The evaluation sample of counter ``name`` on ``/metrics`` (0 when absent)."""
    for line in metrics.splitlines():
        if line.startswith(f'{name}{{type="evaluation"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def settled_count(server: GunicornServer) -> float:
    """Evaluations logged plus lost on ``/metrics``, once the workers' tallies (flushed every
    second) have stopped moving."""
    last = None
    for _ in range(50):
        text = requests.get(f"{server.url}/metrics", timeout=10).text
        now = figure(text, "flagsight_events_logged_total") + figure(
            text, "flagsight_events_lost_total"
        )
        if now == last:
            return now
        last = now
        time.sleep(1.1)
    raise AssertionError("the counts never settled")


def test_evaluate_answers_on_a_full_disk_no_worker_dies_and_it_heals(small_disk: Path) -> None:
    server = GunicornServer(small_disk, admin_token=ADMIN_TOKEN)
    try:
        server.start()
        admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
        tenants = [admin.tenant() for _ in range(TENANTS)]  # meter slots spread over pages
        for tenant in tenants:
            admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
        server.wait_config_everywhere()  # every worker serves the new keys and flags
        assert evaluate(server, tenants[0], "before").status_code == 200

        filler = fill(small_disk)
        deaths = worker_deaths(server)
        answers = [evaluate(server, t, f"full-{i}") for i, t in enumerate(tenants)]
        assert [a.status_code for a in answers] == [200] * TENANTS
        assert all(a.json()["value"] is True for a in answers)

        killed = server.worker_pids()[0]
        os.kill(killed, signal.SIGKILL)  # its replacement must boot on the full disk
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            pids = server.worker_pids()
            if len(pids) == 2 and killed not in pids:
                break
            time.sleep(0.2)
        replacement_pids = sorted(server.worker_pids())
        counted = settled_count(server)  # the killed worker's last second may be uncounted
        for round_ in range(3):  # every worker answers, again and again
            for i, tenant in enumerate(tenants):
                answer = evaluate(server, tenant, f"after-kill-{round_}-{i}")
                assert answer.status_code == 200, answer.text
            time.sleep(0.5)
        assert sorted(server.worker_pids()) == replacement_pids  # none died since
        assert len(replacement_pids) == 2 and killed not in replacement_pids
        assert worker_deaths(server) == deaths + 1  # the one we killed, and no other
        prometheus = small_disk / "run" / "prometheus"
        for pid in replacement_pids:  # the replacement took a spare set of metrics files
            assert (prometheus / f"counter_{pid}.db").is_file(), sorted(prometheus.iterdir())
        # every evaluation answered since is on /metrics, logged or counted lost, the
        # replacement's (on the spare files) included
        assert settled_count(server) - counted == 3 * TENANTS
        metrics = requests.get(f"{server.url}/metrics", timeout=10)
        assert figure(metrics.text, "flagsight_events_lost_total") > 0
        ready = requests.get(f"{server.url}/readyz", timeout=10)
        message = ready.json()["checks"]["eventLog"]
        assert ready.status_code == 503 and message.startswith("error: "), message
        issued = evaluate(server, tenants[0], "readyz").json()["evaluationId"]
        feedback = requests.post(
            f"{server.url}/v1/feedback/report",
            json={"evaluationId": issued, "result": True},
            headers={"Authorization": f"ApiKey {tenants[0].api_key}"},
            timeout=10,
        )
        if message.endswith("feedback is refused with 503"):  # /readyz tells what happens
            assert feedback.status_code == 503, message
        else:
            assert "free" in message and "may soon refuse writes" in message, message

        filler.unlink()  # room again: the log heals without a restart
        deadline = time.monotonic() + 10
        healed = None
        while time.monotonic() < deadline:
            issued = evaluate(server, tenants[0], "healed").json()["evaluationId"]
            healed = requests.post(
                f"{server.url}/v1/feedback/report",
                json={"evaluationId": issued, "result": True},
                headers={"Authorization": f"ApiKey {tenants[0].api_key}"},
                timeout=10,
            )
            if healed.status_code == 204:
                break
            time.sleep(0.5)
        assert healed is not None and healed.status_code == 204
        assert requests.get(f"{server.url}/readyz", timeout=10).status_code == 200
    finally:
        server.kill()
