"""``attributes`` on ``POST /v1/evaluate`` and ``POST /v1/evaluate/bulk`` (contract 12):
served to the rules, per user in bulk, and refused with a 400 naming the field past any limit.

Through the app as a server runs it (``client``: the front, then Falcon), with a rule that
reads an attribute registered from here (``tests.support.attribute_rule``): no built-in rule
reads one yet.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import falcon.testing
import pytest

from api.serving.services import Services
from tests.api.test_serving import Recording
from tests.support import attribute_rule
from tests.support.admin import Admin, Tenant
from tests.support.attribute_rule import PLAN_IS_PRO, plan_is_pro
from tests.support.openapi import OpenApiChecker

SECRET = "value-never-echoed"
"""Put in the values of refused requests: no 400 may repeat it (only names are named)."""


@pytest.fixture(autouse=True)
def attribute_rule_registered() -> Iterator[None]:
    """Autouse, so set up first: registered before the services, forgotten after."""
    with attribute_rule.registered():
        yield


@pytest.fixture
def tenant(admin: Admin) -> Tenant:
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "pro", PLAN_IS_PRO)
    admin.flag(tenant.environment_id, "on", [{"type": "STATIC", "value": True}])
    return tenant


def evaluate(client: falcon.testing.TestClient, tenant: Tenant, body: dict[str, Any]) -> Any:
    return client.simulate_post(
        "/v1/evaluate", json=body, headers={"Authorization": f"ApiKey {tenant.api_key}"}
    )


def bulk(client: falcon.testing.TestClient, tenant: Tenant, body: dict[str, Any]) -> Any:
    return client.simulate_post(
        "/v1/evaluate/bulk", json=body, headers={"Authorization": f"ApiKey {tenant.api_key}"}
    )


def decided(answer: dict[str, Any]) -> tuple[bool, str | None]:
    return answer["value"], answer["matchedRuleType"]


ATTRIBUTES: list[dict[str, Any] | None] = [
    {"plan": "pro"},
    {"plan": "pro", "country": "DE", "seats": 12, "beta": True, "tags": ["a", "b"]},
    {"plan": "free"},
    {"plan": ["pro"]},  # an array is not the string
    {"Plan": "pro"},  # names are case-sensitive
    {},
    None,
]


@pytest.mark.parametrize("attributes", ATTRIBUTES, ids=json.dumps)
def test_a_single_evaluate_serves_the_rules_the_users_attributes(
    client: falcon.testing.TestClient, tenant: Tenant, attributes: dict[str, Any] | None
) -> None:
    body = {"flagKey": "pro", "userIdentifier": "u-1"}
    if attributes is not None:
        body["attributes"] = attributes
    answer = evaluate(client, tenant, body)
    assert answer.status_code == 200, answer.text
    assert decided(answer.json) == plan_is_pro(attributes)
    OpenApiChecker(client.simulate_get("/openapi.json").json).check(
        "/v1/evaluate", "POST", 200, answer.json, answer.content
    )


def test_null_attributes_are_none(client: falcon.testing.TestClient, tenant: Tenant) -> None:
    answer = evaluate(client, tenant, {"flagKey": "pro", "userIdentifier": "u", "attributes": None})
    assert decided(answer.json) == (False, "STATIC")


def test_bulk_serves_each_user_its_own_attributes(
    client: falcon.testing.TestClient, tenant: Tenant
) -> None:
    users = ["pro-1", "free-1", "none-1", "pro-2", "pro-1", "none-2", "odd-1"]
    attributes = {
        "pro-1": {"plan": "pro"},
        "free-1": {"plan": "free", "country": "FR"},
        "pro-2": {"plan": "pro", "tags": []},
        "odd-1": {"plan": ["pro", "free"]},
    }
    answer = bulk(client, tenant, {"flagKey": "pro", "userIdentifiers": users,
                                   "attributes": attributes})  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert list(answer.json) == list(dict.fromkeys(users))  # each user once, in order
    assert {user: decided(entry) for user, entry in answer.json.items()} == {
        user: plan_is_pro(attributes.get(user)) for user in users
    }
    OpenApiChecker(client.simulate_get("/openapi.json").json).check(
        "/v1/evaluate/bulk", "POST", 200, answer.json, answer.content
    )
    one_by_one = {
        user: decided(evaluate(client, tenant, {"flagKey": "pro", "userIdentifier": user,
                                                "attributes": attributes.get(user)}).json)
        for user in users
    }  # fmt: skip
    assert one_by_one == {user: decided(entry) for user, entry in answer.json.items()}


def test_bulk_without_attributes_or_with_none_for_anyone(
    client: falcon.testing.TestClient, tenant: Tenant
) -> None:
    for extra in ({}, {"attributes": None}, {"attributes": {}}):
        answer = bulk(client, tenant, {"flagKey": "pro", "userIdentifiers": ["a", "b"], **extra})
        assert answer.status_code == 200, answer.text
        assert {decided(entry) for entry in answer.json.values()} == {(False, "STATIC")}


def test_at_the_limits_attributes_are_taken(
    client: falcon.testing.TestClient, tenant: Tenant
) -> None:
    most = {f"a{i}": i for i in range(49)} | {"plan": "pro"}
    assert len(most) == 50
    longest = {"plan": "pro", "n" * 64: "x" * 1024, "list": ["y" * 1024, *["z"] * 99]}
    numbers = {"plan": "pro", "big": 1.7976931348623157e308, "small": -5e-324, "int": 10**300}
    for attributes in (most, longest, numbers, {"plan": "pro", "name.with_all-chars.9": True}):
        answer = evaluate(client, tenant, {"flagKey": "pro", "userIdentifier": "u",
                                           "attributes": attributes})  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert decided(answer.json) == (True, "ATTRIBUTE_IS")


def names(count: int) -> dict[str, str]:
    return {f"a{i}": SECRET for i in range(count)}


REFUSED: dict[str, tuple[object, str]] = {
    "not an object": (SECRET, "Field '{at}' must be a JSON object of attributes by name"),
    "an array": ([SECRET], "Field '{at}' must be a JSON object of attributes by name"),
    "51 attributes": (names(51), "Field '{at}' has 51 attributes; at most 50 are allowed"),
    "a name with a space": (
        {"first name": SECRET},
        "Field '{at}' has an attribute named 'first name'; a name is 1 to 64 letters, digits,"
        " '.', '_' or '-'",
    ),
    "a name of 65 characters": (
        {"n" * 65: SECRET},
        "Field '{at}' has an attribute named '" + "n" * 64 + "…'; a name is 1 to 64 letters,"
        " digits, '.', '_' or '-'",
    ),
    "an empty name": (
        {"": SECRET},
        "Field '{at}' has an attribute named ''; a name is 1 to 64"
        " letters, digits, '.', '_' or '-'",
    ),  # fmt: skip
    "a name ending in a newline": (
        {"plan\n": SECRET},
        "Field '{at}' has an attribute named 'plan\\n'; a name is 1 to 64 letters, digits, '.',"
        " '_' or '-'",
    ),
    "the reserved name": (
        {"userIdentifier": SECRET},
        "Field '{at}.userIdentifier' is not allowed: the name is reserved for the user's"
        " identifier, which conditions read by that name",
    ),
    "a string of 1,025 characters": (
        {"plan": SECRET + "x" * (1025 - len(SECRET))},
        "Field '{at}.plan' must be at most 1024 characters long",
    ),
    "a number no double holds": ({"seats": 10**400}, "Field '{at}.seats' must be a finite number"),
    "null": (
        {"plan": None},
        "Field '{at}.plan' must be a string of at most 1024 characters, a finite number, a"
        " boolean or an array of at most 100 such strings",
    ),
    "an object": (
        {"plan": {"name": SECRET}},
        "Field '{at}.plan' must be a string of at most 1024 characters, a finite number, a"
        " boolean or an array of at most 100 such strings",
    ),
    "an array of 101 strings": (
        {"tags": [SECRET] * 101},
        "Field '{at}.tags' has 101 items; at most 100 are allowed",
    ),
    "a mixed array": (
        {"tags": [SECRET, 1]},
        "Field '{at}.tags[1]' must be a string: an array attribute holds strings only",
    ),
    "an array holding null": (
        {"tags": [None]},
        "Field '{at}.tags[0]' must be a string: an array attribute holds strings only",
    ),
    "an array's string of 1,025 characters": (
        {"tags": ["ok", SECRET + "x" * (1025 - len(SECRET))]},
        "Field '{at}.tags[1]' must be at most 1024 characters long",
    ),
}


def refused(answer: Any, message: str) -> None:
    assert answer.status_code == 400, answer.text
    assert answer.json == {"status": 400, "error": "Bad Request", "message": message}
    assert SECRET not in answer.text


@pytest.mark.parametrize(("attributes", "message"), REFUSED.values(), ids=list(REFUSED))
def test_a_single_evaluate_refuses_bad_attributes_naming_the_field(
    client: falcon.testing.TestClient, tenant: Tenant, attributes: object, message: str
) -> None:
    answer = evaluate(client, tenant, {"flagKey": "pro", "userIdentifier": "u",
                                       "attributes": attributes})  # fmt: skip
    refused(answer, message.format(at="attributes"))


@pytest.mark.parametrize(("attributes", "message"), REFUSED.values(), ids=list(REFUSED))
def test_bulk_refuses_a_users_bad_attributes_naming_the_user_and_the_field(
    client: falcon.testing.TestClient, tenant: Tenant, attributes: object, message: str
) -> None:
    body = {"flagKey": "pro", "userIdentifiers": ["alice", "bob"],
            "attributes": {"alice": {"plan": "pro"}, "bob": attributes}}  # fmt: skip
    answer = bulk(client, tenant, body)
    refused(answer, message.format(at="attributes['bob']"))


def test_an_overflowing_number_is_named_too(
    client: falcon.testing.TestClient, tenant: Tenant
) -> None:
    """``1e999`` is valid JSON that no double holds: the 400 names its field (not "malformed")."""
    headers = {"Authorization": f"ApiKey {tenant.api_key}", "Content-Type": "application/json"}
    single = b'{"flagKey":"pro","userIdentifier":"u","attributes":{"plan":"pro","n":-1e999}}'
    answer = client.simulate_post("/v1/evaluate", body=single, headers=headers)
    refused(answer, "Field 'attributes.n' must be a finite number")
    many = b'{"flagKey":"pro","userIdentifiers":["b"],"attributes":{"b":{"n":1E400}}}'
    answer = client.simulate_post("/v1/evaluate/bulk", body=many, headers=headers)
    refused(answer, "Field 'attributes['b'].n' must be a finite number")
    digits = b"9" * 5_000  # past Python's 4,300-digit int, and far past a double
    long = b'{"flagKey":"pro","userIdentifier":"u","attributes":{"n":-' + digits + b"}}"
    answer = client.simulate_post("/v1/evaluate", body=long, headers=headers)
    refused(answer, "Field 'attributes.n' must be a finite number")
    ofrep = b'{"context":{"targetingKey":"u","plan":"pro","n":' + digits + b"}}"
    answer = client.simulate_post("/ofrep/v1/evaluate/flags/pro", body=ofrep, headers=headers)
    assert answer.status_code == 200, answer.text  # a shape no attribute has: ignored
    tokens = b'{"flagKey":"pro","userIdentifier":"u","attributes":{"n":NaN}}'
    answer = client.simulate_post("/v1/evaluate", body=tokens, headers=headers)
    assert answer.status_code == 400  # not JSON at all
    assert answer.json["message"].startswith("Malformed JSON body")


BULK_REFUSED: dict[str, tuple[object, str]] = {
    "not an object": (
        [{"plan": "pro"}],
        "Field 'attributes' must be a JSON object of attributes by user identifier",
    ),
    "a user not in the request": (
        {"alice": {"plan": "pro"}, "carol": {"plan": SECRET}},
        "Field 'attributes['carol']' names a user that is not in 'userIdentifiers'",
    ),
    "a user's attributes null": (
        {"alice": None},
        "Field 'attributes['alice']' must be a JSON object of attributes by name",
    ),
    "a user's attributes a string": (
        {"alice": SECRET},
        "Field 'attributes['alice']' must be a JSON object of attributes by name",
    ),
}


@pytest.mark.parametrize(("attributes", "message"), BULK_REFUSED.values(), ids=list(BULK_REFUSED))
def test_bulk_attributes_are_by_user_of_the_request(
    client: falcon.testing.TestClient, tenant: Tenant, attributes: object, message: str
) -> None:
    body = {"flagKey": "pro", "userIdentifiers": ["alice", "bob", "alice"],
            "attributes": attributes}  # fmt: skip
    refused(bulk(client, tenant, body), message)


def test_a_refused_request_is_neither_metered_nor_logged(
    client: falcon.testing.TestClient, tenant: Tenant, admin: Admin, services: Services
) -> None:
    usage = f"/organizations/{tenant.organization_id}/usage"
    before = admin.request("GET", usage)["evaluations"]
    services.event_log = Recording(services.event_log)
    for attributes, _ in REFUSED.values():
        evaluate(client, tenant, {"flagKey": "pro", "userIdentifier": "u",
                                  "attributes": attributes})  # fmt: skip
        bulk(client, tenant, {"flagKey": "pro", "userIdentifiers": ["alice"],
                              "attributes": {"alice": attributes}})  # fmt: skip
    for attributes, _ in BULK_REFUSED.values():
        bulk(client, tenant, {"flagKey": "pro", "userIdentifiers": ["alice"],
                              "attributes": attributes})  # fmt: skip
    assert admin.request("GET", usage)["evaluations"] == before
    assert services.event_log.batches == []


def test_attribute_values_reach_no_log_record(
    client: falcon.testing.TestClient,
    tenant: Tenant,
    services: Services,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Served, refused, and served while the event log refuses (whose loss is logged): no
    record, its message or any field, holds a value. (The real server's whole log is searched
    in ``test_attributes_privacy.py``.)"""
    services.event_log = Recording(services.event_log)
    services.event_log.refuse = True
    marked = {"plan": SECRET, "tags": [SECRET]}
    with caplog.at_level(logging.DEBUG):
        for flag in ("pro", "on", "missing"):
            evaluate(client, tenant, {"flagKey": flag, "userIdentifier": "u",
                                      "attributes": marked})  # fmt: skip
            bulk(client, tenant, {"flagKey": flag, "userIdentifiers": ["u", "v"],
                                  "attributes": {"u": marked}})  # fmt: skip
            context = {"targetingKey": "u", **marked, "odd": {"x": SECRET}}
            client.simulate_post(f"/ofrep/v1/evaluate/flags/{flag}", json={"context": context},
                                 headers={"Authorization": f"ApiKey {tenant.api_key}"})  # fmt: skip
        for attributes, _ in REFUSED.values():
            evaluate(client, tenant, {"flagKey": "pro", "userIdentifier": "u",
                                      "attributes": attributes})  # fmt: skip
    records = caplog.records
    assert any(r.getMessage() == "evaluation events not logged" for r in records)
    for record in records:
        assert SECRET not in repr(record.__dict__), record
