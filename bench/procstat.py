"""Process figures from ``/proc``: CPU seconds and resident memory of a server's processes;
and where their threads may run."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds used so far by ``pids`` (processes that vanished count 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
    return total / _TICKS


def rss_bytes(pid: int) -> int:
    """Resident set size (``VmRSS``): private and shared pages, the figure ``ps`` shows."""
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except OSError:
        return 0
    return pages * _PAGE


def pss_bytes(pid: int) -> int:
    """Proportional set size: shared pages divided among the processes that map them."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def wait_idle(
    pids: list[int], *, threshold: float = 0.05, window_s: float = 0.5, timeout_s: float = 30.0
) -> float:
    """Wait until ``pids`` use under ``threshold`` of one core over ``window_s``; the wait."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        before = cpu_seconds(pids)
        time.sleep(window_s)
        if cpu_seconds(pids) - before < threshold * window_s:
            break
    return time.monotonic() - started


def _pin(pids: list[int], cpus: set[int]) -> None:
    """Every thread of ``pids`` onto ``cpus`` (``sched_setaffinity`` of a pid moves only its
    first thread); what vanished meanwhile is skipped."""
    for pid in pids:
        try:
            threads = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in threads:
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:
                continue


@contextmanager
def apart(server_pids: list[int]) -> Iterator[bool]:
    """This process on the first core and ``server_pids`` on the others, for the while; True
    when the machine has cores to part (one core: nothing moves, False).

    For what is measured inside this process, such as an SDK's local evaluation, as it runs
    in an application whose service is another machine: on this 2-core machine the server's
    work on the SDK's reports otherwise shared the measured core, and every call made
    meanwhile took about twice as long (``bench/history.md``, "Local evaluate's tail")."""
    every = os.sched_getaffinity(0)
    if len(every) < 2:
        yield False
        return
    mine = min(every)
    _pin([os.getpid()], {mine})
    _pin(server_pids, every - {mine})
    try:
        yield True
    finally:
        _pin([os.getpid()], every)
        _pin(server_pids, every)


class RssSampler:
    """Samples the largest RSS of some processes every ``interval_s`` in a thread."""

    def __init__(self, pids: list[int], interval_s: float = 0.005):
        self._pids = pids
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.peak: dict[int, int] = {pid: rss_bytes(pid) for pid in pids}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            for pid in self._pids:
                self.peak[pid] = max(self.peak[pid], rss_bytes(pid))
