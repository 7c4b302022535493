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
and the servers' CPU per request (the steadier figure).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench.http_scenarios import quiesce
from bench.procstat import cpu_seconds
from bench.servers import REPO, FlagsightServer, ReferenceServer, Server
from bench.workload import FLAG_KEY, create_tenant
from bench.wrk import run_wrk

WORKING_TREE = "."
WORKERS = 2


@dataclass
class Contender:
    """One server in the comparison and what its runs measured."""

    label: str
    server: Server
    wrk_args: list[str]
    requests_per_s: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)


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


def measure_round(contenders: list[Contender], connections: int, duration_s: float) -> None:
    """Every contender once, in a shuffled order, each from idle to idle."""
    servers = [c.server for c in contenders]
    for contender in random.sample(contenders, len(contenders)):
        quiesce(servers)
        pids = contender.server.pids()
        before = cpu_seconds(pids)
        result = run_wrk(
            contender.server.url, "evaluate.lua", contender.wrk_args,
            connections=connections, duration_s=duration_s,
        )  # fmt: skip
        quiesce(servers)
        if result.failed:
            raise RuntimeError(f"{contender.label}: wrk saw errors {result.errors}")
        contender.requests_per_s.append(result.requests_per_s)
        contender.cpu_us.append((cpu_seconds(pids) - before) / result.requests * 1e6)


def ratios(contender: Contender, reference: Contender) -> list[float]:
    """This contender's req/s over the reference's, round by round."""
    return [a / b for a, b in zip(contender.requests_per_s, reference.requests_per_s, strict=True)]


def round_line(number: int, contenders: list[Contender]) -> str:
    reference = contenders[0]
    cells = [
        f"{c.label} {c.requests_per_s[-1]:,.0f} ({ratios(c, reference)[-1]:.3f}, {c.cpu_us[-1]:.1f} µs)"
        for c in contenders
    ]
    return f"round {number}: " + "  ".join(cells)


def summary(contenders: list[Contender]) -> list[str]:
    """One line per contender: medians over the rounds, and each round's ratio."""
    reference = contenders[0]
    lines = ["| server | req/s (median) | vs tight reference (median; rounds) | CPU µs/req (median) |",
             "|---|---|---|---|"]  # fmt: skip
    for contender in contenders:
        each = ratios(contender, reference)
        rounds = ", ".join(f"{r:.3f}" for r in each)
        lines.append(
            f"| {contender.label} | {statistics.median(contender.requests_per_s):,.0f} | "
            f"{statistics.median(each):.3f} ({rounds}) | {statistics.median(contender.cpu_us):.1f} |"
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
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.duration <= 0:
        parser.error("--rounds must be at least 1 and --duration positive")
    return args


def main(argv: list[str] | None = None, echo=print) -> list[str]:  # noqa: ANN001 - print-like
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="flagsight-compare-"))
    checkouts: list[Path] = []
    contenders: list[Contender] = []
    try:
        reference = ReferenceServer(WORKERS, work / "reference.log")
        contenders.append(Contender("tight reference", reference, ["k", FLAG_KEY]))
        for index, revision in enumerate(args.revisions):
            source = checkout(revision, work / f"tree{index}")
            checkouts.append(source)
            server = FlagsightServer(
                work / f"data{index}", WORKERS, work / f"flagsight{index}.log",
                name=revision, source=source,
            )  # fmt: skip
            contenders.append(Contender(label(revision), server, []))
        for contender in contenders:
            contender.server.start(WORKERS)
            if isinstance(contender.server, FlagsightServer):
                key, _ = create_tenant(contender.server.url, contender.server.admin_token)
                contender.wrk_args = [key, FLAG_KEY]
        for contender in contenders:
            run_wrk(contender.server.url, "evaluate.lua", contender.wrk_args,
                    connections=16, duration_s=args.warmup)  # fmt: skip
        for number in range(1, args.rounds + 1):
            measure_round(contenders, args.connections, args.duration)
            echo(round_line(number, contenders))
        lines = summary(contenders)
        for line in lines:
            echo(line)
        return lines
    finally:
        for contender in contenders:
            contender.server.stop()
        remove_checkouts(checkouts)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
