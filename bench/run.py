"""``make bench``: measure flagsight against the reference app and write the report.

    python -m bench.run            # the full benchmark (about 20 minutes on 2 cores)
    python -m bench.run --smoke    # every scenario for about a second: the suite cannot rot
    python -m bench.run --only single-attributes   # one scenario and what it is compared with

``--only`` (repeatable) runs issue 41's scenarios alone, each beside its plain counterpart,
in a few minutes: ``single-attributes`` (single evaluate with 1 KB attributes against a segment
of five conditions, in rounds with plain single evaluate and the tight reference, at 16
connections), ``bulk-attributes`` (bulk of 10,000 users with attributes, after plain bulk of
10,000) and ``local-attributes`` (the SDK's local evaluate with attributes, and without); and
issue 42's ``track-bulk`` (``POST /v1/track`` bodies of 500 events, alone), ``pipeline-metrics``
(incremental runs over 100,000 new tracked events, 10 followed metrics) and ``signal-metrics``
(time to signal for a followed metric).

The report goes to ``bench/results/report.{md,json}`` (``bench/results/only/`` with ``--only``);
a full run also rewrites ``docs/benchmarks.md`` with the same markdown.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

from bench.http_scenarios import (
    ATTRIBUTES,
    CLUSTER,
    EMBEDDED,
    MEDIA,
    TIGHT,
    Contender,
    HttpBench,
    Plan,
    meter_round_trips,
    scrape_totals,
)
from bench.local_scenarios import local_bench
from bench.pipeline_scenarios import metrics_bench, pipeline_bench
from bench.report import write_report
from bench.servers import REPO, FlagsightServer, ReferenceServer, Server, cluster_engines
from bench.signal_scenario import time_to_metric_signal, time_to_signal
from bench.workload import prepare
from bench.wrk import pinned_cpu

FULL = Plan(duration_s=10, rounds=5, warmup_s=3)
SMOKE = Plan(duration_s=1, rounds=1, warmup_s=1)
SINGLE_ATTRIBUTES, BULK_ATTRIBUTES, LOCAL_ATTRIBUTES, TRACK_BULK = (
    "single-attributes",
    "bulk-attributes",
    "local-attributes",
    "track-bulk",
)
PIPELINE_METRICS, SIGNAL_METRICS = "pipeline-metrics", "signal-metrics"
ONLY = (
    SINGLE_ATTRIBUTES, BULK_ATTRIBUTES, LOCAL_ATTRIBUTES, TRACK_BULK, PIPELINE_METRICS,
    SIGNAL_METRICS,
)  # fmt: skip
"""The scenarios ``--only`` runs alone (issues 41 and 42); a full run has them all."""
HTTP_ONLY = {SINGLE_ATTRIBUTES, BULK_ATTRIBUTES, TRACK_BULK}
"""Those of them that need the HTTP servers."""


def log(message: str) -> None:
    print(message, flush=True)


def _machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine())  # fmt: skip
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def run_http(args: argparse.Namespace, plan: Plan, work_dir: Path,
              cluster_env: dict[str, str] | None) -> dict[str, object]:  # fmt: skip
    """Every HTTP scenario; with ``args.only``, those named and what they are compared with
    (single evaluate with attributes: plain single evaluate and the tight reference)."""
    only = set(args.only or ())
    flagsight = FlagsightServer(work_dir / "data", args.workers, work_dir / "flagsight.log")
    single = not only or SINGLE_ATTRIBUTES in only
    references = [ReferenceServer(args.workers, work_dir / "tight-reference.log")] if single else []
    if not only:
        references.append(
            ReferenceServer(args.workers, work_dir / "media-reference.log", app="app", name=MEDIA)
        )
    servers: list[Server] = [flagsight, *references]
    cluster = None
    if cluster_env is not None:
        cluster = FlagsightServer(work_dir / "cluster-host", args.workers,
                                  work_dir / "cluster-host.log", cluster_env, name=CLUSTER)  # fmt: skip
        servers.append(cluster)
    if args.smoke:  # the smoke checks the machinery, not figures: seal quickly
        for server in (flagsight, cluster):
            if server is not None:
                server._env["FLAGSIGHT_SEAL_INTERVAL"] = "1"
    results: dict[str, object] = {}
    try:
        log(f"starting {', '.join(s.name for s in servers)} ({args.workers} workers each)")
        for server in servers:
            server.start(args.workers)
        work = prepare(flagsight.url, flagsight.admin_token, work_dir,
                       ids=200 if args.smoke else 4000, bodies=4 if args.smoke else 16,
                       targeted=True)  # fmt: skip
        contenders = (
            [Contender(TIGHT, references[0], [work.api_key, work.flag_key])] if single else []
        )
        if not only:
            contenders.append(Contender(MEDIA, references[1], [work.api_key, work.flag_key]))
        contenders.append(Contender(EMBEDDED, flagsight, [work.api_key, work.flag_key]))
        if single:
            contenders.append(
                Contender(
                    ATTRIBUTES,
                    flagsight,
                    [work.api_key, str(work.targeted_flag_key), str(work.attributes_1k)],
                    "evaluate_attributes.lua",
                )  # fmt: skip
            )
        if cluster is not None:
            (work_dir / "cluster-work").mkdir(exist_ok=True)
            cluster_work = prepare(cluster.url, cluster.admin_token, work_dir / "cluster-work",
                                   ids=200, bodies=1)  # fmt: skip
            contenders.append(
                Contender(CLUSTER, cluster, [cluster_work.api_key, cluster_work.flag_key])
            )
        bench = HttpBench(flagsight, references, work, plan, log, [cluster] if cluster else None)
        if single:
            bench.warm_up(contenders)
            log("single evaluate: " + ", ".join(c.label for c in contenders))
            before = scrape_totals(cluster) if cluster is not None else {}
            results["single_evaluate"] = bench.single_evaluate(
                contenders, (16,) if args.smoke or only else (16, 64)
            )
            if cluster is not None:
                results["cluster_meter"] = meter_round_trips(before, scrape_totals(cluster))
                log(f"  cluster host's meter: {results['cluster_meter']}")
        if not only:
            results["memory_steady"] = bench.memory_steady()
            log(f"  steady state: {results['memory_steady']}")
        if not only or BULK_ATTRIBUTES in only:
            log("bulk evaluate")
            if not only:
                results["bulk_1k"] = bench.bulk(1000, work.bulk_1k)
            results["bulk_10k"] = bench.bulk(10_000, work.bulk_10k)
            assert work.bulk_10k_attributes is not None
            results["bulk_10k_attributes"] = bench.bulk(10_000, work.bulk_10k_attributes,
                                                        " with attributes")  # fmt: skip
        if not only:
            log("feedback")
            results["feedback_bulk_500"] = bench.feedback_bulk()
        if not only or TRACK_BULK in only:
            log("tracked events")
            results["track_bulk_500"] = bench.track_bulk()
        if not args.smoke and not only:
            log("mixed")
            results["mixed"] = bench.mixed()
    finally:
        for server in servers:
            server.stop()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="every scenario, briefly")
    parser.add_argument("--out", type=Path, help="where the report goes (bench/results)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP scenarios")
    parser.add_argument("--no-pipeline", action="store_true", help="skip the pipeline scenarios")
    parser.add_argument("--no-signal", action="store_true", help="skip the time-to-signal run")
    parser.add_argument("--no-local", action="store_true", help="skip local evaluation's scenarios")
    parser.add_argument(
        "--no-cluster", action="store_true", help="skip the cluster-mode host (PostgreSQL, S3)"
    )
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument("--work-dir", type=Path, help="keep servers' data and logs here")
    parser.add_argument(
        "--only", action="append", choices=ONLY, metavar="SCENARIO",
        help=f"run this scenario alone, beside its plain counterpart (repeatable): {', '.join(ONLY)}",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, help="single evaluate's rounds (default: 5)")
    args = parser.parse_args(argv)
    plan = SMOKE if args.smoke else FULL
    if args.rounds is not None:
        if args.rounds < 1:
            parser.error("--rounds must be at least 1")
        plan = Plan(plan.duration_s, args.rounds, plan.warmup_s)
    only = set(args.only or ())
    metric_pipeline = PIPELINE_METRICS in only if only else not args.no_pipeline
    metric_signal = SIGNAL_METRICS in only if only else not args.no_signal
    if only:  # issues 41's and 42's scenarios alone: nothing else, and no rewritten docs
        args.no_pipeline = args.no_signal = args.no_cluster = args.no_docs = True
        args.no_http = not only & HTTP_ONLY
        args.no_local = LOCAL_ATTRIBUTES not in only
        if args.out is None:
            args.out = REPO / "bench" / "results" / "only"
    if args.out is None:
        args.out = REPO / "bench" / "results"
    started = time.monotonic()
    started_at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_before = os.getloadavg()
    results: dict[str, object] = {}
    with (
        tempfile.TemporaryDirectory(prefix="flagsight-bench-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        work_dir = args.work_dir or Path(tmp)
        work_dir.mkdir(parents=True, exist_ok=True)
        cluster_env = None if args.no_cluster else stack.enter_context(cluster_engines(work_dir))
        if not args.no_http:
            results.update(run_http(args, plan, work_dir, cluster_env))
        if not args.no_local:
            log("local evaluation")
            results["local"] = local_bench(work_dir / "local", args.smoke,
                                           attributes_only=bool(only))  # fmt: skip
        pace = {"samples": 3 if args.smoke else 40, "interval_s": 1.0 if args.smoke else 4.0}
        if not args.no_signal:
            log("time to signal (flagsight serve + the Dagster daemon)")
            results["time_to_signal"] = time_to_signal(work_dir, **pace, log=log)
        if metric_signal:
            log("time to signal for a metric (flagsight serve + the Dagster daemon)")
            results["time_to_metric_signal"] = time_to_metric_signal(work_dir, **pace, log=log)
        if metric_pipeline:
            log("pipeline with followed metrics")
            results["pipeline_metrics"] = metrics_bench(
                work_dir,
                evaluations=20_000 if args.smoke else 1_000_000,
                tracked=10_000 if args.smoke else 1_000_000,
                files=2 if args.smoke else 8,
                incremental=1_000 if args.smoke else 100_000,
                log=log,
                rounds=1 if args.smoke else 3,
            )
        if not args.no_pipeline:
            log("pipeline")
            results["pipeline"] = pipeline_bench(
                work_dir,
                evaluations=20_000 if args.smoke else 10_000_000,
                feedback=10_000 if args.smoke else 5_000_000,
                files=2 if args.smoke else 20,
                incremental=1_000 if args.smoke else 100_000,
                small_history=None if args.smoke else 150_000,
                log=log,
                s3_env=cluster_env,
                floor_rounds=1 if args.smoke else 3,
            )
    load_after = os.getloadavg()
    command = "make bench" if not args.smoke and argv is None and len(sys.argv) == 1 else (
        "python -m bench.run " + shlex.join(argv if argv is not None else sys.argv[1:])).strip()  # fmt: skip
    report = {
        "command": command,
        "started_at": started_at,
        "wall_s": time.monotonic() - started,
        "machine": _machine(),
        "smoke": args.smoke,
        "noise": (
            f"Load average (1 min) {load_before[0]:.2f} at the start, {load_after[0]:.2f} at the "
            "end; the machine's 2 cores also run wrk, so absolute figures move with other load. "
            f"wrk runs on {_wrk_placement()} (`BENCH_WRK_CPU`, `bench/wrk.py`: left to the "
            "scheduler, the placement of wrk's threads and the workers moved a server's req/s "
            "between two levels from run to run). Ratios compare runs made back to back; the "
            "single-evaluate table lists each round."
        ),
        "results": results,
    }
    docs = [] if args.smoke or args.no_docs else [REPO / "docs" / "benchmarks.md"]
    path = write_report(report, args.out, docs)
    log(f"report: {path} ({report['wall_s']:.0f} s)")
    return 0


def _wrk_placement() -> str:
    cpu = pinned_cpu()
    return f"core {cpu} only" if cpu else "the cores the scheduler chooses"


if __name__ == "__main__":
    sys.exit(main())
