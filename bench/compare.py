"""Single evaluate of several revisions side by side, against the tight reference, in one run.

``make bench`` measures the checkout against the references; on this project's 2-core machine
the same server moves by ±5-8 µs of CPU per request between runs, so whether a change to the
request path helps is only visible when the before and the after run in one invocation,
interleaved. This is that comparison::

    python -m bench.compare HEAD~1 HEAD .   # or: make bench-compare REVS="HEAD~1 HEAD ."
                                            # (make bench-compare alone: HEAD against .)

Each revision (``.`` is the working tree as it is, uncommitted changes included) runs as its
own ``flagsight serve`` from a temporary ``git worktree`` with its native module built, beside
the tight reference. Every round measures all of them back to back in a shuffled order, each
run from an idle machine to an idle machine (its sealing included, as ``make bench`` does).
Printed per round and at the end: req/s, the ratio to the tight reference of the same round,
and the servers' CPU per request (the steadier figure); at the end also wrk's p99.

``--cluster`` runs each revision as a host of the cluster mode instead (``make bench``'s
"flagsight cluster"): the hosts share one private PostgreSQL (meter, control plane) and one
SeaweedFS bucket, as hosts of one cluster do, so the revisions must have the same schemas.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench.http_scenarios import Contender, measure_run
from bench.servers import REPO, FlagsightServer, ReferenceServer, Server, cluster_engines
from bench.workload import FLAG_KEY, create_tenant
from bench.wrk import run_wrk

WORKING_TREE = "."
REFERENCE = "tight reference"
CLUSTER_SUFFIX = " (cluster host)"
WORKERS = 2


@dataclass
class Measured:
    """What one contender's runs measured, round by round."""

    requests_per_s: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)


def checkout(revision: str, into: Path) -> Path:
    """A detached worktree of ``revision`` with its native module built (``.``: this tree)."""
    if revision == WORKING_TREE:
        return REPO
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(into), revision],
        check=True,
    )
    if (into / "api" / "native" / "build.py").exists():  # revisions older than it have none
        subprocess.run([sys.executable, "-m", "api.native.build"], cwd=into, check=True)
    return into


def own_packages(source: Path) -> dict[str, str]:
    """``PYTHONPATH`` for a server of ``source``: its own evaluation core and SDK first, not
    the ones this environment installed from the working tree (a revision's ``api`` may ask its
    core for what the working tree's no longer has)."""
    paths = [source / "sdk" / "core", source / "sdk" / "python"]
    return {"PYTHONPATH": os.pathsep.join(str(path) for path in paths if path.is_dir())}


def label(revision: str) -> str:
    """A revision as the tables name it: a full commit id shortened as git shortens it."""
    if len(revision) == 40 and all(c in "0123456789abcdef" for c in revision):
        return revision[:12]
    return revision


def remove_checkouts(paths: list[Path]) -> None:
    for path in paths:
        if path != REPO:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], check=False
            )


def measure_round(
    contenders: list[Contender], measured: dict[str, Measured], connections: int, duration_s: float
) -> None:
    """Every contender once, in a shuffled order, each from idle to idle."""
    servers = [c.server for c in contenders]
    for contender in random.sample(contenders, len(contenders)):
        result, cpu = measure_run(
            servers, contender.server, "evaluate.lua", contender.args, connections, duration_s
        )
        if result.failed:
            raise RuntimeError(f"{contender.label}: wrk saw errors {result.errors}")
        measured[contender.label].requests_per_s.append(result.requests_per_s)
        measured[contender.label].cpu_us.append(cpu / result.requests * 1e6)
        measured[contender.label].p99_ms.append(result.p99_ms)


def ratios(of: Measured, reference: Measured) -> list[float]:
    """Req/s over the reference's, round by round."""
    return [a / b for a, b in zip(of.requests_per_s, reference.requests_per_s, strict=True)]


def round_line(number: int, measured: dict[str, Measured]) -> str:
    reference = measured[REFERENCE]
    cells = [
        f"{label} {m.requests_per_s[-1]:,.0f} ({ratios(m, reference)[-1]:.3f}, {m.cpu_us[-1]:.1f} µs)"
        for label, m in measured.items()
    ]
    return f"round {number}: " + "  ".join(cells)


def summary(measured: dict[str, Measured]) -> list[str]:
    """One line per contender: medians over the rounds, and each round's ratio."""
    reference = measured[REFERENCE]
    lines = ["| server | req/s (median) | vs tight reference (median; rounds) | CPU µs/req (median) "
             "| p99 ms (median) |",
             "|---|---|---|---|---|"]  # fmt: skip
    for label, m in measured.items():
        each = ratios(m, reference)
        rounds = ", ".join(f"{r:.3f}" for r in each)
        lines.append(
            f"| {label} | {statistics.median(m.requests_per_s):,.0f} | "
            f"{statistics.median(each):.3f} ({rounds}) | {statistics.median(m.cpu_us):.1f} | "
            f"{statistics.median(m.p99_ms):.2f} |"
        )
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare", description=__doc__.split("\n")[0]
    )
    parser.add_argument("revisions", nargs="+", help="git revisions; '.' is the working tree")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of wrk per run")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of wrk per server first")
    parser.add_argument(
        "--cluster", action="store_true", help="each revision as a cluster host (PostgreSQL, S3)"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.duration <= 0:
        parser.error("--rounds must be at least 1 and --duration positive")
    return args


def main(argv: list[str] | None = None, echo=print) -> list[str]:  # noqa: ANN001 - print-like
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="flagsight-compare-"))
    checkouts: list[Path] = []
    servers: list[tuple[str, Server]] = []
    engines = contextlib.ExitStack()
    try:
        cluster_env = engines.enter_context(cluster_engines(work)) if args.cluster else None
        servers.append((REFERENCE, ReferenceServer(WORKERS, work / "reference.log")))
        for index, revision in enumerate(args.revisions):
            source = checkout(revision, work / f"tree{index}")
            checkouts.append(source)
            server = FlagsightServer(
                work / f"data{index}", WORKERS, work / f"flagsight{index}.log",
                {**(cluster_env or {}), **own_packages(source)}, name=revision, source=source,
            )  # fmt: skip
            servers.append((label(revision) + (CLUSTER_SUFFIX if args.cluster else ""), server))
        contenders = [Contender(name, server, start(server)) for name, server in servers]
        for contender in contenders:
            run_wrk(contender.server.url, "evaluate.lua", contender.args,
                    connections=16, duration_s=args.warmup)  # fmt: skip
        measured = {contender.label: Measured() for contender in contenders}
        for number in range(1, args.rounds + 1):
            measure_round(contenders, measured, args.connections, args.duration)
            echo(round_line(number, measured))
        lines = summary(measured)
        for line in lines:
            echo(line)
        return lines
    finally:
        for _, server in servers:
            server.stop()
        engines.close()
        remove_checkouts(checkouts)
        shutil.rmtree(work, ignore_errors=True)


def start(server: Server) -> list[str]:
    """Start ``server``; the arguments of ``evaluate.lua`` for it (a flagsight server gets a
    tenant and its key; the reference checks no key)."""
    server.start(WORKERS)
    if not isinstance(server, FlagsightServer):
        return ["k", FLAG_KEY]
    key, _ = create_tenant(server.url, server.admin_token)
    return [key, FLAG_KEY]


if __name__ == "__main__":
    main()
