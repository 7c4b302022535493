"""The ``flagsight`` command: init, serve, pipeline run, demo traffic, admin token rotation,
and the everyday admin commands (``flags``, ``keys``, ``rollout``, ``status``, ``code-refs``,
in ``api.cli.admin_commands``), which talk to a running service over its admin API."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from api.cli.admin_commands import add_admin_commands
from api.settings import Settings

GUNICORN_CONF = Path(__file__).parent.parent / "server" / "gunicorn_conf.py"


def _open_store(settings: Settings):  # noqa: ANN202 - ControlPlaneStore
    """The control plane (SQLite, or PostgreSQL with FLAGSIGHT_DATABASE_URL), its schema
    created or migrated: ``init`` and ``serve`` (before any worker starts) both do this."""
    from api.backends import open_store
    from api.server.wiring import prepare_data_dir

    prepare_data_dir(settings)
    return open_store(settings)


def cmd_init(settings: Settings, args: argparse.Namespace) -> int:
    from api.cli.demo_seed import seed_demo
    from api.infra.dagster_home import prepare_dagster_home
    from api.web.admin.auth import ensure_admin_token

    store = _open_store(settings)
    prepare_dagster_home(settings.dagster_home, settings.database_url)  # the pipeline's
    token = ensure_admin_token(store, settings)
    if token:
        print(f"Admin token (shown once, only its hash is kept): {token}")
    elif settings.admin_token:
        print("Admin token: taken from FLAGSIGHT_ADMIN_TOKEN")
    else:
        print("Admin token: already set (make a new one with `flagsight admin-token rotate`)")
    if args.no_demo:
        return 0
    key_file = settings.demo_key_path
    kept = key_file.read_text().strip() if key_file.is_file() else None
    seed = seed_demo(store, rotate_key=args.rotate_demo_key, kept_key=kept or None)
    print(
        f"Demo organization {seed.organization_id}, environment 'production' ({seed.environment_id})"
    )
    if seed.new_key and seed.api_key:
        _keep_secret(key_file, seed.api_key)
    if seed.api_key:
        print(f"Demo API key: {seed.api_key}  (kept in {key_file})")
    else:
        print(
            "Demo API key: made before its plaintext was kept; `flagsight init --rotate-demo-key`"
            " revokes it and makes a new one"
        )
    return 0


def _keep_secret(path: Path, secret: str) -> None:
    """Write ``secret`` to ``path`` readable by its owner only, replacing it whole."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secret + "\n")
    os.replace(temporary, path)


def cmd_admin_token(settings: Settings, args: argparse.Namespace) -> int:
    from api.web.admin.auth import rotate_admin_token

    if settings.admin_token:
        print(
            "FLAGSIGHT_ADMIN_TOKEN is set; it is the admin token. Change it there.", file=sys.stderr
        )
        return 1
    token = rotate_admin_token(_open_store(settings))
    print(f"New admin token (shown once; the old one no longer works): {token}")
    return 0


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    """Prepare the data directory in the master, then hand over to gunicorn."""
    from api.backends import prepare_meter

    _open_store(settings)  # creates and migrates the control plane before any worker starts
    prepare_meter(settings)
    metrics_dir = settings.metrics_dir
    shutil.rmtree(metrics_dir, ignore_errors=True)
    metrics_dir.mkdir(parents=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    os.environ["FLAGSIGHT_DATA_DIR"] = str(settings.data_dir)
    argv = [
        sys.executable, "-m", "gunicorn",
        "--config", str(GUNICORN_CONF),
        "--bind", f"{args.host}:{args.port}",
        "--workers", str(args.workers),
        "api.asgi:app",
    ]  # fmt: skip
    os.execv(sys.executable, argv)
    return 0  # not reached


def cmd_pipeline_run(settings: Settings, args: argparse.Namespace) -> int:
    from api.server.wiring import prepare_data_dir
    from pipelines.cli import run_pipeline_once

    prepare_data_dir(settings)
    run_pipeline_once(settings)
    return 0


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from api.cli.demo_traffic import run_demo_traffic

    key = args.api_key or os.environ.get("FLAGSIGHT_DEMO_API_KEY")
    if not key and settings.demo_key_path.exists():
        # The key `flagsight init` keeps: read here, so it never shows in the process list.
        key = settings.demo_key_path.read_text(encoding="utf-8").strip()
    if not key:
        print(
            f"No demo API key: run `flagsight init` (it keeps one in {settings.demo_key_path}),"
            " or give --api-key or FLAGSIGHT_DEMO_API_KEY",
            file=sys.stderr,
        )
        return 2
    run_demo_traffic(
        args.url or ["http://127.0.0.1:8000"], key, rate=args.rate, duration_s=args.duration
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flagsight",
        description="flagsight: init, serve, pipeline run, demo traffic, admin token rotation;"
        " flags, keys, rollout, metrics, status and code-refs over a running service's admin API."
        " Each command's --help says more; docs: README.md.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    init = sub.add_parser("init", help="create the data directory, admin token and demo data")
    init.add_argument("--no-demo", action="store_true", help="do not seed the demo organization")
    init.add_argument(
        "--rotate-demo-key",
        action="store_true",
        help="revoke the demo key and print (and keep) a new one",
    )
    init.set_defaults(func=cmd_init)

    serve = sub.add_parser("serve", help="run the API and dashboard under gunicorn")
    serve.add_argument("--host", default=os.environ.get("FLAGSIGHT_HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(os.environ.get("FLAGSIGHT_PORT", "8000")))
    serve.add_argument("--workers", type=int, default=int(os.environ.get("FLAGSIGHT_WORKERS", "2")))
    serve.set_defaults(func=cmd_serve)

    pipeline = sub.add_parser("pipeline", help="the insights pipeline")
    pipeline_sub = pipeline.add_subparsers(dest="pipeline_command", required=True)
    run = pipeline_sub.add_parser("run", help="materialize every insights asset once, now")
    run.set_defaults(func=cmd_pipeline_run)

    demo = sub.add_parser("demo", help="send demo evaluations and outcomes until stopped")
    demo.add_argument(
        "--url",
        action="append",
        help="a host's base URL; repeat it to spread the traffic (default http://127.0.0.1:8000)",
    )
    demo.add_argument("--api-key")
    demo.add_argument("--rate", type=float, default=50.0, help="evaluations per second")
    demo.add_argument(
        "--duration", type=float, default=None, help="seconds (default: until stopped)"
    )
    demo.set_defaults(func=cmd_demo)

    token = sub.add_parser("admin-token", help="manage the admin token")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    rotate = token_sub.add_parser(
        "rotate", help="make a new admin token; the old one stops working"
    )
    rotate.set_defaults(func=cmd_admin_token)

    add_admin_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(Settings.from_env(), args)
