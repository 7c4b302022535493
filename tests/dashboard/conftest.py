"""Dashboard fixtures: the in-process app with the dashboard, a signed-in client over it, and
a real ``flagsight serve`` that serves the dashboard, and one headless Chromium per module, for
the browser tests."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import falcon.testing
import pytest
import requests
from playwright.sync_api import Browser, sync_playwright

from api.serving.services import Services
from api.web.app import create_app
from api.web.dashboard.routes import add_dashboard_routes
from api.web.dashboard.sessions import SESSION_COOKIE, SIGNIN_COOKIE
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, testclient_caller
from tests.support.needs import CHROMIUM
from tests.support.server import GunicornServer

FORM = "application/x-www-form-urlencoded"
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
"""What a browser asks for when it follows a link or posts a form."""
_CSRF = re.compile(r'name="csrf_token" value="([^"]*)"')
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip


@pytest.fixture
def screens(tmp_path: Path) -> Path:
    """Where a browser test saves its screenshots: ``$FLAGSIGHT_SCREENSHOTS`` when it is set
    (to look at them), else the test's temporary folder."""
    folder = Path(os.environ.get("FLAGSIGHT_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, for one test module (each opens its own contexts)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def dash_app(services: Services) -> falcon.testing.TestClient:
    """``create_app`` plus ``add_dashboard_routes`` (adding a route twice is harmless)."""
    app = create_app(services)
    add_dashboard_routes(app, services)
    return falcon.testing.TestClient(app)


@pytest.fixture
def dash_admin(dash_app: falcon.testing.TestClient) -> Admin:
    return Admin(testclient_caller(dash_app), ADMIN_TOKEN)


@dataclass
class DashClient:
    """A person at the dashboard: cookies kept between requests, forms posted as a browser."""

    client: falcon.testing.TestClient
    cookies: dict[str, str] = field(default_factory=dict)
    csrf: str = ""

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        cookie = "; ".join(f"{k}={v}" for k, v in self.cookies.items() if v)
        return {"Accept": BROWSER_ACCEPT, **({"Cookie": cookie} if cookie else {}), **(extra or {})}

    def _keep(self, result: falcon.testing.Result) -> falcon.testing.Result:
        for name, cookie in result.cookies.items():
            self.cookies[name] = cookie.value
        if match := _CSRF.search(result.text or ""):
            self.csrf = match.group(1)
        return result

    def get(self, path: str) -> falcon.testing.Result:
        return self._keep(self.client.simulate_get(path, headers=self._headers()))

    def post(
        self, path: str, fields: list[tuple[str, str]] | dict[str, str], *, csrf: bool = True
    ) -> falcon.testing.Result:
        pairs = list(fields.items()) if isinstance(fields, dict) else list(fields)
        if csrf:
            pairs.append(("csrf_token", self.csrf))
        return self._keep(
            self.client.simulate_post(
                path, body=urlencode(pairs), headers=self._headers({"Content-Type": FORM})
            )
        )

    def sign_in(self, token: str = ADMIN_TOKEN) -> falcon.testing.Result:
        self.get("/dashboard/sign-in")
        assert self.cookies.get(SIGNIN_COOKIE)
        return self.post("/dashboard/sign-in", {"admin_token": token})


@pytest.fixture
def visitor(dash_app: falcon.testing.TestClient) -> DashClient:
    """Someone who has not signed in."""
    return DashClient(dash_app)


@pytest.fixture
def person(dash_app: falcon.testing.TestClient) -> DashClient:
    """Someone signed in with the admin token."""
    person = DashClient(dash_app)
    result = person.sign_in()
    assert result.status_code == 303 and person.cookies.get(SESSION_COOKIE), result.text
    person.get("/dashboard/organizations")  # picks up the session's CSRF token
    return person


@pytest.fixture(scope="module")
def dashboard_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GunicornServer]:
    """The real ``flagsight serve``, one per test module."""
    data_dir = tmp_path_factory.mktemp("dashboard-server") / "data"
    server = GunicornServer(data_dir, admin_token=ADMIN_TOKEN).start()
    assert requests.get(f"{server.url}/dashboard/sign-in", timeout=5).status_code == 200
    yield server
    server.stop()
