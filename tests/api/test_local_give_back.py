"""Quota given back by a local client (contract section 4), on both meters: once, never more
than the grant minus what was reported under it, only a grant's ids, and refused (503), not
dropped, when it cannot be recorded."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import falcon.testing
import pytest

from api.metering.meter import month_of
from api.metering.postgres_meter import PostgresMeter
from api.server.lifecycle import start_services, stop_services
from api.server.wiring import build_services
from api.serving.services import Services
from api.settings import Settings
from api.web.app import create_asgi_app
from api.web.usage_answer import UNKNOWN_WHILE_CUT_OFF
from devtools.engines.postgres import PostgresCluster
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, Tenant
from tests.support.admin import testclient_caller as caller_of
from tests.support.engines import postgres_session

FREE_HARD_THRESHOLD = 11_000


@pytest.fixture(params=["file", "postgres"])
def meter_services(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Services]:
    """The services on the memory-mapped meter and SQLite, or on PostgreSQL for both."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    settings = Settings(data_dir=tmp_path / "data", admin_token=ADMIN_TOKEN, database_url=url)
    services = build_services(settings)
    threads = start_services(services)
    yield services
    stop_services(services, threads)


@pytest.fixture
def client(meter_services: Services) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(create_asgi_app(meter_services))


@pytest.fixture
def free(client: falcon.testing.TestClient, meter_services: Services) -> Tenant:
    admin = Admin(caller_of(client), ADMIN_TOKEN)
    tenant = admin.tenant(plan="free")
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC", "value": True}])
    meter_services.config.refresh()
    return tenant


def post(client: falcon.testing.TestClient, tenant: Tenant, path: str, body: dict):
    return client.simulate_post(
        path, json=body, headers={"Authorization": f"ApiKey {tenant.api_key}"}
    )


def usage(services: Services, tenant: Tenant) -> int:
    return services.meter.usage(tenant.organization_id, month_of(time.time()))


def row(evaluation_id: str) -> list:
    return [evaluation_id, int(time.time() * 1000), "f", "u", True, "STATIC", None, 0, None, None]


def test_a_grant_given_back_again_and_again_lowers_usage_once(
    client, meter_services: Services, free: Tenant
) -> None:
    grant = post(client, free, "/v1/local/quota", {"want": 1_000}).json
    granted = grant["granted"]
    assert granted > 0 and usage(meter_services, free) == granted
    back = {"idPrefix": grant["idPrefix"], "unused": granted}
    assert post(client, free, "/v1/local/quota/return", back).json == {"returned": granted}
    assert usage(meter_services, free) == 0
    for _ in range(5):
        again = post(client, free, "/v1/local/quota/return", back)
        assert again.status_code == 400
        assert "given back already" in again.json["message"]
    assert usage(meter_services, free) == 0


def test_an_evaluate_answers_ids_neither_lower_usage_nor_pass_as_local(
    client, meter_services: Services, free: Tenant
) -> None:
    """The finding: a free plan served 32,000 while usage showed 9,000, by giving back bulk
    answers' id blocks. Now the hard threshold holds."""
    users = [f"u{i}" for i in range(10_000)]
    bulk = post(client, free, "/v1/evaluate/bulk", {"flagKey": "f", "userIdentifiers": users})
    prefix = bulk.json["u0"]["evaluationId"][:42]
    back = post(client, free, "/v1/local/quota/return", {"idPrefix": prefix, "unused": 10_000})
    assert back.status_code == 400
    assert "evaluate answer's, not a local grant's" in back.json["message"]
    reported = post(client, free, "/v1/local/report", {"evaluations": [row(prefix + "0001")]})
    assert reported.status_code == 400 and "not a local grant's" in reported.json["message"]
    assert usage(meter_services, free) == 10_000
    rest = post(client, free, "/v1/evaluate/bulk", {"flagKey": "f", "userIdentifiers": users})
    served = [a for a in rest.json.values() if a["error"] is None]
    assert len(served) == FREE_HARD_THRESHOLD - 10_000
    assert usage(meter_services, free) == FREE_HARD_THRESHOLD


def test_what_was_reported_bounds_the_give_back_and_ids_given_back_stay_unreported(
    client, meter_services: Services, free: Tenant
) -> None:
    grant = post(client, free, "/v1/local/quota", {"want": 1_000}).json
    prefix, granted = grant["idPrefix"], grant["granted"]
    assert granted >= 20
    rows = [row(f"{prefix}{i:04x}") for i in range(10)]
    assert post(client, free, "/v1/local/report", {"evaluations": rows}).json == {"accepted": 10}
    too_much = post(
        client, free, "/v1/local/quota/return", {"idPrefix": prefix, "unused": granted - 9}
    )
    assert too_much.status_code == 400
    assert f"at most {granted - 10} can be given back" in too_much.json["message"]
    assert usage(meter_services, free) == granted
    back = {"idPrefix": prefix, "unused": granted - 15}  # ids 15.. given back, 10..14 not used yet
    assert post(client, free, "/v1/local/quota/return", back).json == {"returned": granted - 15}
    assert usage(meter_services, free) == 15
    late = [row(f"{prefix}{i:04x}") for i in range(10, 15)]
    assert post(client, free, "/v1/local/report", {"evaluations": late}).json == {"accepted": 5}
    given_back = post(client, free, "/v1/local/report", {"evaluations": [row(f"{prefix}000f")]})
    assert given_back.status_code == 400
    assert "were given back" in given_back.json["message"]


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL of this test's own, to stop and start (the session's is shared)."""
    yield from postgres_session()


def test_a_give_back_the_meter_cannot_record_is_refused_and_made_on_retry(
    tmp_path: Path, own_cluster: PostgresCluster
) -> None:
    """The meter's database down (the control plane up, on SQLite): 503 and nothing recorded,
    so the same give-back succeeds once it is back. The finding: 200, and the quota lost."""
    settings = Settings(data_dir=tmp_path / "data", admin_token=ADMIN_TOKEN)
    services = build_services(settings)
    services.meter.close()
    services.meter = PostgresMeter(own_cluster.url)
    threads = start_services(services)
    try:
        client = falcon.testing.TestClient(create_asgi_app(services))
        admin = Admin(caller_of(client), ADMIN_TOKEN)
        tenant = admin.tenant(plan="free")
        services.config.refresh()
        grant = post(client, tenant, "/v1/local/quota", {"want": 1_000}).json
        back = {"idPrefix": grant["idPrefix"], "unused": grant["granted"]}
        own_cluster.stop()
        refused = post(client, tenant, "/v1/local/quota/return", back)
        assert refused.status_code == 503 and refused.headers.get("Retry-After")
        # The usage reads say they cannot know (the control plane up: only the meter is down).
        public = client.simulate_get(
            "/v1/usage", headers={"Authorization": f"ApiKey {tenant.api_key}"}
        )
        operator = client.simulate_get(
            f"/admin/v1/organizations/{tenant.organization_id}/usage",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        for read in (public, operator):
            assert read.status_code == 503 and read.headers.get("Retry-After")
            assert read.json["message"] == UNKNOWN_WHILE_CUT_OFF
        own_cluster.start()
        deadline = time.monotonic() + 60  # the meter reconnects within its retry interval
        answer = post(client, tenant, "/v1/local/quota/return", back)
        while answer.status_code == 503 and time.monotonic() < deadline:
            time.sleep(0.2)
            answer = post(client, tenant, "/v1/local/quota/return", back)
        assert answer.json == {"returned": grant["granted"]}
        assert usage(services, tenant) == 0
    finally:
        stop_services(services, threads)
