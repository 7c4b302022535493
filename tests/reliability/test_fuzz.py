"""Schemathesis over ``/openapi.json`` against a real ``flagsight serve``: every public, OFREP,
operations and admin operation; no 5xx and every response as the document describes it.

Bounded to run in ``make test``: one server for the module, a few derandomized examples per
operation. Path parameters are swapped for a real tenant's ids half of the time, so that the
generated bodies reach the handlers behind the 404s.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from api.jsonio import encode
from api.openapi.document import openapi_document
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin
from tests.support.server import GunicornServer

EXAMPLES_PER_OPERATION = 25

# Excluded check: a schema-valid body may still be refused with 400 for what a schema cannot
# say and the contract requires: an evaluationId this service did not issue, a rule naming a
# segment that does not exist, a custom limit on a plan other than enterprise. Every other
# default check runs: no 5xx, documented status codes, content types, headers and bodies, and
# schema-violating requests refused.


@dataclass(frozen=True)
class World:
    """A tenant with a flag, a segment and insights on, for the fuzzer to aim at."""

    api_key: str
    ids: dict[str, str]


@pytest.fixture(scope="module")
def world(module_server_admin: Admin) -> World:
    tenant = module_server_admin.tenant(plan="enterprise", limit=10**9, environment="fuzz")
    module_server_admin.segment(tenant.organization_id, "beta", ["u1", "u2"])
    module_server_admin.flag(tenant.environment_id, "f", [{"type": "SEGMENT", "segment": "beta"}])
    spare = module_server_admin.request(
        "POST", f"/environments/{tenant.environment_id}/api-keys", {"name": "spare"}, expect=201
    )
    time.sleep(1.2)  # every worker knows the new keys (contract: within a second)
    ids = {
        "orgId": tenant.organization_id,
        "envId": tenant.environment_id,
        "keyId": spare["id"],
        "segmentKey": "beta",
        "flagKey": "f",
        "key": "f",
    }
    return World(tenant.api_key, ids)


# Loaded when pytest collects the module, before any server exists (schemathesis' lazy
# ``from_fixture`` fails on this pytest); the first test shows the server serves this document.
schema = schemathesis.openapi.from_dict(openapi_document())


def test_the_server_serves_the_fuzzed_document(module_server: GunicornServer) -> None:
    served = requests.get(f"{module_server.url}/openapi.json", timeout=10).json()
    assert served == json.loads(encode(openapi_document()))
    assert any(path.startswith("/ofrep/") for path in served["paths"])
    assert any(path.startswith("/admin/") for path in served["paths"])


def negative(case: Any, location: str) -> bool:
    """Whether schemathesis made this part of the request invalid on purpose."""
    component = case.meta.components.get(location) if case.meta else None
    return component is not None and component.mode.value == "negative"


def aim(case: Any, world: World) -> None:
    """Replace each path parameter by the real one when its generated value hashes even
    (never one made invalid on purpose: the check expects it refused)."""
    if negative(case, "path"):
        return
    for name, value in (case.path_parameters or {}).items():
        digest = hashlib.blake2b(repr(value).encode(), digest_size=1).digest()[0]
        if name in world.ids and digest % 2 == 0:
            case.path_parameters[name] = world.ids[name]


def credentials(case: Any, world: World) -> dict[str, str]:
    """The tenant's API key or the admin token, unless the headers are negative on purpose."""
    path = case.operation.path
    if negative(case, "header"):
        return {}
    if path.startswith("/admin/"):
        return {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    if path.startswith(("/v1/", "/ofrep/")):
        return {"Authorization": f"ApiKey {world.api_key}"}
    return {}


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_documented(
    case: Any, module_server: GunicornServer, world: World
) -> None:
    aim(case, world)
    with requests.Session() as session:
        case.call_and_validate(
            base_url=module_server.url,
            session=session,
            headers=credentials(case, world),
            excluded_checks=[positive_data_acceptance],
            timeout=30,
        )


def test_an_integral_number_is_an_integer_limit(client: Any) -> None:
    """Fuzz finding: JSON Schema (and JSON) call 12073.0 an integer; the API refused it."""
    answer = client.simulate_post(
        "/admin/v1/organizations",
        json={"name": "n", "plan": "enterprise", "monthlyEvaluationLimit": 12073.0},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert answer.status_code == 201, answer.text
    assert answer.json["monthlyEvaluationLimit"] == 12073
    fraction = client.simulate_post(
        "/admin/v1/organizations",
        json={"name": "n", "plan": "enterprise", "monthlyEvaluationLimit": 12073.5},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert fraction.status_code == 400
