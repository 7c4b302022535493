"""A real ``flagsight serve`` shared by one test module (each test makes its own tenant)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest

from api.eventlog.reading import read_events
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, requests_caller
from tests.support.server import GunicornServer

CONFIG_PROPAGATION_S = 1.1  # contract 2: an admin change is used by every worker within 1 s


@pytest.fixture(scope="module")
def sdk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GunicornServer]:
    server = GunicornServer(
        tmp_path_factory.mktemp("sdk") / "data", admin_token=ADMIN_TOKEN
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sdk_admin(sdk_server: GunicornServer) -> Admin:
    return Admin(requests_caller(sdk_server.url), ADMIN_TOKEN)


def settle() -> None:
    """Wait until every worker serves the admin changes just made."""
    time.sleep(CONFIG_PROPAGATION_S)


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
