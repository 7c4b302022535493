"""The goals of the benchmark and the report (markdown and JSON) written from the measurements."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HISTORY = Path(__file__).with_name("history.md")
"""Hand-written: what was optimised and what it changed; appended to ``docs/benchmarks.md``."""


@dataclass(frozen=True)
class Goal:
    name: str
    target: str
    measured: float | None
    unit: str
    met: bool | None
    how: str


def _goal(name: str, value: float | None, op: str, bound: float, unit: str, how: str) -> Goal:
    met = None if value is None else (value >= bound if op == ">=" else value <= bound)
    return Goal(name, f"{op} {bound:g} {unit}".strip(), value, unit, met, how)


def evaluate_goals(results: dict[str, Any]) -> list[Goal]:
    goals: list[Goal] = []
    single = results.get("single_evaluate", {}).get("summary", {})
    for c in ("c16", "c64"):
        ratios = single.get(c, {}).get("ratios", {})
        if "vs_tight" in ratios:
            goals.append(_goal(
                f"single evaluate req/s vs the tight reference, {c[1:]} connections",
                ratios["vs_tight"]["median"], ">=", 0.85, "x",
                "median over rounds of flagsight req/s / tight reference req/s, back to back",
            ))  # fmt: skip
        if "attributes_vs_plain" in ratios:
            goals.append(_goal(
                f"single evaluate with 1 KB attributes, a segment of 5 conditions, vs plain, {c[1:]} connections",
                ratios["attributes_vs_plain"]["median"], ">=", 0.85, "x",
                "median over rounds of flagsight req/s with attributes / without, back to back "
                "(bench/workload.py: CONDITIONS, attributes; python -m bench.run --only "
                "single-attributes)",
            ))  # fmt: skip
        if "cluster_vs_embedded" in ratios:
            goals.append(_goal(
                f"single evaluate on a cluster host vs embedded, {c[1:]} connections",
                ratios["cluster_vs_embedded"]["median"], ">=", 0.95, "x",
                "median over rounds; the host on PostgreSQL and the S3 lake",
            ))  # fmt: skip
    if "c64" in single:
        servers = single["c64"]["servers"]
        goals.append(_goal(
            "single evaluate p99 at 64 connections vs the tight reference's",
            round(servers["flagsight"]["p99_ms_median"] / servers["tight reference"]["p99_ms_median"], 2),
            "<=", 1.5, "x", "medians over rounds of wrk's p99",
        ))  # fmt: skip
    cluster_meter = results.get("cluster_meter")
    if cluster_meter:
        goals.append(_goal(
            "database round trips per 1,000 evaluations far from the threshold",
            cluster_meter["round_trips_per_1000"], "<=", 1, "",
            "the cluster host's meter round trips / its evaluations, x 1,000",
        ))  # fmt: skip
    bulk = results.get("bulk_10k")
    if bulk:
        goals.append(_goal("bulk 10,000 users: user-evaluations/s per core in the server",
                           bulk["server_user_evaluations_per_s_per_core"], ">=", 1_000_000, "/s",
                           "users answered / the workers' CPU seconds (/proc, idle to idle), one"
                           " connection; the handler's wall time beside it:"
                           f" {_fmt(bulk.get('handler_user_evaluations_per_s'))}/s"))  # fmt: skip
        goals.append(_goal("bulk 10,000 users: answer time", bulk["p50_ms"], "<=", 25, "ms",
                           "wrk p50 at one connection, network and HTTP included"))  # fmt: skip
    targeted = results.get("bulk_10k_attributes")
    if targeted:
        plain = (
            f"; plain bulk 10,000 beside it: {_fmt(bulk['server_user_evaluations_per_s_per_core'])}/s"
            if bulk
            else ""
        )
        goals.append(_goal(
            "bulk 10,000 users with attributes: user-evaluations/s per core in the server",
            targeted["server_user_evaluations_per_s_per_core"], ">=", 500_000, "/s",
            "users answered / the workers' CPU seconds (/proc, idle to idle), one connection, each"
            " user with attributes (about 130 bytes: the five the segment's conditions read and two"
            " more); the handler's wall time beside it:"
            f" {_fmt(targeted.get('handler_user_evaluations_per_s'))}/s"
            f"{plain} (python -m bench.run --only bulk-attributes)",
        ))  # fmt: skip
    feedback = results.get("feedback_bulk_500")
    if feedback:
        goals.append(_goal("feedback ingest through bulk (2 workers)", feedback["events_per_s"],
                           ">=", 150_000, "events/s", "wrk req/s x 500, 8 connections"))  # fmt: skip
    track = results.get("track_bulk_500")
    if track:
        goals.append(_goal("tracked events ingest through /v1/track (2 workers)",
                           track["events_per_s"], ">=", 150_000, "events/s",
                           "wrk req/s x 500, 8 connections, each event with its time and two in"
                           " three with a value (python -m bench.run --only track-bulk)"))  # fmt: skip
    signal = results.get("time_to_signal")
    if signal:
        goals.append(_goal("time to signal, p95", signal["p95_s"], "<=", 60, "s",
                           f"feedback 204 to the health endpoint counting it; {signal['samples']} "
                           "feedbacks, flagsight serve + the Dagster daemon (sensor)"))  # fmt: skip
    metric_signal = results.get("time_to_metric_signal")
    if metric_signal:
        goals.append(_goal("time to signal for a metric, p95", metric_signal["p95_s"], "<=", 60,
                           "s", "a tracked event's 204 to the health endpoint's followed count "
                           "metric counting it (the arms' mean x users), each after its user's "
                           f"evaluation; {metric_signal['samples']} events, flagsight serve + the "
                           "Dagster daemon (python -m bench.run --only signal-metrics)"))  # fmt: skip
    metrics = results.get("pipeline_metrics")
    if metrics:
        goals.append(_goal(
            f"incremental run with {metrics['incremental_events']:,} new tracked events and "
            f"{metrics['metrics']} metrics", metrics["incremental"]["run_s"], "<=", 3, "s",
            f"flagsight pipeline run, median of rounds, after a full run over "
            f"{metrics['evaluations']:,} evaluations and {metrics['tracked']:,} tracked events; "
            f"50 split flag environments follow every metric ({metrics['metric_users']:,} "
            "metric_users rows) (python -m bench.run --only pipeline-metrics)",
        ))  # fmt: skip
    pipeline = results.get("pipeline")
    if pipeline:
        n = pipeline["evaluations"] + pipeline["feedback"]
        goals.append(_goal(f"pipeline over {n:,} events", pipeline["full"]["run_s"], "<=", 60,
                           "s", "flagsight pipeline run, the run (process start-up excluded)"))  # fmt: skip
        if "full_s3" in pipeline:
            goals.append(_goal(
                "pipeline with the lake in S3 vs local", round(pipeline["full_s3"]["run_s"] / pipeline["full"]["run_s"], 2),
                "<=", 2, "x", "the full run's time, lake in SeaweedFS / local folder",
            ))  # fmt: skip
        goals.append(_goal(f"incremental run over {pipeline['incremental_events']:,} new events",
                           pipeline["incremental"]["run_s"], "<=", 3, "s",
                           "as above, after the full run; median of rounds, each over its "
                           "own new events"))  # fmt: skip
        if "small_history_incremental" in pipeline:
            ratio = (
                pipeline["incremental"]["run_s"] / pipeline["small_history_incremental"]["run_s"]
            )
            goals.append(_goal("incremental run independent of history size", round(ratio, 2),
                               "<=", 1.5, "x",
                               f"incremental over {n:,} events of history / over "
                               f"{pipeline['small_history_events']:,}"))  # fmt: skip
    memory = results.get("memory_steady")
    if memory:
        goals.append(_goal("worker RSS at steady state", max(memory["flagsight_worker_rss_mb"]),
                           "<=", 120, "MB", "largest VmRSS of the workers after the load, idle"))  # fmt: skip
    local = results.get("local")
    if local and "local_vs_remote" in local:
        speed = local["local_vs_remote"]
        goals.append(_goal("local evaluate vs the same SDK's remote evaluate", speed["speedup"],
                           ">=", 100, "x", "mean remote call over loopback / mean local call,"
                           " one thread (python -m bench.local_scenarios)"))  # fmt: skip
        goals.append(_goal("local evaluate p99", speed["local_p99_us"], "<=", 50, "µs",
                           "perf_counter_ns around each call, reports and quota included"))  # fmt: skip
    with_attributes = (local or {}).get("attributes")
    if with_attributes:
        goals.append(_goal(
            "local evaluate with 1 KB attributes, a segment of 5 conditions, p99",
            with_attributes["p99_us"], "<=", 50, "µs",
            f"perf_counter_ns around each call, {with_attributes['calls']:,} calls in blocks of 1,000 alternating with "
            f"plain ones (plain p99 {with_attributes['plain_p99_us']} µs)"
            f"{', the server on the other cores' if with_attributes.get('server_on_other_cores') else ''} "
            "(python -m bench.run --only local-attributes)",
        ))  # fmt: skip
    if local and "local_vs_remote" in local:
        spread = local["propagation"]
        goals.append(_goal(f"a change reaches {spread['clients']} local clients, p99",
                           spread["p99_s"], "<=", 1, "s",
                           f"admin PUT to each client holding it, {spread['changes']} changes"))  # fmt: skip
        streams = local["streams"]
        goals.append(_goal(f"memory added by {streams['streams']:,} open streams",
                           streams["memory_added_mb"], "<=", 64, "MB",
                           "PSS of the master and the workers, before and after"))  # fmt: skip
        goals.append(_goal(f"single evaluate with {streams['streams']:,} open streams",
                           streams["ratio"], ">=", 0.9, "x",
                           "wrk req/s at 16 connections with / without them, median of "
                           "back-to-back pairs"))  # fmt: skip
        goals.append(_goal("ingest of reported local evaluations, per core",
                           local["ingest"]["per_second"], ">=", 500_000, "/s",
                           "decode, validate and append reports of 10,000, one thread, median "
                           "of rounds; the "
                           "sealer process then seals them into Parquet at "
                           f"{local['ingest'].get('sealed_per_second', 0):,}/s"))  # fmt: skip
    if bulk:
        goals.append(_goal("RSS added by 10k bulk requests", bulk["worker_rss_added_mb"], "<=", 50,
                           "MB", "largest (peak sampled every 5 ms - steady) over the workers"))  # fmt: skip
    return goals


RATIO_NAMES = {
    "vs_tight": "flagsight / tight reference",
    "vs_media": "flagsight / media reference",
    "cluster_vs_embedded": "cluster host / embedded",
    "attributes_vs_plain": "flagsight with 1 KB attributes / flagsight",
}


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


def _rounds(record: dict[str, Any]) -> str:
    return ", ".join(str(r) for r in record.get("rounds_run_s", [record["run_s"]]))


def render_markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Benchmarks",
        "",
        f"Made by `{report['command']}` on {report['started_at']} "
        f"({report['wall_s']:.0f} s wall; {report['machine']}).",
        "",
        "Figures are measured in the same invocation: flagsight (`flagsight serve`, its production "
        "gunicorn configuration; embedded, and as a cluster-mode host on PostgreSQL and an S3 lake "
        "in SeaweedFS) and two references under the same configuration, worker class and count: "
        "the tight reference (a minimal Falcon app that reads the raw body, decodes the two "
        "fields with msgspec and answers pre-encoded bytes: the framework's ceiling) and the "
        "media reference (Falcon's default media handler and `resp.media`, the earlier one), "
        "driven by wrk on loopback with keep-alive connections and Lua scripts that send a "
        "different user on every request. Server CPU per request is the CPU of the master, the "
        "workers and flagsight's sealer process from the start of a run until its events are "
        "sealed, divided by its requests. Bulk and feedback runs are flagsight alone; the "
        "reference figures above them calibrate the machine.",
        "",
        "## Goals",
        "",
        "| goal | target | measured | met | how |",
        "|---|---|---|---|---|",
    ]
    for g in report["goals"]:
        met = {True: "yes", False: "**no**", None: "n/a"}[g["met"]]
        lines.append(
            f"| {g['name']} | {g['target']} | {_fmt(g['measured'])} {g['unit']} | {met} | {g['how']} |"
        )
    r = report["results"]
    single = r.get("single_evaluate")
    if single:
        labels = list(next(iter(single["summary"].values()))["servers"])
        names = list(next(iter(single["summary"].values()))["ratios"])
        lines += ["", "## Single evaluate", "",
                  "Medians over rounds; in each round every server is measured back to back.", "",
                  "| connections | server | req/s | p99 ms | CPU µs/req |", "|---|---|---|---|---|"]  # fmt: skip
        for c, s in single["summary"].items():
            for label in labels:
                x = s["servers"][label]
                lines.append(f"| {c[1:]} | {label} | {_fmt(x['rps_median'])} | "
                             f"{x['p99_ms_median']:.2f} | {x['cpu_us_median']:.0f} |")  # fmt: skip
        lines += ["", "| connections | ratio | median (each round) |", "|---|---|---|"]
        for c, s in single["summary"].items():
            for name in names:
                x = s["ratios"][name]
                lines.append(f"| {c[1:]} | {RATIO_NAMES[name]} | {x['median']:.2f} "
                             f"({', '.join(f'{v:.2f}' for v in x['rounds'])}) |")  # fmt: skip
    rows = [(k, r[k]) for k in ("bulk_1k", "bulk_10k", "bulk_10k_attributes", "feedback_bulk_500",
                                "track_bulk_500", "mixed") if k in r]  # fmt: skip
    if rows:
        lines += ["", "## Other HTTP scenarios", "",
                  "| scenario | connections | req/s | p50 ms | p99 ms | CPU µs/req | in server |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for name, x in rows:
            extra = ""
            if "server_user_evaluations_per_s_per_core" in x:
                extra = (f"{_fmt(x['server_user_evaluations_per_s_per_core'])} user-evaluations/s per core, "
                         f"{x['worker_cpu_ms_per_request']} ms of worker CPU a request")  # fmt: skip
            elif "events_per_s" in x:
                extra = f"{_fmt(x['events_per_s'])} events/s"
            lines.append(f"| {name} | {x['connections']} | {_fmt(x['requests_per_s'])} | {x['p50_ms']:.2f} | "
                         f"{x['p99_ms']:.2f} | {_fmt(x['server_cpu_us_per_request'])} | {extra} |")  # fmt: skip
    memory = r.get("memory_steady")
    if memory:
        lines += ["", "## Memory", "",
                  f"- flagsight workers at steady state: RSS {memory['flagsight_worker_rss_mb']} MB, "
                  f"PSS {memory['flagsight_worker_pss_mb']} MB; tight reference workers: RSS "
                  f"{memory['reference_worker_rss_mb']} MB.",
                  f"- flagsight's event log sealer process (one per server, pyarrow lives there): "
                  f"RSS {memory.get('flagsight_sealer_rss_mb')} MB."]  # fmt: skip
        for name in ("bulk_1k", "bulk_10k", "bulk_10k_attributes"):
            if name in r:
                lines.append(f"- during {name}: peak RSS {r[name]['worker_rss_peak_mb']} MB, "
                             f"added {r[name]['worker_rss_added_mb']} MB.")  # fmt: skip
    signals = [(f"{x['samples']} feedbacks", x) for x in [r.get("time_to_signal")] if x]
    signals += [(f"{x['samples']} tracked events of a followed metric", x)
                for x in [r.get("time_to_metric_signal")] if x]  # fmt: skip
    if signals:
        lines += ["", "## Time to signal", "",
                  "| samples | p50 s | p95 s | max s |", "|---|---|---|---|"]  # fmt: skip
        lines += [f"| {what} | {x['p50_s']} | {x['p95_s']} | {x['max_s']} |" for what, x in signals]
    pipeline = r.get("pipeline")
    if pipeline:
        lines += ["", "## Pipeline", "",
                  "| run | events | run s | process s |", "|---|---|---|---|",
                  f"| full | {pipeline['evaluations']:,} + {pipeline['feedback']:,} | "
                  f"{pipeline['full']['run_s']} | {pipeline['full']['process_s']} |",
                  *([f"| full, lake in S3 | same | {pipeline['full_s3']['run_s']} | "
                     f"{pipeline['full_s3']['process_s']} |"] if "full_s3" in pipeline else []),
                  f"| incremental (median; rounds {_rounds(pipeline['incremental'])}) | "
                  f"{pipeline['incremental_events']:,} new | "
                  f"{pipeline['incremental']['run_s']} | {pipeline['incremental']['process_s']} |",
                  *([f"| the same job, every body empty: Dagster's own cost (median; rounds "
                     f"{_rounds(pipeline['dagster_floor'])}) | none | "
                     f"{pipeline['dagster_floor']['run_s']} | |"]
                    if "dagster_floor" in pipeline else [])]  # fmt: skip
        if "small_history_incremental" in pipeline:
            lines.append(f"| incremental, {pipeline['small_history_events']:,} events of history "
                         f"(median; rounds {_rounds(pipeline['small_history_incremental'])}) | "
                         f"{pipeline['incremental_events']:,} new | "
                         f"{pipeline['small_history_incremental']['run_s']} | "
                         f"{pipeline['small_history_incremental']['process_s']} |")  # fmt: skip
        lines.append(
            f"\nWriting the synthetic lake took {pipeline['lake_write_s']} s (not counted)."
        )
    metrics = r.get("pipeline_metrics")
    if metrics:
        steps = ", ".join(f"{k} {v}" for k, v in metrics["incremental"]["slowest_steps_s"].items())
        lines += ["", "## Pipeline with followed metrics", "",
                  f"{metrics['metrics']} metrics of every kind, each followed by the "
                  f"{metrics['follows'] // metrics['metrics']} split flag environments of a lake of "
                  f"{metrics['evaluations']:,} evaluations, {metrics['feedback']:,} feedback and "
                  f"{metrics['tracked']:,} tracked events ({metrics['metric_users']:,} "
                  "`metric_users` rows; `bench/metric_world.py`).", "",
                  "| run | events | run s | process s |", "|---|---|---|---|",
                  f"| full | all | {metrics['full']['run_s']} | {metrics['full']['process_s']} |",
                  f"| incremental (median; rounds {_rounds(metrics['incremental'])}) | "
                  f"{metrics['incremental_events']:,} new tracked | "
                  f"{metrics['incremental']['run_s']} | {metrics['incremental']['process_s']} |",
                  "", f"The incremental run's slowest steps (median s): {steps}."]  # fmt: skip
    if report.get("noise"):
        lines += ["", "## Noise", "", report["noise"]]
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out_dir: Path, extra_markdown: list[Path]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {**report, "goals": [asdict(g) for g in evaluate_goals(report["results"])]}
    (out_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    markdown = render_markdown(report)
    (out_dir / "report.md").write_text(markdown)
    history = HISTORY.read_text() if HISTORY.exists() else ""
    for path in extra_markdown:
        path.write_text(markdown + ("\n" + history if history else ""))
    return out_dir / "report.md"
