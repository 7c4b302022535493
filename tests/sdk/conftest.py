"""Helpers for SDK tests against a real server (the `module_server` fixture, tests/conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa

from api.eventlog.reading import read_events
from tests.support.server import GunicornServer


def wait_for_events(
    server: GunicornServer,
    event_type: str,
    keep: Callable[[pa.Table], pa.Table],
    count: int,
    timeout_s: float = 30.0,
) -> pa.Table:
    """The sealed events of one type that ``keep`` selects, once there are ``count`` of them."""
    deadline = time.monotonic() + timeout_s
    while True:
        table = keep(read_events(str(server.data_dir / "events"), event_type))
        if table.num_rows >= count or time.monotonic() > deadline:
            return table
        time.sleep(0.2)
