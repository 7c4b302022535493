"""A meter in PostgreSQL, exact across every worker of every host (contract, section 8).

The schema ``meter`` holds the tables and functions. ``meter.usage`` holds one row per (organization, month): ``allocated``, the evaluations
served plus the quota leased to workers and not given back. Every grant is one call of the
``meter.consume`` function (one round trip): it locks the row, grants up to the request without
passing the hard threshold, and leases a block by the policy of ``leasing.lease_size``. Far
from the threshold a worker then spends its lease in memory, with no round trip; within
``leasing.LEASE_FLOOR`` of it there are no leases, so every evaluation is one round trip and
the last ones are served exactly.

Each lease is a row of ``meter.leases`` (holder = host/pid/random, unspent, expiry), so
``usage`` = allocated minus the unspent of every lease still reporting. A worker reports every
``report_interval_s`` from the housekeeping thread's ``flush``: it returns idle leases whole,
trims the others to twice what they spent since the last report (the rest goes back to
``allocated``) and renews their expiry. A worker that stops reporting (killed, or cut off
longer than the lease TTL) leaves rows that expire: what they still held counts as served.
That may block an organization a little early, never late; docs/metering.md gives the bound.

While PostgreSQL is unreachable the meter keeps serving: a failed round trip opens a breaker,
after which no request touches the database; a worker spends the lease it holds, then serves
each organization on credit, up to ``outage_allowance`` evaluations per worker per outage
(less if the organization was closer than that to its threshold when last seen). A background
thread retries every ``retry_interval_s``; when it gets through it settles the grants and
reports whose answer never came (``meter.settle``, ``meter.settle_reports``: idempotent, so a
call that committed is not counted twice), adds the credit to ``allocated`` and closes the
breaker. So after an outage the month's count is exact again, and
it passed the hard threshold by at most hosts x workers x ``outage_allowance``.

Fork safety: the pool, the holder id and the leases belong to one process. A fork forgets
them in the child (``os.register_at_fork``), which makes its own the first time it uses the
meter; so the hot path asks for no process id (``os.getpid`` is a system call: 2 % of a
cluster worker's time when every ``consume`` made it).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import secrets
import socket
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from api.metering import leasing
from api.metering.meter import MeterUnavailable
from api.observability.metrics import Metrics

log = logging.getLogger("flagsight.meter")

SCHEMA = Path(__file__).with_name("postgres_meter.sql")
MAX_LEASE = 10_000
"""A lease cap worth a database round trip: far from the threshold, one grant per 10,000
evaluations a worker serves."""
_SCHEMA_LOCK = 0x666C_6167_6D74_72  # the advisory lock under which the schema is made
_GRANT = (
    "SELECT * FROM meter.consume(%s::text, %s::text, %s::integer, %s::text, %s::integer,"
    " %s::bigint, %s::bigint, %s::bigint, %s::bigint, %s::bigint, %s::bigint, %s::float8,"
    " %s::bigint)"
)
_REPORT = (
    "SELECT meter.report(%s::text, %s::text, %s::integer, %s::float8,"
    " %s::text[], %s::integer[], %s::bigint[], %s::bigint[])"
)
_SETTLE = "SELECT meter.settle(%s::text, %s::text[], %s::integer[], %s::bigint[], %s::bigint[])"
_SETTLE_REPORTS = (
    "SELECT meter.settle_reports(%s::text, %s::text[], %s::integer[], %s::bigint[],"
    " %s::bigint[], %s::bigint[])"
)
_USAGE = "SELECT meter.usage_of(%s::text, %s::integer)"
_REFUND = (
    "UPDATE meter.usage SET allocated = greatest(0, allocated - %s::bigint)"
    " WHERE organization_id = %s::text AND month = %s::integer RETURNING allocated"
)

Key = tuple[str, int]


def ensure_schema(conn: psycopg.Connection[Any]) -> None:
    """Create or update the meter's tables and functions; idempotent, safe from any number of
    processes at once. Inside the caller's transaction when it has one (a migration)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(SCHEMA.read_text())


@dataclass(frozen=True)
class PostgresMeterOptions:
    """The PostgreSQL meter's timings and outage allowance (docs/metering.md)."""

    lease_ttl_s: float = 30.0
    """A lease row not renewed for this long counts as spent: its holder is gone."""
    report_interval_s: float = 5.0
    """How often a worker reports its leases (from ``flush``): heartbeat, trim, usage."""
    outage_allowance: int = 1_000
    """Evaluations a worker may serve on credit per organization per outage."""
    request_timeout_s: float = 0.1
    """The longest a request waits for a pooled connection before serving on credit."""
    retry_interval_s: float = 0.5
    """How often a cut-off worker tries to reach PostgreSQL again."""


class _Unavailable(Exception):
    """A round trip failed: the breaker is open now."""


@dataclass
class _Lease:
    unspent: int  # what this worker may still spend without asking
    reported: int  # the unspent the database last heard of


@dataclass
class _Doubt:
    """A grant whose answer never came: whether PostgreSQL committed it is unknown."""

    grant_id: int  # the number it gave the lease it would have made
    returned: int  # the unspent quota it gave back, never spent since


@dataclass
class _Trim:
    """What one report did to a lease: settled like a grant when its answer never came."""

    expected: int  # the unspent the database had before
    keep: int  # the unspent it recorded
    given_back: int  # what it gave back to allocated (more than 0)


@dataclass
class _Credit:
    cap: int  # how much this worker may serve on credit in this outage
    used: int = 0
    unwritten: int = 0  # served on credit, not added to allocated yet


class _Process:
    """What one process holds: its holder id, pool, leases, credit and breaker."""

    def __init__(self, host: str):
        self.pid = os.getpid()
        self.holder = f"{host}/{self.pid}/{secrets.token_hex(4)}"
        self.lock = threading.Lock()  # leases, credit, known usage, the breaker
        self.io_lock = threading.Lock()  # grants and reports: one at a time per process
        self.pool: ConnectionPool | None = None
        self.leases: dict[Key, _Lease] = {}
        self.credit: dict[Key, _Credit] = {}
        self.doubts: dict[Key, _Doubt] = {}  # settled before any other grant of the key
        self.unanswered: dict[Key, _Trim] = {}  # the same for reports
        self.grant_ids = itertools.count(1)
        self.known_usage: dict[Key, int] = {}
        self.down = False
        self.last_report = time.monotonic()


class PostgresMeter:
    """``Meter`` shared by every worker of every host through PostgreSQL; see the module
    docstring."""

    def __init__(
        self,
        url: str,
        *,
        host: str | None = None,
        metrics: Metrics | None = None,
        options: PostgresMeterOptions = PostgresMeterOptions(),  # noqa: B008 - frozen
        create_schema: bool = True,
    ):
        self._url = url
        self._host = host or socket.gethostname()
        self._metrics = metrics
        self._options = options
        self._opening = threading.Lock()
        self._process: _Process | None = None
        self._inherited: list[_Process] = []  # a parent's state: kept, never closed here
        self._closed = threading.Event()
        os.register_at_fork(after_in_child=_forget_in_child(weakref.ref(self)))
        self.round_trips: Counter[str] = Counter()
        """Database round trips of this process by operation (grant, report, usage)."""
        if create_schema:
            try:
                with psycopg.connect(url, **self._connect_kwargs()) as conn:
                    ensure_schema(conn)
            except psycopg.Error:  # the reconnecting thread makes it once the database is back
                log.warning("meter schema not checked: PostgreSQL unreachable", exc_info=True)

    @property
    def unreachable(self) -> bool:
        """Whether this process's breaker is open: PostgreSQL could not be reached."""
        here = self._process
        return here is not None and here.down

    # -- the Meter protocol -----------------------------------------------------------------

    def consume(self, organization_id: str, month: int, requested: int, hard_limit: int) -> int:
        if requested <= 0:
            return 0
        key = (organization_id, month)
        here = self._here()
        with here.lock:
            lease = here.leases.get(key)
            if lease is not None and lease.unspent >= requested:
                lease.unspent -= requested  # the hot path: no round trip
                return requested
            if here.down:
                return self._serve_on_credit(here, key, requested, hard_limit)
        return self._grant(here, key, requested, hard_limit)

    def refund(self, organization_id: str, month: int, count: int) -> None:
        """One round trip; during an outage ``MeterUnavailable`` (contract 4: a give-back is
        refused, not dropped, and the SDK keeps it to try again)."""
        if count <= 0:
            return
        here = self._here()
        if here.down:
            raise MeterUnavailable("the meter's database is unreachable")
        try:
            self._call(here, "refund", _REFUND, (count, organization_id, month))
        except _Unavailable as exc:
            raise MeterUnavailable("the meter's database is unreachable") from exc
        except AssertionError:  # no row: nothing was granted that month
            pass

    def usage(self, organization_id: str, month: int, *, exact: bool = False) -> int:
        """Evaluations served: exact for this worker's own leases, as of their last report
        for the others'; during an outage, the last figure seen plus this worker's credit, or
        with ``exact`` ``MeterUnavailable``."""
        key = (organization_id, month)
        here = self._here()
        counted = None
        if not here.down:
            with contextlib.suppress(_Unavailable):  # then the last figure seen
                counted = self._call(here, "usage", _USAGE, (organization_id, month))[0]
        if counted is None and exact:
            raise MeterUnavailable("the meter's database is unreachable")
        with here.lock:
            if counted is None:
                counted = here.known_usage.get(key, 0)
            else:
                here.known_usage[key] = counted
            lease = here.leases.get(key)
            credit = here.credit.get(key)
            spent_since_report = lease.reported - lease.unspent if lease else 0
            return counted + spent_since_report + (credit.unwritten if credit else 0)

    def flush(self) -> None:
        """Report leases when due (housekeeping calls this every second)."""
        here = self._process
        if here is None or here.down:
            return
        if time.monotonic() - here.last_report >= self._options.report_interval_s:
            self._report_or_trip(here, release=False)

    def release_leases(self) -> None:
        """Give every lease of this process back, so no quota sits idle in one worker."""
        here = self._process
        if here is not None and not here.down:
            self._report_or_trip(here, release=True)

    def close(self) -> None:
        here = self._process
        if self._closed.is_set() or here is None:
            self._closed.set()
            return
        self.release_leases()
        self._closed.set()
        if here.down:
            self._last_write_back(here)
        if here.pool is not None:
            here.pool.close(timeout=1.0)

    # -- per process ------------------------------------------------------------------------

    def _here(self) -> _Process:
        here = self._process
        if here is not None:
            return here
        with self._opening:
            if self._process is None:
                self._process = _Process(self._host)
                self.round_trips = Counter()
            return self._process

    def _forget_parent(self) -> None:
        """In a forked child: set the parent's state aside (kept, so collecting it closes
        nothing the parent uses) and take a new lock, as another thread may have held it at
        the fork."""
        self._opening = threading.Lock()
        if self._process is not None:
            self._inherited.append(self._process)
            self._process = None

    def _connect_kwargs(self) -> dict[str, Any]:
        return {
            "autocommit": True,
            "connect_timeout": 2,  # libpq's least
            "tcp_user_timeout": 1000,  # ms: a peer that stops answering fails the call
            "options": "-c statement_timeout=2000",
            "application_name": "flagsight-meter",
        }

    def _pool(self, here: _Process) -> ConnectionPool:
        if here.pool is None:
            here.pool = ConnectionPool(
                self._url,
                kwargs=self._connect_kwargs(),
                min_size=1,
                max_size=4,  # grants and reports take one at a time; usage reads the rest
                open=False,
                num_workers=1,
                name="flagsight-meter",
            )
            here.pool.open(wait=False)
        return here.pool

    def _call(
        self, here: _Process, operation: str, query: str, params: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        """One round trip through the pool; any failure opens the breaker."""
        self._count(operation)
        try:
            with self._pool(here).connection(timeout=self._options.request_timeout_s) as conn:
                row = conn.execute(query, params).fetchone()
        except psycopg.Error as exc:
            self._trip(here, exc)
            raise _Unavailable from exc
        assert row is not None
        return row

    def _count(self, operation: str) -> None:
        self.round_trips[operation] += 1
        if self._metrics is not None:
            self._metrics.meter_round_trips.labels(operation).inc()

    # -- grants -----------------------------------------------------------------------------

    def _grant(self, here: _Process, key: Key, requested: int, hard_limit: int) -> int:
        with here.io_lock:
            if (here.doubts or here.unanswered) and not here.down:  # settled first
                with contextlib.suppress(_Unavailable):
                    self._settle(here, None)
            with here.lock:
                lease = here.leases.get(key)
                if lease is not None and lease.unspent >= requested:  # leased meanwhile
                    lease.unspent -= requested
                    return requested
                if here.down or key in here.doubts or key in here.unanswered:  # not settled
                    return self._serve_on_credit(here, key, requested, hard_limit)
                here.leases.pop(key, None)
            returned = lease.unspent if lease is not None else 0
            grant_id = next(here.grant_ids)
            params = (
                here.holder, self._host, here.pid, *key, requested, hard_limit, returned,
                leasing.LEASE_FLOOR, leasing.LEASE_DIVISOR, MAX_LEASE, self._options.lease_ttl_s,
                grant_id,
            )  # fmt: skip
            try:
                granted, leased, allocated = self._call(here, "grant", _GRANT, params)
            except _Unavailable:
                # Whether the database took back what was returned is unknown: it is not spent
                # again, and the reconnecting thread settles it (meter.settle) before the
                # breaker closes: the old lease row then records what was really left, or
                # the lease this grant made goes back, so nothing served goes uncounted.
                with here.lock:
                    here.doubts[key] = _Doubt(grant_id, returned)
                    return self._serve_on_credit(here, key, requested, hard_limit)
            with here.lock:
                if leased:
                    here.leases[key] = _Lease(leased, leased)
                here.known_usage[key] = allocated
            return granted

    # -- reports ----------------------------------------------------------------------------

    def _report_or_trip(self, here: _Process, *, release: bool) -> None:
        with contextlib.suppress(_Unavailable):  # the reconnecting thread reports instead
            self._report(here, release=release)

    def _report(
        self, here: _Process, *, release: bool, conn: psycopg.Connection[Any] | None = None
    ) -> None:
        """Heartbeat and trim every lease (or give all back) and write back credit, in one
        round trip (after settling grants whose answer was lost, if any). Quota given back is
        never spent again, whether or not the call succeeds; credit is kept until a call that
        writes it succeeds, and a lease until a call that records it ended succeeds (so its
        row never keeps a stale unspent that nothing will correct)."""
        with here.io_lock:
            self._settle(here, conn)
            with here.lock:
                rows, credit, trims = self._report_rows(here, release)
                here.last_report = time.monotonic()
            if not rows:
                return
            keys = sorted(rows)
            params = (
                here.holder, self._host, here.pid, self._options.lease_ttl_s,
                [k[0] for k in keys], [k[1] for k in keys],
                [rows[k][0] for k in keys], [rows[k][1] for k in keys],
            )  # fmt: skip
            try:
                if conn is None:
                    self._call(here, "report", _REPORT, params)
                else:
                    self._count("report")
                    conn.execute(_REPORT, params)
            except (_Unavailable, psycopg.Error):
                with here.lock:  # what it gave back is settled before the next report
                    for key, trim in trims.items():
                        here.unanswered.setdefault(key, trim)
                raise
            with here.lock:
                for key, (unspent, _given_back) in rows.items():
                    lease = here.leases.get(key)
                    if lease is not None:
                        lease.reported = unspent
                        if not unspent and not lease.unspent:  # its row is gone: so is it
                            del here.leases[key]
                for key, written in credit.items():
                    here.credit[key].unwritten -= written

    def _report_rows(
        self, here: _Process, release: bool
    ) -> tuple[dict[Key, tuple[int, int]], dict[Key, int], dict[Key, _Trim]]:
        """Per key, the unspent to record and what goes back to allocated; the credit written.
        A lease keeps twice what it spent since the last report: at a steady rate it lasts as
        long as before, and a worker whose traffic fell holds little."""
        rows: dict[Key, tuple[int, int]] = {}
        trims: dict[Key, _Trim] = {}
        for key, lease in list(here.leases.items()):
            spent = lease.reported - lease.unspent
            keep = 0 if release else min(lease.unspent, 2 * spent)
            rows[key] = (keep, lease.unspent - keep)
            if lease.unspent > keep:
                trims[key] = _Trim(lease.reported, keep, lease.unspent - keep)
            lease.unspent = keep  # a lease kept at 0 is dropped once the report succeeds
        credit = {key: c.unwritten for key, c in here.credit.items() if c.unwritten}
        for key, written in credit.items():
            unspent, given_back = rows.get(key, (0, 0))
            rows[key] = (unspent, given_back - written)
        return rows, credit, trims

    def _settle(self, here: _Process, conn: psycopg.Connection[Any] | None) -> None:
        """Settle the grants and reports whose answer was lost (caller holds
        ``here.io_lock``)."""
        self._settle_grants(here, conn)
        self._settle_reports(here, conn)

    def _settle_reports(self, here: _Process, conn: psycopg.Connection[Any] | None) -> None:
        with here.lock:
            trims = dict(here.unanswered)
        if not trims:
            return
        keys = sorted(trims)
        params = (
            here.holder, [k[0] for k in keys], [k[1] for k in keys],
            [trims[k].expected for k in keys], [trims[k].keep for k in keys],
            [trims[k].given_back for k in keys],
        )  # fmt: skip
        if conn is None:
            self._call(here, "settle", _SETTLE_REPORTS, params)
        else:
            self._count("settle")
            conn.execute(_SETTLE_REPORTS, params)
        with here.lock:
            for key, trim in trims.items():
                del here.unanswered[key]
                lease = here.leases.get(key)
                if lease is not None:  # the database has its trimmed unspent now
                    lease.reported = trim.keep
                    if not trim.keep and not lease.unspent:
                        del here.leases[key]

    def _settle_grants(self, here: _Process, conn: psycopg.Connection[Any] | None) -> None:
        with here.lock:
            doubts = dict(here.doubts)
        if not doubts:
            return
        keys = sorted(doubts)
        params = (
            here.holder, [k[0] for k in keys], [k[1] for k in keys],
            [doubts[k].grant_id for k in keys], [doubts[k].returned for k in keys],
        )  # fmt: skip
        if conn is None:
            self._call(here, "settle", _SETTLE, params)
        else:
            self._count("settle")
            conn.execute(_SETTLE, params)
        with here.lock:
            for key, doubt in doubts.items():
                if here.doubts.get(key) is doubt:
                    del here.doubts[key]

    # -- outages ----------------------------------------------------------------------------

    def _serve_on_credit(self, here: _Process, key: Key, requested: int, hard_limit: int) -> int:
        """The lease first, then credit (caller holds ``here.lock``)."""
        lease = here.leases.get(key)
        from_lease = min(requested, lease.unspent) if lease is not None else 0
        if lease is not None:
            lease.unspent -= from_lease
        credit = here.credit.get(key)
        if credit is None:
            # At least what a grant would have leased (at most 1 % of what remains, none
            # within LEASE_FLOOR of the threshold, so this never adds to the overshoot bound):
            # an organization far from its threshold keeps being served through an outage.
            known_remaining = hard_limit - here.known_usage.get(key, 0)
            allowance = max(
                self._options.outage_allowance, leasing.lease_size(known_remaining, MAX_LEASE)
            )
            credit = here.credit[key] = _Credit(max(0, min(allowance, known_remaining)))
        from_credit = min(requested - from_lease, credit.cap - credit.used)
        credit.used += from_credit
        credit.unwritten += from_credit
        if from_credit and self._metrics is not None:
            self._metrics.meter_credit.inc(from_credit)
        return from_lease + from_credit

    def _trip(self, here: _Process, exc: BaseException) -> None:
        with here.lock:
            if here.down or self._closed.is_set():
                return
            here.down = True
        log.warning(
            "PostgreSQL unreachable: metering on leases and credit", extra={"error": str(exc)}
        )
        if self._metrics is not None:
            self._metrics.meter_outage.set(1)
        threading.Thread(
            target=self._reconnect, args=(here,), name="flagsight-meter-reconnect", daemon=True
        ).start()

    def _reconnect(self, here: _Process) -> None:
        """Until the database answers: then the schema, the credit written back, a fresh
        pool, and the breaker closed."""
        self._drop_pool(here)
        while not self._closed.wait(self._options.retry_interval_s):
            try:
                with psycopg.connect(self._url, **self._connect_kwargs()) as conn:
                    ensure_schema(conn)
                    while not self._reconciled(here, conn):
                        pass
                self._pool(here).wait(timeout=2.0)
            except psycopg.Error as exc:
                log.debug("PostgreSQL still unreachable", extra={"error": str(exc)})
                self._drop_pool(here)  # not one left backing off: a fresh one next time
                continue
            with here.lock:
                if here.doubts or here.unanswered or any(c.unwritten for c in here.credit.values()):
                    continue  # served on credit while the pool opened: write it too
                here.credit.clear()  # the next outage has its own allowance
                here.down = False
            log.warning("PostgreSQL reachable again: metering resumed")
            if self._metrics is not None:
                self._metrics.meter_outage.set(0)
            return

    def _drop_pool(self, here: _Process) -> None:
        pool, here.pool = here.pool, None
        if pool is not None:
            pool.close(timeout=1.0)

    def _reconciled(self, here: _Process, conn: psycopg.Connection[Any]) -> bool:
        self._report(here, release=False, conn=conn)
        with here.lock:
            unsettled = here.doubts or here.unanswered
            return not unsettled and not any(c.unwritten for c in here.credit.values())

    def _last_write_back(self, here: _Process) -> None:
        try:
            with psycopg.connect(self._url, **self._connect_kwargs()) as conn:
                self._report(here, release=True, conn=conn)
        except psycopg.Error:
            lost = {f"{o}/{m}": c.unwritten for (o, m), c in here.credit.items() if c.unwritten}
            log.error("meter closed during an outage: credit not counted", extra={"lost": lost})


def meter_for_database(
    url: str,
    metrics: Metrics | None = None,
    options: PostgresMeterOptions = PostgresMeterOptions(),  # noqa: B008 - frozen
) -> PostgresMeter:
    """The meter ``api/server/wiring.py`` builds when ``settings.database_url`` is set."""
    return PostgresMeter(url, metrics=metrics, options=options)


def _forget_in_child(meter: weakref.ref[PostgresMeter]) -> Callable[[], None]:
    """The fork hook of one meter; weak, so a meter that is gone is not kept for it."""

    def forget() -> None:
        alive = meter()
        if alive is not None:
            alive._forget_parent()

    return forget
