"""Running wrk with one of ``bench/lua``'s scripts for a bounded time, and reading its summary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

LUA_DIR = Path(__file__).with_name("lua")
WRK_CPU = os.environ.get("BENCH_WRK_CPU", "0")
"""The core wrk runs on (``taskset``); empty: wherever the scheduler puts its threads.

On this project's 2-core machine, with wrk's two threads left to the scheduler, the same
server's throughput at 16 connections moved between two levels from run to run (the tight
reference: 17.7k-20.6k req/s with p99 about 4 ms, or 23.4k-25.3k with p99 1.3-2.5 ms),
depending on where the scheduler had put wrk's threads and the workers; a round's ratio then
said more about that placement than about the servers. With wrk on one core the tight
reference's five runs stayed within 20.9k-21.9k req/s (``bench/history.md``, "Two levels of
one machine"). Every contender of a run is measured the same way.
"""


@dataclass(frozen=True)
class WrkResult:
    """What wrk measured on the client side; latencies in milliseconds."""

    requests: int
    duration_s: float
    errors: dict[str, int]
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.duration_s

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    def as_dict(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "duration_s": round(self.duration_s, 3),
            "requests_per_s": round(self.requests_per_s, 1),
            "errors": self.errors,
            "p50_ms": self.p50_ms,
            "p90_ms": self.p90_ms,
            "p99_ms": self.p99_ms,
            "p999_ms": self.p999_ms,
            "max_ms": self.max_ms,
        }


def pinned_cpu() -> str | None:
    """``WRK_CPU`` where it can be honoured (more than one core, ``taskset`` installed)."""
    if WRK_CPU and (os.cpu_count() or 1) > 1 and shutil.which("taskset"):
        return WRK_CPU
    return None


def run_wrk(
    url: str,
    script: str,
    args: list[str],
    *,
    connections: int,
    duration_s: float,
    threads: int = 2,
    timeout_s: float = 10.0,
) -> WrkResult:
    """``wrk -t threads -c connections -d duration`` with keep-alive connections."""
    threads = min(threads, connections)
    command = [
        "wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(duration_s))}s", f"--timeout={timeout_s:g}s",
        "-s", str(LUA_DIR / script), url, "--", *args,
    ]  # fmt: skip
    cpu = pinned_cpu()
    if cpu:
        command = ["taskset", "-c", cpu, *command]
    env = {**os.environ, "BENCH_LUA_DIR": str(LUA_DIR)}
    out = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=duration_s + 60, check=False
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("WRK_JSON ")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(
            f"wrk failed ({out.returncode}): {out.stdout[-2000:]}{out.stderr[-2000:]}"
        )
    data = json.loads(line.removeprefix("WRK_JSON "))
    lat = data["latency_us"]
    return WrkResult(
        requests=data["requests"],
        duration_s=data["duration_us"] / 1e6,
        errors=data["errors"],
        p50_ms=lat["p50"] / 1000,
        p90_ms=lat["p90"] / 1000,
        p99_ms=lat["p99"] / 1000,
        p999_ms=lat["p999"] / 1000,
        max_ms=lat["max"] / 1000,
    )
