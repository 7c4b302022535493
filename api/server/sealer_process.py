"""The sealer process: seals the segments that the workers of one server hand off.

``flagsight serve`` starts one next to the gunicorn workers (a master hook in
``api/server/gunicorn_conf.py``). It holds an exclusive ``flock`` on ``run/sealer.lock`` for its whole
life; while it does, workers fsync and close each rotated segment instead of sealing it, and
this process seals every such orphan within a tick. pyarrow (and the pandas it imports when
converting) thus lives in one process instead of in every worker.

On SIGTERM (the master's ``on_exit``, after the workers have stopped and handed everything
off), or when its parent is gone, it makes a last pass, releases the lock and makes another
(for a hand-off that raced with the release), then exits. SIGINT is ignored: Ctrl-C reaches
the whole process group, and the master stops this process after its workers. If it dies, workers seal
in-process again (see ``SegmentedEventLog``), and any process starting later recovers what is
left: no segment depends on this process being alive.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from api.backends import sink_factory
from api.eventlog.sealer import Backoff, Sealer
from api.eventlog.sealer_lock import SealerLock, sealer_lock_path
from api.eventlog.segmented import MAX_TICK_S, TICK_FRACTION
from api.infra.processes import pid_alive
from api.observability.logging import configure_logging
from api.observability.metrics import Metrics
from api.settings import Settings

log = logging.getLogger("flagsight.sealer")


def run(settings: Settings, stop: threading.Event, master_pid: int | None = None) -> None:
    """Seal orphans every tick until ``stop`` is set or ``master_pid`` (default: the parent)
    is gone."""
    sealer = Sealer(
        settings.wal_dir,
        sink_factory(settings),
        seal_interval_s=settings.seal_interval_s,
        metrics=Metrics(),
        backoff=Backoff(cap_s=settings.seal_retry_cap_s),
    )
    lock = SealerLock(sealer_lock_path(settings))
    lock.acquire()
    master_pid = master_pid or os.getppid()
    tick = min(MAX_TICK_S, settings.seal_interval_s * TICK_FRACTION)
    log.info("sealer started", extra={"wal_dir": str(settings.wal_dir)})
    try:
        while True:
            _pass(sealer)
            if stop.wait(tick) or not pid_alive(master_pid):
                break
        _pass(sealer)  # whatever the workers handed off while stopping
    finally:
        lock.release()  # from now on, workers still running seal in-process
    _pass(sealer)  # a hand-off that raced with the release
    log.info("sealer stopped")


def _pass(sealer: Sealer) -> None:
    try:
        sealer.recover_orphans()
    except Exception:  # the sealer must outlive any one failure; the next pass retries
        log.exception("sealing pass failed")


def main() -> None:
    configure_logging()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the master, which stops us
    run(Settings.from_env(), stop, int(sys.argv[1]) if len(sys.argv) > 1 else None)


if __name__ == "__main__":
    main()
