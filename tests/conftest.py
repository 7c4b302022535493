"""Fixtures shared by the whole suite: settings over a temporary data directory, an in-process
app (falcon.testing), a real gunicorn server, and tenants made through the admin API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import falcon.testing
import pytest
from hypothesis import settings as hypothesis_settings

from api.server.lifecycle import start_services, stop_services
from api.server.wiring import build_services
from api.serving.services import Services
from api.settings import Settings
from api.web.app import create_asgi_app
from devtools.engines.postgres import PostgresCluster
from devtools.engines.seaweedfs import SeaweedFS
from tests.support import process_groups
from tests.support.admin import Admin, Tenant, requests_caller, testclient_caller
from tests.support.engines import fresh_database, postgres_session, seaweedfs_for
from tests.support.scheduling import longest_first
from tests.support.server import GunicornServer

ADMIN_TOKEN = "test-admin-token-0123456789"

# No time limit per example: hypothesis's default (200 ms) fails on a loaded machine what is
# only slow there; speed is the bench's to measure.
hypothesis_settings.register_profile("flagsight", deadline=None)
hypothesis_settings.load_profile("flagsight")


process_groups.track()


@pytest.hookimpl(trylast=True)  # after the session's fixtures have stopped what they own
def pytest_sessionfinish(session: pytest.Session) -> None:
    """No server, sealer or Dagster left running, whatever the tests did (``process_groups``)."""
    process_groups.end_all()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first (``tests/support/scheduling.py`` says why)."""
    items[:] = longest_first(items)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        admin_token=ADMIN_TOKEN,
        seal_interval_s=1.0,
        config_poll_interval_s=0.1,
        webhook_allow_private=True,  # the tests' receivers are on loopback
    )


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    services = build_services(settings)
    housekeeping = start_services(services)
    yield services
    stop_services(services, housekeeping)


@pytest.fixture
def client(services: Services) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(create_asgi_app(services))


@pytest.fixture
def admin(client: falcon.testing.TestClient) -> Admin:
    return Admin(testclient_caller(client), ADMIN_TOKEN)


@pytest.fixture
def tenant(admin: Admin) -> Tenant:
    return admin.tenant()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GunicornServer]:
    srv = GunicornServer(tmp_path / "data", admin_token=ADMIN_TOKEN).start()
    yield srv
    srv.stop()


@pytest.fixture
def server_admin(server: GunicornServer) -> Admin:
    return Admin(requests_caller(server.url), ADMIN_TOKEN)


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GunicornServer]:
    """One real ``flagsight serve`` shared by a test module; each test makes its own tenant.

    Killed, not stopped, at the end: nothing here depends on a clean shutdown, and a graceful
    stop waits out clients' idle keep-alive connections."""
    srv = GunicornServer(
        tmp_path_factory.mktemp("server") / "data", admin_token=ADMIN_TOKEN
    ).start()
    yield srv
    srv.kill()


@pytest.fixture(scope="module")
def module_server_admin(module_server: GunicornServer) -> Admin:
    return Admin(requests_caller(module_server.url), ADMIN_TOKEN)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A private PostgreSQL 15 for the session, started only if a test asks for it."""
    yield from postgres_session()


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> str:
    """A fresh, empty database for one test."""
    return fresh_database(postgres_cluster)


@pytest.fixture(scope="module")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """A private SeaweedFS (S3 gateway) for a test module, with an empty bucket."""
    yield from seaweedfs_for(tmp_path_factory.mktemp("seaweedfs"))
