"""OFREP fixtures: the in-process app and one real ``flagsight serve`` per test module."""

from __future__ import annotations

from collections.abc import Iterator

import falcon.testing
import pytest

from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, requests_caller
from tests.support.server import GunicornServer


@pytest.fixture
def ofrep_client(client: falcon.testing.TestClient) -> falcon.testing.TestClient:
    """``create_app`` serves OFREP (``add_ofrep_routes``)."""
    return client


@pytest.fixture
def ofrep_admin(admin: Admin) -> Admin:
    return admin


@pytest.fixture(scope="module")
def ofrep_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GunicornServer]:
    """The real ``flagsight serve``, shared by a module: each test makes its own tenant."""
    server = GunicornServer(
        tmp_path_factory.mktemp("ofrep") / "data", admin_token=ADMIN_TOKEN
    ).start()
    yield server
    # SIGKILL: a graceful stop waits out gunicorn's graceful_timeout (20 s) for the providers'
    # keep-alive connections, and nothing here depends on a clean shutdown.
    server.kill()


@pytest.fixture(scope="module")
def ofrep_server_admin(ofrep_server: GunicornServer) -> Admin:
    return Admin(requests_caller(ofrep_server.url), ADMIN_TOKEN)
