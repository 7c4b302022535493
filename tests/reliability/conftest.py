"""Reliability fixtures: a real ``flagsight serve`` with every surface, and its tenants."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, requests_caller
from tests.support.server import GunicornServer


class FullGunicornServer(GunicornServer):
    """``flagsight serve`` loading ``tests.reliability.asgi_app`` (see ``serve.py``)."""

    def start(self, timeout_s: float = 30.0) -> GunicornServer:
        real_popen = subprocess.Popen

        def popen(argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
            assert argv[1:4] == ["-m", "api.cli", "serve"], argv
            command = [sys.executable, "-m", "tests.reliability.serve", *argv[4:]]
            return real_popen(command, **kwargs)  # type: ignore[call-overload]

        subprocess.Popen = popen  # type: ignore[assignment,misc]
        try:
            return super().start(timeout_s)
        finally:
            subprocess.Popen = real_popen  # type: ignore[misc]


@pytest.fixture(scope="module")
def full_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GunicornServer]:
    """One server per test module; each test makes its own tenants."""
    server = FullGunicornServer(
        tmp_path_factory.mktemp("reliability") / "data", admin_token=ADMIN_TOKEN
    ).start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def full_admin(full_server: GunicornServer) -> Admin:
    return Admin(requests_caller(full_server.url), ADMIN_TOKEN)
