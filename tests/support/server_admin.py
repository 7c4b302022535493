"""The admin API of a test module's real ``flagsight serve`` (the ``dashboard_server`` fixture
of ``tests/dashboard/conftest.py``): a module-scoped ``admin`` fixture for the browser tests,
which set up what their pages show through the API itself.

A test module takes it by importing it (``from tests.support.server_admin import
admin_fixture``): pytest finds fixtures among a module's names, and this one is named ``admin``
(the function's own name differs, so a test's ``admin`` parameter shadows no import).
"""

from __future__ import annotations

import pytest

from tests.support.admin import Admin, requests_caller
from tests.support.server import GunicornServer


@pytest.fixture(scope="module", name="admin")
def admin_fixture(dashboard_server: GunicornServer) -> Admin:
    """The server's admin API, signed with the token the server was started with."""
    return Admin(requests_caller(dashboard_server.url), dashboard_server.admin_token)
