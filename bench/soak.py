"""``make soak``: a bounded mixed load at about 70% of measured capacity, then an audit.

1. Start ``flagsight serve`` (2 workers) on a loopback port over a fresh data directory.
2. Measure capacity: wrk, no pacing, the same request mix, for ``--probe`` seconds.
3. Soak: wrk paced with ``delay()`` to about ``--fraction`` of that rate for ``--duration``
   seconds, on a tenant of its own; every 10 s the workers' resident memory is sampled.
4. Stop the server gracefully (the event log is sealed), run the insights pipeline once and
   check that every acknowledged evaluation and feedback event is in the warehouse.

The mix, per wrk connection, repeats: 6 single evaluations, 1 bulk evaluation of 10 users,
3 feedback reports, each naming an evaluation id this connection received. Nothing leaves
the loopback interface. The report is printed as JSON and written to ``--report``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import psutil
import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from api.settings import Settings  # noqa: E402
from pipelines.cli import run_pipeline_once  # noqa: E402
from tests.support.admin import Admin, requests_caller  # noqa: E402
from tests.support.server import GunicornServer  # noqa: E402

ADMIN_TOKEN = "soak-admin-token-" + os.urandom(8).hex()
BULK_USERS = 10
CYCLE = 10  # requests per cycle: 6 evaluate, 1 bulk (10 entries), 3 feedback

WRK_SCRIPT = r"""
local key, delay_ms = "__KEY__", __DELAY__
local counter, ids, bulk_body = 0, {}, nil
stats = {eval_ok = 0, bulk_ok = 0, fb_ok = 0, fb_skipped = 0, bad = 0}
local threads = {}
last_bad = ""

function setup(thread) table.insert(threads, thread) end

function init(args)
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "ApiKey " .. key
  local users = {}
  for i = 1, __BULK__ do users[i] = '"b' .. math.random(1, 1e9) .. '-' .. i .. '"' end
  bulk_body = '{"flagKey":"soak-pct","userIdentifiers":[' .. table.concat(users, ",") .. ']}'
end

function delay() return delay_ms end

function request()
  counter = counter + 1
  local slot = counter % 10
  if slot == 6 then
    return wrk.format("POST", "/v1/evaluate/bulk", nil, bulk_body)
  elseif slot >= 7 and #ids > 0 then
    local id = table.remove(ids)
    return wrk.format("POST", "/v1/feedback/report", nil,
      '{"evaluationId":"' .. id .. '","result":' .. (counter % 3 == 0 and "false" or "true") ..
      ',"latencyMs":' .. (counter % 97) .. '}')
  else
    if slot >= 7 then stats.fb_skipped = stats.fb_skipped + 1 end
    local flag = (counter % 2 == 0) and "soak-pct" or "soak-static"
    return wrk.format("POST", "/v1/evaluate", nil,
      '{"flagKey":"' .. flag .. '","userIdentifier":"u' .. counter .. '"}')
  end
end

-- request() and response() interleave across a thread's connections, so a response is
-- classified by itself: 204 is feedback, a bulk answer's first key is a "b..." user.
function response(status, headers, body)
  local bulk = status == 200 and body ~= nil and body:sub(1, 3) == '{"b'
  if status == 200 and not bulk then
    stats.eval_ok = stats.eval_ok + 1
    local id = body and body:match('"evaluationId":"([^"]+)"')
    if id and #ids < 100 then table.insert(ids, id) end
  elseif bulk then
    stats.bulk_ok = stats.bulk_ok + 1
  elseif status == 204 then
    stats.fb_ok = stats.fb_ok + 1
  else
    stats.bad = stats.bad + 1
    last_bad = status .. " " .. string.sub(body or "", 1, 300)
  end
end

function done(summary, latency, requests)
  local t = {eval_ok = 0, bulk_ok = 0, fb_ok = 0, fb_skipped = 0, bad = 0}
  for _, thread in ipairs(threads) do
    local bad = thread:get("last_bad")
    if bad ~= "" then io.write("BAD " .. bad .. "\n") end
    for k, _ in pairs(t) do t[k] = t[k] + thread:get("stats")[k] end
  end
  io.write(string.format(
    'SOAK {"requests":%d,"duration_us":%d,"connect_errors":%d,"read_errors":%d,' ..
    '"write_errors":%d,"timeouts":%d,"non_2xx":%d,"eval_ok":%d,"bulk_ok":%d,"fb_ok":%d,' ..
    '"fb_skipped":%d,"bad":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.timeout, summary.errors.status, t.eval_ok, t.bulk_ok,
    t.fb_ok, t.fb_skipped, t.bad, latency:percentile(50), latency:percentile(99), latency.max))
end
"""


@dataclass
class MemorySampler:
    """Resident memory of every gunicorn worker, sampled every ``interval_s`` seconds."""

    server: GunicornServer
    interval_s: float = 10.0
    samples: list[tuple[float, dict[int, int]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        return thread

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.interval_s):
            rss = {}
            for pid in self.server.worker_pids():
                with contextlib.suppress(psutil.NoSuchProcess):
                    rss[pid] = psutil.Process(pid).memory_info().rss
            self.samples.append((time.monotonic() - started, rss))

    def stop(self) -> None:
        self._stop.set()


def run_wrk(url: str, key: str, seconds: int, connections: int, delay_ms: float) -> dict:
    script = WRK_SCRIPT.replace("__KEY__", key).replace("__DELAY__", f"{delay_ms:.3f}")
    script = script.replace("__BULK__", str(BULK_USERS))
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    try:
        done = subprocess.run(
            ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "5s",
             "-s", handle.name, url],
            capture_output=True, text=True,
        )  # fmt: skip
    finally:
        os.unlink(handle.name)
    match = re.search(r"^SOAK (\{.*\})$", done.stdout, re.MULTILINE)
    if done.returncode or not match:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout}{done.stderr}")
    stats = json.loads(match.group(1))
    stats["bad_examples"] = re.findall(r"^BAD (.*)$", done.stdout, re.MULTILINE)
    stats["rps"] = stats["requests"] / (stats["duration_us"] / 1e6)
    return stats


def make_tenant(admin: Admin) -> tuple[str, str, str]:
    tenant = admin.tenant(plan="enterprise", limit=10**12, environment="soak")
    admin.flag(tenant.environment_id, "soak-pct", [{"type": "PERCENTAGE", "percentage": 40}])
    admin.flag(tenant.environment_id, "soak-static", [{"type": "STATIC", "value": True}])
    time.sleep(1.5)  # an admin change reaches every worker within a second (contract 2)
    return tenant.organization_id, tenant.environment_id, tenant.api_key


def warehouse_counts(warehouse: Path, environment_id: str) -> tuple[int, int]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        row = con.execute(
            "SELECT coalesce(sum(evaluations), 0), coalesce(sum(feedback_count), 0) "
            "FROM flag_environment_metrics WHERE environment_id = ?",
            [environment_id],
        ).fetchone()
    return int(row[0]), int(row[1])


def memory_summary(samples: list[tuple[float, dict[int, int]]]) -> dict:
    """Total worker RSS per sample (MiB) and the growth from the first full minute to the end."""
    totals = [(round(t), sum(rss.values()) / 2**20) for t, rss in samples if rss]
    after_warmup = [mib for t, mib in totals if t >= 60] or [mib for _, mib in totals]
    return {
        "samples_mib": [[t, round(mib, 1)] for t, mib in totals],
        "first_after_warmup_mib": round(after_warmup[0], 1),
        "last_mib": round(after_warmup[-1], 1),
        "max_mib": round(max(after_warmup), 1),
        "growth_mib": round(after_warmup[-1] - after_warmup[0], 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=int, default=600, help="soak seconds (default 600)")
    parser.add_argument("--probe", type=int, default=20, help="capacity probe seconds")
    parser.add_argument("--fraction", type=float, default=0.7, help="share of capacity")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--report", type=Path, default=REPO / "var" / "soak-report.json")
    args = parser.parse_args(argv)

    data = Path(tempfile.mkdtemp(prefix="flagsight-soak-")) / "data"
    server = GunicornServer(data, admin_token=ADMIN_TOKEN, workers=args.workers).start()
    try:
        admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
        _, _, probe_key = make_tenant(admin)
        probe = run_wrk(server.url, probe_key, args.probe, args.connections, 0)
        target = probe["rps"] * args.fraction
        # each connection sends one request, waits for it, then sleeps delay_ms
        per_connection_ms = 1000 * args.connections / target
        delay_ms = max(0.0, per_connection_ms - probe["p50_us"] / 1000)
        _, environment_id, key = make_tenant(admin)
        sampler = MemorySampler(server)
        sampler.start()
        started = time.time()
        soak = run_wrk(server.url, key, args.duration, args.connections, delay_ms)
        sampler.stop()
        metrics = requests.get(f"{server.url}/metrics", timeout=10).text
    finally:
        server.stop()
    lost = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("flagsight_events_lost")
    )
    pipeline_started = time.monotonic()
    run_pipeline_once(Settings(data_dir=data, admin_token=ADMIN_TOKEN), echo=lambda _: None)
    pipeline_s = time.monotonic() - pipeline_started
    evaluations, feedback = warehouse_counts(data / "warehouse.duckdb", environment_id)
    acked_evaluations = soak["eval_ok"] + soak["bulk_ok"] * BULK_USERS
    errors = sum(
        soak[k]
        for k in ("connect_errors", "read_errors", "write_errors", "timeouts", "non_2xx", "bad")
    )
    report = {
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": {"cpus": os.cpu_count(), "workers": args.workers},
        "capacity_probe": {k: probe[k] for k in ("rps", "requests", "p50_us", "p99_us")},
        "target_rps": round(target, 1),
        "delay_ms": round(delay_ms, 3),
        "soak": soak,
        "memory": memory_summary(sampler.samples),
        "events_lost_metric": lost,
        "acknowledged": {"evaluations": acked_evaluations, "feedback": soak["fb_ok"]},
        "warehouse": {"evaluations": evaluations, "feedback": feedback},
        "pipeline_seconds": round(pipeline_s, 1),
        "errors": errors,
        "data_dir": str(data),
    }
    # wrk stops with up to one request per connection in flight: the server may have logged
    # those (and answered into a closed socket), so the warehouse may hold a few more events
    # than wrk saw acknowledged, never fewer.
    report["unacknowledged_bound"] = {
        "evaluations": args.connections * BULK_USERS,
        "feedback": args.connections,
    }
    report["ok"] = (
        errors == 0
        and lost == 0
        and acked_evaluations <= evaluations <= acked_evaluations + args.connections * BULK_USERS
        and soak["fb_ok"] <= feedback <= soak["fb_ok"] + args.connections
    )
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
