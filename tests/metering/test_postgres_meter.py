"""The PostgreSQL meter: exact across hosts and workers, one round trip per many evaluations far
from the threshold, leases of killed workers expire, and outages are served within the bound."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest

from api.metering import leasing
from api.metering import postgres_meter as pm
from api.metering.meter import MeterUnavailable
from api.metering.postgres_meter import (
    MAX_LEASE,
    PostgresMeter,
    PostgresMeterOptions,
    ensure_schema,
)
from api.observability.metrics import Metrics
from devtools.engines.postgres import PostgresCluster
from tests.support.engines import postgres_session
from tests.support.processes import run_forked

MONTH = 202611


def _meter(url: str, host: str | None = None, **options: float) -> PostgresMeter:
    return PostgresMeter(url, host=host, options=PostgresMeterOptions(**options))


def test_bulk_grants_are_partial_at_the_threshold(postgres_url: str) -> None:
    meter = _meter(postgres_url)
    assert meter.consume("org_a", MONTH, 100, 110) == 100
    assert meter.consume("org_a", MONTH, 25, 110) == 10
    assert meter.consume("org_a", MONTH, 1, 110) == 0
    assert meter.usage("org_a", MONTH) == 110
    meter.close()


def test_months_and_organizations_are_counted_apart(postgres_url: str) -> None:
    meter = _meter(postgres_url)
    meter.consume("org_a", MONTH, 7, 100)
    meter.consume("org_a", MONTH + 1, 3, 100)
    meter.consume("org_b", MONTH, 5, 100)
    usage = [meter.usage("org_a", MONTH), meter.usage("org_a", MONTH + 1)]
    assert usage + [meter.usage("org_b", MONTH), meter.usage("org_c", MONTH)] == [7, 3, 5, 0]
    meter.close()


def test_the_schema_is_made_idempotently_inside_a_callers_transaction(postgres_url: str) -> None:
    """What the control plane's migrations do: call ``ensure_schema`` in their transaction."""
    with psycopg.connect(postgres_url) as conn, conn.transaction():
        ensure_schema(conn)
        ensure_schema(conn)
    with psycopg.connect(postgres_url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'meter'"
            " ORDER BY 1"
        ).fetchall()
    assert tables == [("leases",), ("usage",)]
    meter = PostgresMeter(postgres_url, create_schema=False)
    assert meter.consume("org_a", MONTH, 3, 10) == 3
    meter.close()


@pytest.mark.parametrize("remaining", [0, 9_999, 10_000, 55_000, 999_999, 1_000_000, 10**9])
def test_the_database_leases_by_the_shared_policy(postgres_url: str, remaining: int) -> None:
    """``meter.consume`` writes ``leasing.lease_size`` in SQL: both must agree."""
    meter = _meter(postgres_url)
    meter.consume("org_a", MONTH, 1, remaining + 1)
    with psycopg.connect(postgres_url) as conn:
        leased = conn.execute("SELECT coalesce(sum(unspent), 0) FROM meter.leases").fetchone()
    assert leased == (leasing.lease_size(remaining, MAX_LEASE),)
    meter.close()


def test_far_from_the_threshold_a_round_trip_serves_thousands(postgres_url: str) -> None:
    """A worker serving 1,000 evaluations a second reports every 5 s (the default interval):
    grants and reports together stay under one round trip per 1,000 evaluations."""
    meter = _meter(postgres_url, report_interval_s=0.0)
    for served in range(1, 100_001):
        assert meter.consume("org_a", MONTH, 1, 100_000_000) == 1
        if served % 5_000 == 0:
            meter.flush()
    assert meter.round_trips["grant"] <= 100_000 // MAX_LEASE + 1
    assert sum(meter.round_trips.values()) <= 100, meter.round_trips
    meter.close()


def _drain(url: str, host: str, bulk: int, hard_limit: int) -> int:
    """Serve single and bulk requests until refused, as a worker does, reporting often."""
    options = PostgresMeterOptions(report_interval_s=0.0)
    meter = PostgresMeter(url, host=host, options=options, create_schema=False)
    served, size, requests = 0, 1, 0
    while granted := meter.consume("org_a", MONTH, size, hard_limit):
        served += granted
        size = bulk if size == 1 else 1
        requests += 1
        if requests % 50 == 0:
            meter.flush()  # trims and gives back leases while the others grant
    meter.close()
    return served


@pytest.mark.parametrize("hard_limit", [11_000, 60_000])  # a free plan; leases far from it
def test_three_hosts_of_two_workers_serve_exactly_the_hard_threshold(
    postgres_url: str, hard_limit: int
) -> None:
    _meter(postgres_url).close()  # the schema, made once
    workers = [
        (postgres_url, f"host{h}", 7 + 10 * w, hard_limit) for h in range(3) for w in range(2)
    ]
    served = run_forked(_drain, workers)
    assert sum(served) == hard_limit
    assert all(served), served  # every worker got a share
    meter = _meter(postgres_url)
    assert meter.usage("org_a", MONTH) == hard_limit
    meter.close()


def test_usage_is_exact_after_a_flush(postgres_url: str) -> None:
    worker = _meter(postgres_url, report_interval_s=0.0)
    other = _meter(postgres_url, host="another-host")
    for _ in range(12_345):
        worker.consume("org_a", MONTH, 1, 1_000_000)
    assert worker.usage("org_a", MONTH) == 12_345  # its own leases: exact at any moment
    worker.flush()
    assert other.usage("org_a", MONTH) == 12_345
    worker.release_leases()
    assert other.usage("org_a", MONTH) == 12_345
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM meter.leases").fetchone() == (0,)
    worker.close()
    other.close()


def _lease_report_and_die(url: str) -> None:
    options = PostgresMeterOptions(report_interval_s=0.0, lease_ttl_s=1.0)
    meter = PostgresMeter(url, options=options, create_schema=False)
    for _ in range(10):
        meter.consume("org_a", MONTH, 1, 1_000_000)
    meter.flush()  # reports: keeps twice what its lease served (9), gives the rest back
    for _ in range(5):
        meter.consume("org_a", MONTH, 1, 1_000_000)
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_workers_lease_expires_and_counts_as_served(postgres_url: str) -> None:
    survivor = _meter(postgres_url, report_interval_s=0.0, lease_ttl_s=1.0)
    child = mp.get_context("fork").Process(target=_lease_report_and_die, args=(postgres_url,))
    child.start()
    child.join(30)
    assert child.exitcode == -signal.SIGKILL
    assert survivor.usage("org_a", MONTH) == 10  # as of the dead worker's last report
    time.sleep(1.2)
    # 15 were served; the 13 it still held count as served: blocked 13 early, never late.
    assert survivor.usage("org_a", MONTH) == 28
    survivor.consume("org_b", MONTH, 1, 1_000_000)
    survivor.flush()  # any report deletes expired leases
    with psycopg.connect(postgres_url) as conn:
        dead = conn.execute("SELECT count(*) FROM meter.leases WHERE pid = %s", (child.pid,))
        assert dead.fetchone() == (0,)
    served = 0
    while granted := survivor.consume("org_a", MONTH, 50_000, 1_000_000):
        served += granted
    assert served == 1_000_000 - 28  # what it gave back at its report was served again
    survivor.close()


def test_a_forked_child_opens_its_own_pool(postgres_url: str) -> None:
    meter = _meter(postgres_url)
    assert meter.consume("org_a", MONTH, 5, 100) == 5  # the parent's pool is open

    def child() -> None:
        os._exit(0 if meter.consume("org_a", MONTH, 5, 100) == 5 else 1)

    process = mp.get_context("fork").Process(target=child)
    process.start()
    process.join(30)
    assert process.exitcode == 0
    assert meter.consume("org_a", MONTH, 5, 100) == 5  # the child did not close the parent's
    assert meter.usage("org_a", MONTH) == 15
    assert not meter.unreachable
    meter.close()


def test_a_forked_child_does_not_spend_its_parents_leases(postgres_url: str) -> None:
    """A gunicorn worker is a fork of the master: spending a lease the parent holds in memory
    would serve the same quota twice."""
    meter = _meter(postgres_url)
    for organization in ("org_lease_a", "org_lease_b"):
        assert meter.consume(organization, MONTH, 1, 1_000_000) == 1  # each leases a block
    assert meter.consume("org_lease_a", MONTH, 1, 1_000_000) == 1
    assert meter.round_trips["grant"] == 2  # the second came from the lease

    def child() -> None:
        served = meter.consume("org_lease_a", MONTH, 1, 1_000_000)
        os._exit(0 if served == 1 and meter.round_trips == Counter(grant=1) else 1)

    process = mp.get_context("fork").Process(target=child)
    process.start()
    process.join(30)
    assert process.exitcode == 0  # the child asked the database for its own lease
    assert meter.consume("org_lease_a", MONTH, 1, 1_000_000) == 1
    assert meter.round_trips["grant"] == 2  # the parent still spends its own
    meter.close()


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL of this test's own, to stop and start (the session's is shared)."""
    yield from postgres_session()


class _Traffic(threading.Thread):
    """Two workers' requests, one at a time."""

    def __init__(self, meters: list[PostgresMeter], orgs: dict[str, int]):
        super().__init__(daemon=True)
        self.meters, self.orgs = meters, orgs
        self.served = {org: 0 for org in orgs}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.002):
            for meter in self.meters:
                for org, hard_limit in self.orgs.items():
                    self.served[org] += meter.consume(org, MONTH, 1, hard_limit)


def _round_trips(meters: list[PostgresMeter]) -> list[int]:
    return [sum(meter.round_trips.values()) for meter in meters]


def test_postgres_stopped_for_ten_seconds(own_cluster: PostgresCluster) -> None:
    """Flags keep being served on leases and credit, no call waits on the dead database, and
    afterwards the count is exact again and past the threshold by at most the bound."""
    allowance, far, near = 300, 10_000_000, 19_500
    metrics = Metrics()
    meters = [
        PostgresMeter(
            own_cluster.url,
            host=f"host{i}",
            metrics=metrics,
            options=PostgresMeterOptions(outage_allowance=allowance),
        )
        for i in range(2)
    ]
    sample = metrics.registry.get_sample_value
    for meter in meters:  # leases for the far organization, exact grants for the near one
        assert sum(meter.consume("far", MONTH, 1, far) for _ in range(2_000)) == 2_000
        assert sum(meter.consume("near", MONTH, 100, near) for _ in range(95)) == 9_500
    traffic = _Traffic(meters, {"far": far, "near": near})
    traffic.start()
    time.sleep(0.5)
    before = dict(traffic.served)
    own_cluster.stop("fast")
    deadline = time.monotonic() + 10
    while not all(meter.unreachable for meter in meters):
        assert time.monotonic() < deadline, "the breaker did not open"
        time.sleep(0.05)
    time.sleep(0.5)  # a call that passed the breaker just before it opened has failed by now
    trips_while_open = _round_trips(meters)
    time.sleep(10)
    during = {org: traffic.served[org] - before[org] for org in before}
    assert all(meter.unreachable for meter in meters)
    assert sample("flagsight_meter_outage") == 1
    # No call waited on the dead database: not one request touched it while the breaker was
    # open (the reconnecting thread's attempts are not requests' round trips).
    assert _round_trips(meters) == trips_while_open
    own_cluster.start()
    deadline = time.monotonic() + 15
    while any(meter.unreachable for meter in meters):
        assert time.monotonic() < deadline, "the meter did not reconnect"
        time.sleep(0.1)
    time.sleep(0.5)
    traffic.stop.set()
    traffic.join()

    assert during["far"] > 1_000  # served all along, on leases and then credit
    assert during["far"] <= 2 * (MAX_LEASE + allowance)
    assert during["near"] > 0
    near_served = 19_000 + traffic.served["near"]
    assert near <= near_served <= near + 2 * allowance  # the bound: workers x allowance
    for meter in meters:
        meter.release_leases()
    assert meters[0].usage("near", MONTH) == near_served  # reconciled: the count is exact
    assert meters[0].usage("far", MONTH) == 4_000 + traffic.served["far"]
    assert meters[1].consume("near", MONTH, 1, near) == 0  # and the organization is blocked
    assert sample("flagsight_meter_outage") == 0
    assert sample("flagsight_meter_credit_evaluations_total") > 0
    for meter in meters:
        meter.close()


def test_a_meter_started_while_postgres_is_down_serves_on_credit_and_catches_up(
    own_cluster: PostgresCluster,
) -> None:
    own_cluster.stop("fast")
    meter = PostgresMeter(own_cluster.url, options=PostgresMeterOptions(outage_allowance=50))
    started = time.monotonic()
    assert meter.consume("org_a", MONTH, 30, 1_000) == 30  # on credit
    assert time.monotonic() - started < 1.5  # not the 2 s connect timeout a wait would take
    assert meter.unreachable
    assert meter.consume("org_a", MONTH, 30, 1_000) == 20  # the allowance is spent
    assert meter.usage("org_a", MONTH) == 50  # the quota headers' figure: its own credit
    with pytest.raises(MeterUnavailable):  # a usage read's: it does not know the count
        meter.usage("org_a", MONTH, exact=True)
    own_cluster.start()
    deadline = time.monotonic() + 15
    while meter.unreachable:
        assert time.monotonic() < deadline, "the meter did not reconnect"
        time.sleep(0.1)
    assert meter.usage("org_a", MONTH) == 50  # the schema made, the credit written back
    assert meter.usage("org_a", MONTH, exact=True) == 50
    assert meter.consume("org_a", MONTH, 2_000, 1_000) == 950
    meter.close()


class _Worker(threading.Thread):
    """One worker: requests of 1 and 3 evaluations as fast as they come, and its housekeeping
    thread's ``flush`` every 20 ms (reports every ``report_interval_s``)."""

    def __init__(self, meter: PostgresMeter, hard_limit: int):
        super().__init__(daemon=True)
        self.meter, self.hard_limit = meter, hard_limit
        self.served = 0
        self.stop = threading.Event()
        self.housekeeping = threading.Thread(target=self._flush, daemon=True)

    def _flush(self) -> None:
        while not self.stop.wait(0.02):
            self.meter.flush()

    def run(self) -> None:
        self.housekeeping.start()
        size = 1
        while not self.stop.wait(0.0005):
            self.served += self.meter.consume("org_a", MONTH, size, self.hard_limit)
            size = 4 - size  # 1, 3, 1, 3 ...
        self.housekeeping.join()


def test_a_grant_cut_off_by_the_outage_leaves_no_evaluation_uncounted(
    own_cluster: PostgresCluster,
) -> None:
    """PostgreSQL killed while small leases run out all the time (grants and reports in flight
    when it dies), started again, traffic goes on: after one report from every worker the
    month's count is what was served, never less."""
    hard_limit = 80_000  # leases of a few hundred: grants every few hundred evaluations
    options = PostgresMeterOptions(report_interval_s=0.1, outage_allowance=5_000)
    meters = [
        PostgresMeter(own_cluster.url, host=f"host{i // 2}", options=options) for i in range(4)
    ]
    workers = [_Worker(meter, hard_limit) for meter in meters]
    for worker in workers:
        worker.start()
    time.sleep(1.0)
    own_cluster.stop("immediate")
    time.sleep(1.5)
    assert all(meter.unreachable for meter in meters)
    own_cluster.start()
    deadline = time.monotonic() + 15
    while any(meter.unreachable for meter in meters):
        assert time.monotonic() < deadline, "the meter did not reconnect"
        time.sleep(0.05)
    time.sleep(1.0)  # traffic goes on: grants and reports again
    for worker in workers:
        worker.stop.set()
    for worker in workers:
        worker.join()
    served = sum(worker.served for worker in workers)
    assert 10_000 < served < hard_limit - 20_000  # far from the threshold all along
    assert not any(meter.unreachable for meter in meters)
    time.sleep(options.report_interval_s)
    for meter in meters:
        meter.flush()  # one report from every worker
    reader = PostgresMeter(own_cluster.url, create_schema=False)
    # Exact, but for a grant PostgreSQL committed as it died without answering: that request
    # (at most 3 evaluations, one per worker) was served on credit too and counts twice.
    assert served <= reader.usage("org_a", MONTH) <= served + 3 * len(workers)
    for meter in [*meters, reader]:
        meter.close()


def _reconnected(meter: PostgresMeter) -> None:
    deadline = time.monotonic() + 15
    while meter.unreachable:
        assert time.monotonic() < deadline, "the meter did not reconnect"
        time.sleep(0.05)


def test_a_report_cut_off_leaves_no_stale_lease_row(own_cluster: PostgresCluster) -> None:
    """A lease spent to its end when the report that ends it fails: its row still says what
    was unspent at the report before; the worker must correct it, not forget it."""
    worker = PostgresMeter(own_cluster.url, options=PostgresMeterOptions(report_interval_s=0))
    assert worker.consume("org_a", MONTH, 1, 1_000_001) == 1  # and a lease of 10,000
    assert worker.consume("org_a", MONTH, 5_000, 1_000_001) == 5_000
    worker.flush()  # records 5,000 unspent
    assert worker.consume("org_a", MONTH, 5_000, 1_000_001) == 5_000  # the lease is spent
    own_cluster.stop("immediate")
    worker.flush()  # fails: the breaker opens
    assert worker.unreachable
    own_cluster.start()
    _reconnected(worker)
    reader = PostgresMeter(own_cluster.url, create_schema=False)
    assert reader.usage("org_a", MONTH) == 10_001
    for meter in (worker, reader):
        meter.close()


def test_a_grant_cut_off_settles_the_lease_it_returned(own_cluster: PostgresCluster) -> None:
    """The grant that fails returned 4,000 unspent: the worker serves on credit, and after
    the outage the old lease row is settled at what was really left."""
    options = PostgresMeterOptions(outage_allowance=10_000)
    worker = PostgresMeter(own_cluster.url, options=options)
    assert worker.consume("org_a", MONTH, 1, 1_000_001) == 1  # and a lease of 10,000
    assert worker.consume("org_a", MONTH, 6_000, 1_000_001) == 6_000
    own_cluster.stop("immediate")
    assert worker.consume("org_a", MONTH, 5_000, 1_000_001) == 5_000  # on credit
    assert worker.unreachable
    own_cluster.start()
    _reconnected(worker)
    reader = PostgresMeter(own_cluster.url, create_schema=False)
    assert reader.usage("org_a", MONTH) == 11_001  # not 15,001: the 4,000 were never served
    assert worker.consume("org_a", MONTH, 1, 1_000_001) == 1  # a fresh lease
    worker.release_leases()
    assert reader.usage("org_a", MONTH) == 11_002
    for meter in (worker, reader):
        meter.close()


def test_a_grant_committed_but_unanswered_counts_its_grant_twice_at_most(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection drops after PostgreSQL committed a grant: the worker serves the request
    on credit as well, so the request counts twice (too high, never too low); the lease that
    grant made, which the worker never had, goes back."""
    options = PostgresMeterOptions(outage_allowance=10_000, retry_interval_s=0.05)
    worker = PostgresMeter(postgres_url, options=options)
    assert worker.consume("org_a", MONTH, 1, 1_000_001) == 1
    assert worker.consume("org_a", MONTH, 6_000, 1_000_001) == 6_000
    call = worker._call

    def answer_lost(here, operation, query, params):  # type: ignore[no-untyped-def]
        row = call(here, operation, query, params)
        if operation == "grant":
            monkeypatch.setattr(worker, "_call", call)
            worker._trip(here, psycopg.OperationalError("connection lost"))
            raise pm._Unavailable
        return row

    monkeypatch.setattr(worker, "_call", answer_lost)
    assert worker.consume("org_a", MONTH, 5_000, 1_000_001) == 5_000  # on credit
    _reconnected(worker)
    reader = PostgresMeter(postgres_url, create_schema=False)
    assert reader.usage("org_a", MONTH) == 11_001 + 5_000
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM meter.leases").fetchone() == (0,)
    for meter in (worker, reader):
        meter.close()


@pytest.mark.parametrize("committed", [False, True])
def test_a_report_cut_off_while_trimming_a_lease_is_settled(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    """A report trims a lease of 10,000 (1,000 spent) to 2,000 and gives 7,000 back, and its
    answer never comes: whether PostgreSQL committed it or not, the count is exact after."""
    options = PostgresMeterOptions(report_interval_s=0, retry_interval_s=0.05)
    worker = PostgresMeter(postgres_url, options=options)
    assert worker.consume("org_a", MONTH, 1, 1_000_001) == 1  # and a lease of 10,000
    assert worker.consume("org_a", MONTH, 1_000, 1_000_001) == 1_000
    call = worker._call

    def answer_lost(here, operation, query, params):  # type: ignore[no-untyped-def]
        if operation == "report":
            monkeypatch.setattr(worker, "_call", call)
            if committed:
                call(here, operation, query, params)
            worker._trip(here, psycopg.OperationalError("connection lost"))
            raise pm._Unavailable
        return call(here, operation, query, params)

    monkeypatch.setattr(worker, "_call", answer_lost)
    worker.flush()
    assert worker.consume("org_a", MONTH, 500, 1_000_001) == 500  # from the trimmed lease
    _reconnected(worker)
    reader = PostgresMeter(postgres_url, create_schema=False)
    assert reader.usage("org_a", MONTH) == 1_501
    assert worker.consume("org_a", MONTH, 1_500, 1_000_001) == 1_500
    worker.flush()
    assert reader.usage("org_a", MONTH) == 3_001
    worker.release_leases()
    assert reader.usage("org_a", MONTH) == 3_001
    for meter in (worker, reader):
        meter.close()
