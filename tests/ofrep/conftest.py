"""OFREP fixtures: the in-process app with the OFREP routes, and a real server that has them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import falcon.testing
import pytest
import requests

from api.app import create_app
from api.resources.ofrep import add_ofrep_routes
from api.services import Services
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, requests_caller, testclient_caller
from tests.support.server import GunicornServer


@pytest.fixture
def ofrep_client(services: Services) -> falcon.testing.TestClient:
    """``create_app`` plus ``add_ofrep_routes`` (adding a route twice is harmless)."""
    app = create_app(services)
    add_ofrep_routes(app, services)
    return falcon.testing.TestClient(app)


@pytest.fixture
def ofrep_admin(ofrep_client: falcon.testing.TestClient) -> Admin:
    return Admin(testclient_caller(ofrep_client), ADMIN_TOKEN)


class OfrepGunicornServer(GunicornServer):
    """``flagsight serve`` with ``tests.ofrep.asgi_app`` (see ``tests/ofrep/serve.py``)."""

    def start(self, timeout_s: float = 30.0) -> GunicornServer:
        real_popen = subprocess.Popen

        def popen(argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
            assert argv[1:4] == ["-m", "api.cli", "serve"], argv
            return real_popen([sys.executable, "-m", "tests.ofrep.serve", *argv[4:]], **kwargs)  # type: ignore[call-overload]

        subprocess.Popen = popen  # type: ignore[assignment,misc]
        try:
            return super().start(timeout_s)
        finally:
            subprocess.Popen = real_popen  # type: ignore[misc]


def _serves_ofrep(server: GunicornServer) -> bool:
    return (
        requests.post(f"{server.url}/ofrep/v1/evaluate/flags", json={}, timeout=5).status_code
        != 404
    )


@pytest.fixture(scope="module")
def ofrep_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GunicornServer]:
    """The real ``flagsight serve`` when ``api/app.py`` wires OFREP; until then the same
    command loading ``tests.ofrep.asgi_app``, which adds the routes. One per test module:
    each test makes its own tenant."""
    base = tmp_path_factory.mktemp("ofrep")
    probe = GunicornServer(base / "probe", admin_token=ADMIN_TOKEN).start()
    wired = _serves_ofrep(probe)
    probe.kill()
    server_class = GunicornServer if wired else OfrepGunicornServer
    server = server_class(base / "data", admin_token=ADMIN_TOKEN).start()
    assert _serves_ofrep(server), server.log_path.read_text()[-3000:]
    yield server
    # SIGKILL: a graceful stop waits out gunicorn's graceful_timeout (20 s) for the providers'
    # keep-alive connections, and nothing here depends on a clean shutdown.
    server.kill()


@pytest.fixture(scope="module")
def ofrep_server_admin(ofrep_server: GunicornServer) -> Admin:
    return Admin(requests_caller(ofrep_server.url), ADMIN_TOKEN)
