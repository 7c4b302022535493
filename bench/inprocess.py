"""Single evaluate in-process, with no HTTP: ``asyncio`` drives each ASGI app directly.

    .venv/bin/python -m bench.inprocess [--requests 20000] [--rounds 5] [--profile FILE]

Prints the per-request CPU (``time.process_time``, best of the rounds) of flagsight's
``POST /v1/evaluate`` (the benchmark's tenant and flag: a segment, then a 50% rollout; a new
user on every request) and of the references in ``bench/reference_app.py``, measured
alternately in the same process so that a busy machine slows them alike.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

import falcon.testing

from api.server.lifecycle import start_services, stop_services
from api.server.wiring import build_services
from api.settings import Settings
from api.web.app import create_asgi_app
from bench import reference_app
from bench.workload import FLAG_KEY, LIMIT, RULES, SEGMENT_KEY

ADMIN_TOKEN = "inprocess-admin-token-0123456789"


def _tenant(client: falcon.testing.TestClient) -> str:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    def admin(method: str, path: str, body: object) -> Any:
        answer = client.simulate_request(method, f"/admin/v1{path}", json=body, headers=headers)
        assert answer.status_code in (200, 201), (path, answer.status_code, answer.text)
        return answer.json

    org = admin("POST", "/organizations",
                {"name": "Bench", "plan": "enterprise", "monthlyEvaluationLimit": LIMIT})  # fmt: skip
    env = admin("POST", f"/organizations/{org['id']}/environments",
                {"key": "production", "insightsEnabled": True})  # fmt: skip
    key = admin("POST", f"/environments/{env['id']}/api-keys", {"name": "bench"})
    admin("PUT", f"/organizations/{org['id']}/segments/{SEGMENT_KEY}",
          {"userIdentifiers": [f"beta-{i}" for i in range(1000)]})  # fmt: skip
    admin("PUT", f"/environments/{env['id']}/flags/{FLAG_KEY}", {"enabled": True, "rules": RULES})
    return key["key"]


def _scope(api_key: str, length: int) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/evaluate",
        "raw_path": b"/v1/evaluate",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"localhost:8000"),
            (b"content-type", b"application/json"),
            (b"authorization", b"ApiKey " + api_key.encode()),
            (b"content-length", str(length).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def _drive(app: Any, api_key: str, bodies: list[bytes], tag: str) -> list[tuple]:
    """Send every body; return the first answer's start and body events (for checking)."""
    seen: list[tuple] = []

    async def send(event: dict[str, Any]) -> None:
        if len(seen) < 2:
            seen.append(event)

    for body in bodies:
        event = {"type": "http.request", "body": body, "more_body": False}

        async def receive(event=event) -> dict[str, Any]:
            return event

        await app(_scope(api_key, len(body)), receive, send)
    return seen


def _bodies(tag: str, count: int) -> list[bytes]:
    return [
        b'{"flagKey":"%s","userIdentifier":"user-%s-%d"}' % (FLAG_KEY.encode(), tag.encode(), i)
        for i in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", help="cProfile flagsight's rounds into this file")
    parser.add_argument("--only", choices=["flagsight", "tight", "media"], action="append")
    parser.add_argument(
        "--clock",
        choices=["process", "thread"],
        default="process",
        help="process: CPU of every thread (default); thread: the event loop's thread only",
    )
    args = parser.parse_args()
    cpu = time.process_time if args.clock == "process" else time.thread_time

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", admin_token=ADMIN_TOKEN)
        services = build_services(settings)
        threads = start_services(services)
        app = create_asgi_app(services)
        api_key = _tenant(falcon.testing.TestClient(app))
        services.config.refresh()
        apps = {"flagsight": app, "tight": reference_app.tight_app, "media": reference_app.app}
        names = args.only or list(apps)
        best = {name: float("inf") for name in names}
        loop = asyncio.new_event_loop()
        gc.collect()
        gc.freeze()
        profile = cProfile.Profile() if args.profile else None
        try:
            for name in names:  # warm up, and show one answer
                seen = loop.run_until_complete(_drive(apps[name], api_key, _bodies("w", 200), name))
                headers = {k.decode(): v.decode() for k, v in seen[0]["headers"]}
                print(f"{name}: {seen[0]['status']} {seen[1]['body'][:60]!r} {sorted(headers)}")
            for round_ in range(args.rounds):
                for name in names:
                    bodies = _bodies(f"{round_}{name[0]}", args.requests)
                    if profile is not None and name == "flagsight":
                        profile.enable()
                    started = cpu()
                    loop.run_until_complete(_drive(apps[name], api_key, bodies, name))
                    spent = cpu() - started
                    if profile is not None and name == "flagsight":
                        profile.disable()
                    best[name] = min(best[name], spent / args.requests)
        finally:
            loop.close()
            gc.unfreeze()
            stop_services(services, threads)
        if profile is not None:
            profile.dump_stats(args.profile)
        for name in names:
            print(f"{name:10} {best[name] * 1e6:6.2f} us/request (best of {args.rounds})")


if __name__ == "__main__":
    main()
