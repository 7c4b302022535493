"""``make cluster``: flagsight as one service on three hosts, all on loopback.

Starts a private PostgreSQL (initdb under ``var/cluster/postgres``), SeaweedFS (the event
lake's bucket), three API hosts (each its own data directory, as separate machines would have),
Dagster's webserver and daemon on PostgreSQL with the pipeline host's data directory, and demo
traffic spread over the three hosts. Prints the URLs; Ctrl-C stops all of it. The topology and
every variable are in docs/deployment.md.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from api.web.admin.auth import ADMIN_TOKEN_PREFIX, new_admin_token  # noqa: E402
from devtools.engines.postgres import PostgresCluster  # noqa: E402
from devtools.engines.seaweedfs import SeaweedFS  # noqa: E402

BIN = Path(sys.executable).parent
HOSTS = int(os.environ.get("FLAGSIGHT_CLUSTER_HOSTS", "3"))
FIRST_PORT = int(os.environ.get("FLAGSIGHT_CLUSTER_PORT", "8001"))
DAGSTER_PORT = int(os.environ.get("DAGSTER_PORT", "3001"))


def admin_token(root: Path) -> str:
    """The cluster's admin token: the environment's, or one made once and kept (mode 0600),
    of the form every admin token has (``fsa_`` and 43 URL-safe characters). One kept by an
    older version without the prefix is replaced."""
    if os.environ.get("FLAGSIGHT_ADMIN_TOKEN"):
        return os.environ["FLAGSIGHT_ADMIN_TOKEN"]
    path = root / "admin-token"
    if path.exists() and path.read_text().startswith(ADMIN_TOKEN_PREFIX):
        return path.read_text().strip()
    partial = path.with_name(".admin-token.tmp")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(new_admin_token())
    os.replace(partial, path)
    return path.read_text().strip()


def wait_ready(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{url} did not become ready; see its log")


def main() -> int:
    root = Path(os.environ.get("FLAGSIGHT_CLUSTER_DIR", REPO / "var" / "cluster")).resolve()
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)  # the postgres user owns the cluster's folder inside it
    postgres = PostgresCluster(root / "postgres")
    lake = SeaweedFS(root / "seaweedfs")
    children: list[subprocess.Popen[bytes]] = []

    def stop_all(*_: object) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for child in reversed(children):
            if child.poll() is None and "dagster" in child.args[0]:
                # as Ctrl-C in its own terminal: a run in progress is marked interrupted
                os.killpg(child.pid, signal.SIGINT)
            elif child.poll() is None:
                # gunicorn's master alone: its graceful stop, the sealer (in its group) last
                os.kill(child.pid, signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
        lake.stop()
        postgres.stop()
        print("flagsight cluster stopped.")
        raise SystemExit(0)

    signal.signal(signal.SIGINT, stop_all)
    signal.signal(signal.SIGTERM, stop_all)
    print("Starting PostgreSQL and SeaweedFS ...", flush=True)
    postgres.start()
    lake.start()
    token = admin_token(root)
    shared = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLAGSIGHT_")},
        "FLAGSIGHT_DATABASE_URL": postgres.url,
        "FLAGSIGHT_EVENTS_URI": lake.events_uri,
        "FLAGSIGHT_ADMIN_TOKEN": token,
        **lake.environment(),
    }

    def start(name: str, command: list[str], data_dir: Path, **extra: str) -> None:
        env = shared | {"FLAGSIGHT_DATA_DIR": str(data_dir), **extra}
        log = (logs / f"{name}.log").open("ab")
        children.append(
            subprocess.Popen(
                command,
                env=env,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        )

    first = root / "host-1"
    init = subprocess.run(
        [str(BIN / "flagsight"), "init"], env=shared | {"FLAGSIGHT_DATA_DIR": str(first)},
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = re.search(r"Demo API key: (fsk_\S+)", init.stdout)
    demo_key = found.group(1) if found else (first / "demo-api-key").read_text().strip()
    urls = []
    for host in range(1, HOSTS + 1):
        port = FIRST_PORT + host - 1
        urls.append(f"http://127.0.0.1:{port}")
        start(
            f"host-{host}", [str(BIN / "flagsight"), "serve", "--port", str(port)],
            root / f"host-{host}",
        )  # fmt: skip
    pipeline = root / "pipeline"
    subprocess.run(
        [str(BIN / "flagsight"), "init", "--no-demo"], env=shared | {"FLAGSIGHT_DATA_DIR": str(pipeline)},
        cwd=REPO, capture_output=True, check=True,
    )  # fmt: skip
    for name, command in (
        ("dagster-webserver", ["-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(DAGSTER_PORT)]),
        ("dagster-daemon", ["run", "-w", "workspace.yaml"]),
    ):
        start(name, [str(BIN / name), *command], pipeline, DAGSTER_HOME=str(pipeline / "dagster"))
    for url in urls:
        wait_ready(url)
    demo = [str(BIN / "flagsight"), "demo"]
    for url in urls:
        demo += ["--url", url]
    # The key in the environment, which only its owner can read: a command line is in `ps`.
    start("demo", demo, root / "demo", FLAGSIGHT_DEMO_API_KEY=demo_key)
    hosts = "\n".join(f"  Host {i}       {url}/v1/evaluate" for i, url in enumerate(urls, 1))
    print(f"""
flagsight cluster is running (Ctrl-C stops everything; logs in {logs}):
{hosts}
  Dashboard    {urls[0]}/dashboard  (any host; sign in with the admin token)
  Dagster      http://127.0.0.1:{DAGSTER_PORT}  (runs, event logs and schedules in PostgreSQL)
  PostgreSQL   {postgres.url}
  S3 (lake)    {lake.endpoint}  bucket {lake.bucket}  ({lake.events_uri})
  Admin token  {token}
  Demo API key {demo_key}
""", flush=True)  # fmt: skip
    while True:
        for child in children:
            if child.poll() is not None:
                print(f"{child.args[0]} exited ({child.returncode}); stopping", file=sys.stderr)
                stop_all()
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
