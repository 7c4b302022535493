"""The flagsight command as an operator uses it: init, serve, pipeline run, admin-token rotate."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import requests

from api.controlplane.cache import ConfigCache
from api.controlplane.sqlite_store import SqliteControlPlaneStore
from tests.support.admin import Admin, requests_caller
from tests.support.server import REPO, GunicornServer

DEMO_KEY = re.compile(r"^Demo API key: (fsk_\S+)", re.MULTILINE)


def flagsight(
    data: Path, *args: str, admin_token: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLAGSIGHT_ADMIN_TOKEN"}
    env["FLAGSIGHT_DATA_DIR"] = str(data)
    env["DAGSTER_HOME"] = str(data / "dagster")
    if admin_token:
        env["FLAGSIGHT_ADMIN_TOKEN"] = admin_token
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_init_prints_the_admin_token_once_and_is_idempotent(tmp_path: Path) -> None:
    first = flagsight(tmp_path, "init")
    assert first.returncode == 0, first.stderr
    token = re.search(
        r"Admin token \(shown once, only its hash is kept\): (\S+)", first.stdout
    ).group(1)
    demo_key = re.search(DEMO_KEY, first.stdout).group(1)
    second = flagsight(tmp_path, "init")
    assert "already set" in second.stdout and token not in second.stdout
    stored = (tmp_path / "controlplane.sqlite3").read_bytes()
    assert token.encode() not in stored and demo_key.encode() not in stored
    assert (tmp_path / "dagster" / "dagster.yaml").is_file()  # init prepares Dagster's home

    rotated = flagsight(tmp_path, "init", "--rotate-demo-key")
    new_key = re.search(DEMO_KEY, rotated.stdout).group(1)
    assert new_key != demo_key


def test_a_restart_keeps_the_demo_key_printed_before(tmp_path: Path) -> None:
    """``make run`` runs ``flagsight init`` on every start: a client of the key it printed the
    time before must keep working (it used to be revoked on every run)."""
    first = re.search(DEMO_KEY, flagsight(tmp_path, "init").stdout).group(1)
    again = flagsight(tmp_path, "init")
    assert re.search(DEMO_KEY, again.stdout).group(1) == first
    kept = tmp_path / "demo-api-key"
    assert kept.read_text().strip() == first
    assert kept.stat().st_mode & 0o777 == 0o600
    store = SqliteControlPlaneStore(tmp_path / "controlplane.sqlite3")
    assert ConfigCache(store).authenticate(first) is not None  # still a live key
    rotated = re.search(DEMO_KEY, flagsight(tmp_path, "init", "--rotate-demo-key").stdout)
    assert rotated.group(1) != first and kept.read_text().strip() == rotated.group(1)
    assert ConfigCache(store).authenticate(first) is None
    kept.unlink()  # a data directory from before the key was kept: the key stays, unprinted
    older = flagsight(tmp_path, "init")
    assert re.search(DEMO_KEY, older.stdout) is None and "--rotate-demo-key" in older.stdout
    assert ConfigCache(store).authenticate(rotated.group(1)) is not None


def test_demo_flags_answer_and_pipeline_run_feeds_the_metrics_endpoint(tmp_path: Path) -> None:
    data = tmp_path / "data"
    init = flagsight(data, "init")
    token = re.search(
        r"Admin token \(shown once, only its hash is kept\): (\S+)", init.stdout
    ).group(1)
    demo_key = re.search(DEMO_KEY, init.stdout).group(1)
    environment_id = re.search(r"\((env_[0-9a-f]{16})\)", init.stdout).group(1)

    server = GunicornServer(data, admin_token=token).start()
    session = requests.Session()
    session.headers["Authorization"] = f"ApiKey {demo_key}"
    ids = []
    for i in range(40):
        answer = session.post(
            f"{server.url}/v1/evaluate",
            json={"flagKey": "dark-mode", "userIdentifier": f"u{i}"},
            timeout=5,
        ).json()
        assert (answer["value"], answer["matchedRuleType"]) == (True, "STATIC")
        ids.append(answer["evaluationId"])
    feedback = [
        {"evaluationId": e, "result": n % 4 != 0, "latencyMs": 10.0} for n, e in enumerate(ids[:20])
    ]
    assert (
        session.post(
            f"{server.url}/v1/feedback/bulk", json={"feedbacks": feedback}, timeout=5
        ).status_code
        == 204
    )
    session.close()
    server.stop()  # SIGTERM seals every event

    run = flagsight(data, "pipeline", "run")
    assert run.returncode == 0, run.stdout + run.stderr
    assert " DEBUG " not in run.stderr and len(run.stderr.splitlines()) < 5, run.stderr
    assert run.stdout.splitlines()[-1].startswith("insights pipeline: run ")  # the summary last
    assert "succeeded" in run.stdout

    server = GunicornServer(data, admin_token=token).start()
    try:
        admin = Admin(requests_caller(server.url), token)
        metrics = admin.request(
            "GET", f"/environments/{environment_id}/flags/dark-mode/metrics", expect=200
        )
    finally:
        server.stop()
    assert {k: metrics[k] for k in ("environmentKey", "evaluations", "feedbackCount", "feedbackCoverage", "successCount", "failureCount", "successRate", "avgLatencyMs")} == {
        "environmentKey": "production", "evaluations": 40, "feedbackCount": 20, "feedbackCoverage": 50.0,
        "successCount": 15, "failureCount": 5, "successRate": 75.0, "avgLatencyMs": 10.0,
    }  # fmt: skip


def test_admin_token_rotate_replaces_the_token(tmp_path: Path) -> None:
    first = flagsight(tmp_path, "init", "--no-demo")
    old = re.search(r": (\S+)$", first.stdout.strip().splitlines()[0]).group(1)
    rotated = flagsight(tmp_path, "admin-token", "rotate")
    new = re.search(r": (\S+)$", rotated.stdout.strip()).group(1)
    assert new != old
    from api.controlplane.sqlite_store import SqliteControlPlaneStore
    from api.web.admin.auth import token_hash

    assert SqliteControlPlaneStore(
        tmp_path / "controlplane.sqlite3"
    ).admin_token_hash() == token_hash(new)


def test_the_readme_says_how_to_run_its_cli_commands_and_each_one_runs(tmp_path: Path) -> None:
    """Every ``flagsight ...`` line of the README's CLI block runs (``--help``) with the
    installed command the README names."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## The CLI", 1)[1].split("\n## ", 1)[0]
    assert "source .venv/bin/activate" in section and ".venv/bin/flagsight" in section
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].split() for line in block.splitlines() if line.strip()]
    assert len(commands) >= 5
    installed = REPO / ".venv" / "bin" / "flagsight"
    for words in commands:
        assert words[0] == "flagsight"
        subcommand = [w for w in words[1:] if re.fullmatch(r"[a-z][a-z-]*", w)]
        result = subprocess.run(
            [str(installed), *subcommand, "--help"], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, (words, result.stderr)


def test_demo_traffic_reads_the_kept_demo_key_so_no_key_is_on_its_command_line(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    init = flagsight(data, "init")
    token = re.search(
        r"Admin token \(shown once, only its hash is kept\): (\S+)", init.stdout
    ).group(1)
    organization_id = re.search(r"Demo organization (org_[0-9a-f]{16})", init.stdout).group(1)
    server = GunicornServer(data, admin_token=token).start()
    try:
        demo = flagsight(data, "demo", "--url", server.url, "--rate", "20", "--duration", "1.5")
        assert demo.returncode == 0, demo.stdout + demo.stderr
        admin = Admin(requests_caller(server.url), token)
        usage = admin.request("GET", f"/organizations/{organization_id}/usage", expect=200)
        assert usage["evaluations"] > 0
    finally:
        server.stop()
    (data / "demo-api-key").unlink()
    missing = flagsight(data, "demo", "--url", "http://127.0.0.1:9", "--duration", "1")
    assert missing.returncode == 2
    assert "No demo API key: run `flagsight init`" in missing.stderr
