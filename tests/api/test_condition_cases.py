"""The language-neutral condition cases (``tests/cases/conditions.json``) against the service:
each case's condition is the one condition of a segment put through the real admin API, named
by a flag's SEGMENT rule, and the case's user is evaluated through the service, single and
bulk; through ``POST /v1/evaluate`` itself for every case that needs no attributes, and for
every case once that door takes attributes (contract 12)."""

from __future__ import annotations

from typing import Any

import pytest
from flagsight_core import RESULTS

from api.eventlog.schema import SOURCE_EVALUATE, SOURCE_EVALUATE_BULK
from api.serving.evaluations import EvaluationServer
from tests.support.admin import Admin, Tenant
from tests.support.condition_cases import HOLDS, answer, key, put_cases


def served(result: Any) -> tuple[bool, str | None]:
    return result.value, result.matched_rule_type


@pytest.fixture
def cases_tenant(admin: Admin, services) -> Tenant:
    tenant = admin.tenant()
    put_cases(admin, tenant)
    services.config.refresh()
    return tenant


def test_every_case_through_the_service_single_and_bulk(services, cases_tenant) -> None:
    server = EvaluationServer(services)
    caller = services.config.caller(cases_tenant.api_key)
    environment = caller.environment
    for index, case in enumerate(HOLDS):
        user, attributes = case["userIdentifier"], case["attributes"]
        code, _prefix = server.serve_one(
            caller, environment, key(index), user, sdk=None, source=SOURCE_EVALUATE,
            attributes=attributes,
        )  # fmt: skip
        assert served(RESULTS[code]) == answer(case), case["name"]
        bulk = server.serve(
            caller.key, environment, key(index), [user, "someone-else"], sdk=None,
            source=SOURCE_EVALUATE_BULK, attributes={user: attributes},
        )  # fmt: skip
        assert served(bulk.results[0]) == answer(case), case["name"]


def evaluate(client, tenant: Tenant, flag: str, user: str, attributes: dict | None = None):
    body: dict[str, Any] = {"flagKey": flag, "userIdentifier": user}
    if attributes is not None:
        body["attributes"] = attributes
    answer = client.simulate_post(
        "/v1/evaluate", json=body, headers={"Authorization": f"ApiKey {tenant.api_key}"}
    )
    assert answer.status_code == 200, answer.text
    return answer.json["value"], answer.json["matchedRuleType"]


def test_every_case_that_needs_no_attributes_through_v1(client, cases_tenant) -> None:
    """Conditions on ``userIdentifier``, and on attributes the user lacks: the plain single
    evaluate, which the native path serves (a SEGMENT rule whose segment has conditions)."""
    asked = [(i, c) for i, c in enumerate(HOLDS) if not c["attributes"]]
    assert len(asked) > 10
    for index, case in asked:
        assert evaluate(client, cases_tenant, key(index), case["userIdentifier"]) == answer(case), (
            case["name"]
        )


def door_takes_attributes(client, tenant: Tenant) -> bool:
    """Whether ``/v1/evaluate`` reads ``attributes`` (contract 12 refuses a reserved name)."""
    answer = client.simulate_post(
        "/v1/evaluate",
        json={"flagKey": "f", "userIdentifier": "u", "attributes": {"userIdentifier": "x"}},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
    )
    return answer.status_code == 400


def test_every_case_through_v1_with_its_attributes(client, cases_tenant) -> None:
    if not door_takes_attributes(client, cases_tenant):
        pytest.skip("POST /v1/evaluate does not take attributes yet")
    for index, case in enumerate(HOLDS):
        got = evaluate(client, cases_tenant, key(index), case["userIdentifier"], case["attributes"])
        assert got == answer(case), case["name"]
