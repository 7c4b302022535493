"""The HTTP scenarios: single evaluate against the reference apps, bulk, feedback, tracked events,
mixed, memory.

Every run is bounded (wrk ``-d``), starts from a quiet server (the event log sealed, CPU idle)
and is charged the server CPU it caused, including the sealing that finishes after wrk stops.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests
from prometheus_client.parser import text_string_to_metric_families

from bench.procstat import RssSampler, cpu_seconds, pss_bytes, rss_bytes, wait_idle
from bench.servers import FlagsightServer, ReferenceServer, Server
from bench.workload import TRACK_EVENTS, Workload
from bench.wrk import WrkResult, run_wrk

MB = 1024 * 1024
TIGHT, MEDIA, EMBEDDED, CLUSTER, ATTRIBUTES = (
    "tight reference",
    "media reference",
    "flagsight",
    "flagsight cluster",
    "flagsight, 1 KB attributes",
)
"""``ATTRIBUTES``: the embedded server again, each request with an attributes object, against a
flag whose segment has five conditions (``bench.workload.TARGETED_RULES``)."""
RATIOS = {
    "vs_tight": (EMBEDDED, TIGHT),
    "vs_media": (EMBEDDED, MEDIA),
    "cluster_vs_embedded": (CLUSTER, EMBEDDED),
    "attributes_vs_plain": (ATTRIBUTES, EMBEDDED),
}
"""Each ratio divides the first contender's req/s by the second's, in the same round."""


@dataclass(frozen=True)
class Contender:
    """A server in the single-evaluate rounds, with the arguments of its script for it (its
    own API key: a cluster host has a control plane of its own)."""

    label: str
    server: Server
    args: list[str]
    script: str = "evaluate.lua"


@dataclass(frozen=True)
class Plan:
    """How long and how often to measure: the full benchmark or the smoke."""

    duration_s: float
    rounds: int
    warmup_s: float


def wal_sealed(wal_dir: Path) -> bool:
    """Every closed segment is sealed and each active one is empty (nothing left to seal)."""
    try:
        return all(p.stat().st_size == 0 for p in wal_dir.glob("*.wal"))
    except FileNotFoundError:
        return False  # a segment vanished while we looked: sealing is in progress


def quiesce(servers: list[Server], timeout_s: float = 60.0) -> None:
    """Wait for every flagsight server's event log to be sealed, then for all to be idle."""
    deadline = time.monotonic() + timeout_s
    for server in servers:
        if isinstance(server, FlagsightServer):
            while not wal_sealed(server.data_dir / "wal") and time.monotonic() < deadline:
                time.sleep(0.1)
    wait_idle([p for s in servers for p in s.pids()], timeout_s=10)


def measure_run(servers: list[Server], server: Server, script: str, args: list[str],
                connections: int, duration_s: float) -> tuple[WrkResult, float]:  # fmt: skip
    """One wrk run of ``server`` from an idle machine to an idle machine, and the CPU seconds
    its processes used meanwhile: sealing the run's events is part of its cost."""
    quiesce(servers)
    pids = server.pids()
    cpu_before = cpu_seconds(pids)
    result = run_wrk(server.url, script, args, connections=connections, duration_s=duration_s)
    quiesce(servers)
    return result, cpu_seconds(pids) - cpu_before


def _scrape(server: Server) -> dict[str, float]:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def scrape_totals(server: Server) -> dict[str, float]:
    """Every counter sample of ``/metrics`` summed over its labels, by sample name."""
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def meter_round_trips(before: dict[str, float], after: dict[str, float]) -> dict[str, object]:
    """The cluster host's meter round trips per 1,000 evaluations between two scrapes."""
    trips = after.get("flagsight_meter_round_trips_total", 0) - before.get(
        "flagsight_meter_round_trips_total", 0
    )
    evaluations = after.get("flagsight_evaluations_total", 0) - before.get(
        "flagsight_evaluations_total", 0
    )
    return {
        "round_trips": int(trips),
        "evaluations": int(evaluations),
        "round_trips_per_1000": round(1000 * trips / evaluations, 3) if evaluations else None,
    }


class HttpBench:
    """Both servers up; each ``run_*`` method returns a JSON-ready record of one scenario."""

    def __init__(self, flagsight: FlagsightServer, references: list[ReferenceServer],
                 work: Workload, plan: Plan, log: Callable[[str], None],
                 others: list[Server] | None = None):  # fmt: skip
        self.flagsight = flagsight
        self.references = references
        self.servers: list[Server] = [flagsight, *references, *(others or [])]
        self.work = work
        self.plan = plan
        self.log = log

    def _quiesce(self) -> None:
        quiesce(self.servers)

    def _measure(self, server: Server, script: str, args: list[str], connections: int,
                 label: str, duration_s: float | None = None) -> dict[str, object]:  # fmt: skip
        result, cpu = measure_run(self.servers, server, script, args, connections,
                                  duration_s or self.plan.duration_s)  # fmt: skip
        record = {**result.as_dict(), "connections": connections,
                  "server_cpu_s": round(cpu, 3),
                  "server_cpu_us_per_request": round(cpu / max(result.requests, 1) * 1e6, 1)}  # fmt: skip
        self.log(
            f"  {label:<28} c={connections:<3} {result.requests_per_s:>9.0f} req/s  "
            f"p50 {result.p50_ms:6.2f} ms  p99 {result.p99_ms:6.2f} ms  "
            f"cpu {record['server_cpu_us_per_request']:7.1f} us/req  errors {result.failed}"
        )
        if result.failed:
            raise RuntimeError(f"{label}: wrk saw errors {result.errors}")
        return record

    def _evaluate_args(self) -> list[str]:
        return [self.work.api_key, self.work.flag_key]

    def warm_up(self, contenders: list[Contender]) -> None:
        for contender in contenders:
            run_wrk(contender.server.url, contender.script, contender.args, connections=16,
                    duration_s=self.plan.warmup_s)  # fmt: skip

    def single_evaluate(
        self, contenders: list[Contender], connection_counts: tuple[int, ...]
    ) -> dict[str, object]:
        """Rounds in which every contender is measured back to back, at each connection count;
        the ratios of ``RATIOS`` per round and their medians."""
        rounds: list[dict[str, object]] = []
        for index in range(self.plan.rounds):
            self.log(f" round {index + 1}/{self.plan.rounds}")
            record: dict[str, object] = {}
            for connections in connection_counts:
                measured = {
                    c.label: self._measure(
                        c.server, c.script, c.args, connections, f"{c.label} evaluate"
                    )  # fmt: skip
                    for c in contenders
                }
                record[f"c{connections}"] = {
                    **measured,
                    "ratios": {
                        name: round(measured[top]["requests_per_s"] / measured[bottom]["requests_per_s"], 3)
                        for name, (top, bottom) in RATIOS.items()
                        if top in measured and bottom in measured
                    },
                }  # fmt: skip
            rounds.append(record)
        summary: dict[str, object] = {}
        for c in (f"c{n}" for n in connection_counts):
            per_round = [r[c] for r in rounds]
            summary[c] = {
                "ratios": {
                    name: {"median": statistics.median(r["ratios"][name] for r in per_round),
                           "rounds": [r["ratios"][name] for r in per_round]}
                    for name in per_round[0]["ratios"]
                },
                "servers": {
                    label: {
                        "rps_median": statistics.median(r[label]["requests_per_s"] for r in per_round),
                        "p99_ms_median": statistics.median(r[label]["p99_ms"] for r in per_round),
                        "cpu_us_median": statistics.median(r[label]["server_cpu_us_per_request"] for r in per_round),
                    }
                    for label in (x.label for x in contenders)
                },
            }  # fmt: skip
        return {"rounds": rounds, "summary": summary}

    def memory_steady(self) -> dict[str, object]:
        self._quiesce()
        workers = self.flagsight.worker_pids()
        ref_workers = self.references[0].worker_pids()
        return {
            "flagsight_worker_rss_mb": [round(rss_bytes(p) / MB, 1) for p in workers],
            "flagsight_worker_pss_mb": [round(pss_bytes(p) / MB, 1) for p in workers],
            "reference_worker_rss_mb": [round(rss_bytes(p) / MB, 1) for p in ref_workers],
            "flagsight_sealer_rss_mb": [
                round(rss_bytes(p) / MB, 1) for p in self.flagsight.helper_pids()
            ],
        }

    def bulk(self, users: int, bodies: Path, label: str = "") -> dict[str, object]:
        """One connection: the answer's latency, and the rate per core in the server: users
        answered per CPU second of the workers (``/proc``: user and system time of every
        worker, from an idle server to an idle server, so HTTP, the body's reading and the
        event log's appends count; the sealer process does not). Beside it, the bulk handler's
        own wall time from ``/metrics``, which also counts waiting for the body's upload and
        any time the worker was not on a core. ``label``: what the bodies carry besides the
        users, for the log."""
        self._quiesce()
        workers = self.flagsight.worker_pids()
        steady = {p: rss_bytes(p) for p in workers}
        before = _scrape(self.flagsight)
        cpu_before = cpu_seconds(workers)
        with RssSampler(workers) as sampler:
            record = self._measure(self.flagsight, "bodies.lua",
                                   [self.work.api_key, "/v1/evaluate/bulk", str(bodies)], 1,
                                   f"flagsight bulk {users}{label}")  # fmt: skip
        worker_cpu = cpu_seconds(workers) - cpu_before
        if self.flagsight.worker_pids() != workers:  # a restarted one's CPU would be lost
            raise RuntimeError(f"a worker was replaced during the bulk run {label!r}")
        after = _scrape(self.flagsight)
        seconds = (
            after["flagsight_bulk_evaluate_seconds_sum"]
            - before["flagsight_bulk_evaluate_seconds_sum"]
        )
        answered = (
            after["flagsight_bulk_evaluate_users_total"]
            - before["flagsight_bulk_evaluate_users_total"]
        )
        requests = max(int(record["requests"]), 1)  # type: ignore[call-overload]
        record["server_user_evaluations"] = int(answered)
        record["worker_cpu_s"] = round(worker_cpu, 3)
        record["server_user_evaluations_per_s_per_core"] = (
            round(answered / worker_cpu) if worker_cpu else None
        )
        record["worker_cpu_ms_per_request"] = round(worker_cpu / requests * 1000, 2)
        record["handler_seconds"] = round(seconds, 3)
        record["handler_user_evaluations_per_s"] = round(answered / seconds) if seconds else None
        record["handler_ms_per_request"] = round(seconds / requests * 1000, 2)
        record["worker_rss_steady_mb"] = {str(p): round(steady[p] / MB, 1) for p in workers}
        record["worker_rss_peak_mb"] = {str(p): round(sampler.peak[p] / MB, 1) for p in workers}
        record["worker_rss_added_mb"] = round(
            max(sampler.peak[p] - steady[p] for p in workers) / MB, 1
        )
        self.log(f"    in server: {record['server_user_evaluations_per_s_per_core']} user-evaluations"
                 f" per worker CPU second ({record['worker_cpu_ms_per_request']} ms a request);"
                 f" handler {record['handler_user_evaluations_per_s']}/s"
                 f" ({record['handler_ms_per_request']} ms); RSS +{record['worker_rss_added_mb']} MB")  # fmt: skip
        return record

    def feedback_bulk(self) -> dict[str, object]:
        record = self._measure(self.flagsight, "bodies.lua",
                               [self.work.api_key, "/v1/feedback/bulk", str(self.work.feedback_500)],
                               8, "flagsight feedback bulk 500")  # fmt: skip
        record["events_per_s"] = round(record["requests_per_s"] * 500)
        self.log(f"    {record['events_per_s']} feedback events/s")
        return record

    def track_bulk(self) -> dict[str, object]:
        """``POST /v1/track`` bodies of 500 events each (``Workload.track_500``), at 8
        connections as feedback's: events accepted per second."""
        assert self.work.track_500 is not None
        record = self._measure(self.flagsight, "bodies.lua",
                               [self.work.api_key, "/v1/track", str(self.work.track_500)],
                               8, "flagsight track bulk 500")  # fmt: skip
        record["events_per_s"] = round(record["requests_per_s"] * TRACK_EVENTS)
        self.log(f"    {record['events_per_s']} tracked events/s")
        return record

    def mixed(self) -> dict[str, object]:
        return self._measure(self.flagsight, "mixed.lua",
                             [*self._evaluate_args(), str(self.work.evaluation_ids)], 64,
                             "flagsight mixed 80/20")  # fmt: skip
