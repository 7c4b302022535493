"""An admin-only ASGI app over a temporary data directory, and a client that checks every
answer against the admin OpenAPI description (status documented, body valid)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import falcon.asgi
import falcon.testing
import pytest
from flagsight_core.ids import EvaluationIdIssuer

from api.controlplane.cache import ConfigCache
from api.controlplane.sqlite_store import SqliteControlPlaneStore
from api.controlplane.store import ControlPlaneStore
from api.metering.mmap_meter import MmapMeter
from api.observability.metrics import Metrics
from api.serving.services import Services
from api.settings import Settings
from api.web.admin.routes import add_admin_routes
from api.web.errors import serialize_error
from tests.support.openapi import OpenApiChecker

ADMIN_TOKEN = "admin-test-token-0123456789"
NOW = 1_741_996_800.0  # 2025-03-15T00:00:00Z
UNAUTHORIZED = {
    "status": 401,
    "error": "Unauthorized",
    "message": "Missing or invalid Authorization header",
}
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")

_CHECKER = OpenApiChecker()


def check_against_openapi(path: str, method: str, status: int, body: Any, raw: bytes) -> None:
    _CHECKER.check(path, method, status, body, raw)


@dataclass
class Answer:
    status: int
    body: Any
    headers: Any


class AdminClient:
    """Calls the admin API with the admin token (unless told otherwise) and checks answers."""

    def __init__(self, client: falcon.testing.TestClient, services: Services):
        self.client = client
        self.services = services

    def call(
        self,
        method: str,
        path: str,
        json: Any = None,
        *,
        token: str | None = ADMIN_TOKEN,
        headers: dict[str, str] | None = None,
        body: bytes | str | None = None,
    ) -> Answer:
        all_headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        all_headers.update(headers or {})
        result = self.client.simulate_request(
            method, "/admin/v1" + path, json=json, body=body, headers=all_headers
        )
        parsed = result.json if result.content else None
        check_against_openapi(
            "/admin/v1" + path, method, result.status_code, parsed, result.content
        )
        return Answer(result.status_code, parsed, result.headers)

    def get(self, path: str, **kw: Any) -> Answer:
        return self.call("GET", path, **kw)

    def post(self, path: str, json: Any = None, **kw: Any) -> Answer:
        return self.call("POST", path, json, **kw)

    def put(self, path: str, json: Any = None, **kw: Any) -> Answer:
        return self.call("PUT", path, json, **kw)

    def patch(self, path: str, json: Any = None, **kw: Any) -> Answer:
        return self.call("PATCH", path, json, **kw)

    def delete(self, path: str, **kw: Any) -> Answer:
        return self.call("DELETE", path, **kw)

    # set-up shortcuts, each asserting success
    def organization(self, plan: str = "pro", **extra: Any) -> dict[str, Any]:
        answer = self.post("/organizations", {"name": "Acme", "plan": plan, **extra})
        assert answer.status == 201, answer
        return answer.body

    def environment(self, org_id: str, key: str = "production", **extra: Any) -> dict[str, Any]:
        answer = self.post(f"/organizations/{org_id}/environments", {"key": key, **extra})
        assert answer.status == 201, answer
        return answer.body


def build_services(settings: Settings, store: ControlPlaneStore | None = None) -> Services:
    """Over ``store``, by default the SQLite file of ``settings``."""
    store = store or SqliteControlPlaneStore(settings.control_plane_path)
    return Services(
        settings=settings,
        store=store,
        config=ConfigCache(store, poll_interval_s=0.05),
        meter=MmapMeter(settings.meter_path),
        event_log=object(),  # type: ignore[arg-type]  # the admin API never logs events
        ids=EvaluationIdIssuer(store.signing_key()),
        metrics=Metrics(),
        clock=lambda: NOW,
    )


def build_app(services: Services) -> falcon.asgi.App:
    app = falcon.asgi.App()
    app.set_error_serializer(serialize_error)
    add_admin_routes(app, services)
    return app


@pytest.fixture
def make_admin(tmp_path: Path) -> Iterator[Callable[..., AdminClient]]:
    """``make_admin(**settings)``: a fresh app and client; each call gets its own data dir."""
    made: list[Services] = []

    def make(**overrides: Any) -> AdminClient:
        # The tests' webhook receivers are on loopback; the refusal is tested with False.
        options: dict[str, Any] = {
            "admin_token": ADMIN_TOKEN, "webhook_allow_private": True, **overrides,
        }  # fmt: skip
        settings = Settings(data_dir=tmp_path / f"data{len(made)}", **options)
        services = build_services(settings)
        made.append(services)
        return AdminClient(falcon.testing.TestClient(build_app(services)), services)

    yield make
    for services in made:
        services.config.stop()
        services.meter.close()
        services.store.close()


@pytest.fixture
def admin_api(make_admin: Callable[..., AdminClient]) -> AdminClient:
    return make_admin()


@pytest.fixture
def org(admin_api: AdminClient) -> dict[str, Any]:
    return admin_api.organization()


@pytest.fixture
def env(admin_api: AdminClient, org: dict[str, Any]) -> dict[str, Any]:
    return admin_api.environment(org["id"], insightsEnabled=True)
