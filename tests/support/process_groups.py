"""Every process group the suite starts is ended when the session ends, pass or fail.

Servers, sealers, Dagster and ``make run`` are started in sessions of their own
(``start_new_session=True``), so that a test can stop each whole, workers included. A test that
fails before it stops one (a server that never became ready, an assertion before the
``finally``) left it running after ``make test`` ended (four API servers and a Dagster group
found eight minutes later). ``track`` records the group of every such ``Popen`` in this
process; ``end_all`` kills each group still there, from ``pytest_sessionfinish``, in every
xdist worker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Any

_started: set[int] = set()
_popen_init = subprocess.Popen.__init__


def _tracked_init(self: subprocess.Popen, *args: Any, **kwargs: Any) -> None:
    _popen_init(self, *args, **kwargs)
    if kwargs.get("start_new_session") or kwargs.get("process_group") == 0:
        _started.add(self.pid)  # the leader of a new group: its pid is the group's id


def track() -> None:
    """Record the group of every ``Popen`` that starts one, from now on, in this process."""
    subprocess.Popen.__init__ = _tracked_init  # type: ignore[method-assign]


def started() -> frozenset[int]:
    """The groups recorded so far (ended or not)."""
    return frozenset(_started)


def end(groups: set[int] | frozenset[int]) -> list[int]:
    """SIGKILL each of ``groups`` that still has a process; those ended."""
    ended = []
    for group in sorted(groups):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
            ended.append(group)
        _started.discard(group)
    return ended


def end_all() -> list[int]:
    """``end`` every recorded group."""
    return end(started())
