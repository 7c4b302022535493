"""OFREP's evaluation context as the user's attributes (contract 12): every field but
``targetingKey`` is read; a field of a shape an attribute cannot have is ignored, never an error;
only a context over the limits is refused (400 ``INVALID_CONTEXT``). Single and bulk, through
the in-process app, with a rule that reads an attribute registered from here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import falcon.testing
import jsonschema
import pytest

from tests.ofrep.test_ofrep_api import BULK, schema
from tests.support import attribute_rule
from tests.support.admin import Admin, Tenant
from tests.support.attribute_rule import PLAN_IS_PRO

SECRET = "value-never-echoed"


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


def post(client: falcon.testing.TestClient, tenant: Tenant, path: str, context: Any, **kw: Any):
    headers = {"Authorization": f"ApiKey {tenant.api_key}", **kw.pop("headers", {})}
    return client.simulate_post(path, json={"context": context}, headers=headers, **kw)


def reason_of(client: falcon.testing.TestClient, tenant: Tenant, context: Any) -> tuple:
    """The single call's and the bulk call's (value, reason) for flag ``pro``."""
    one = post(client, tenant, f"{BULK}/pro", context)
    assert one.status_code == 200, one.text
    jsonschema.validate(one.json, schema("OfrepEvaluationSuccess"))
    every = post(client, tenant, BULK, context)
    assert every.status_code == 200, every.text
    (entry,) = [flag for flag in every.json["flags"] if flag["key"] == "pro"]
    assert (entry["value"], entry["reason"]) == (one.json["value"], one.json["reason"])
    return one.json["value"], one.json["reason"]


MATCHED = (True, "TARGETING_MATCH")
DEFAULT = (False, "STATIC")

CONTEXTS: dict[str, tuple[dict[str, Any], tuple]] = {
    "an attribute": ({"plan": "pro"}, MATCHED),
    "another value": ({"plan": "free"}, DEFAULT),
    "with every shape around it": (
        {"plan": "pro", "seats": 3, "ratio": 0.5, "beta": False, "tags": ["x"], "none": []},
        MATCHED,
    ),
    "an array is not the string": ({"plan": ["pro"]}, DEFAULT),
    "odd shapes ignored": (
        {
            "plan": "pro",
            "device": {"os": SECRET},
            "gone": None,
            "mixed": [SECRET, 1, None],
            "nested": [[SECRET]],
            "big": 10**400,
        },
        MATCHED,
    ),  # fmt: skip
    "an odd shape is no value": ({"plan": {"is": "pro"}}, DEFAULT),
    "null is no value": ({"plan": None}, DEFAULT),
    "names no condition can use ignored": (
        {"first name": SECRET, "n" * 65: SECRET, "": 1, "plan": "pro"},
        MATCHED,
    ),
    "userIdentifier is not an attribute": ({"userIdentifier": "pro", "plan": "pro"}, MATCHED),
    "a mixed array of 500 items": ({"plan": "pro", "mixed": [SECRET, 1] * 250}, MATCHED),
    "at the limits": (
        {
            "plan": "pro",
            "long": "x" * 1024,
            "list": ["y" * 1024, *["z"] * 99],
            **{f"a{i}": i for i in range(47)},
            "device": {},
            "gone": None,
        },
        MATCHED,
    ),  # fmt: skip
}


@pytest.mark.parametrize(("fields", "wanted"), CONTEXTS.values(), ids=list(CONTEXTS))
def test_the_contexts_other_fields_are_the_users_attributes(
    client: falcon.testing.TestClient, tenant: Tenant, fields: dict[str, Any], wanted: tuple
) -> None:
    assert reason_of(client, tenant, {"targetingKey": "u-1", **fields}) == wanted


def test_a_number_no_double_holds_is_ignored_not_a_parse_error(
    client: falcon.testing.TestClient, tenant: Tenant
) -> None:
    headers = {"Authorization": f"ApiKey {tenant.api_key}", "Content-Type": "application/json"}
    body = b'{"context":{"targetingKey":"u","plan":"pro","huge":1e999,"tiny":-1E400}}'
    for path in (f"{BULK}/pro", BULK):
        answer = client.simulate_post(path, body=body, headers=headers)
        assert answer.status_code == 200, answer.text
    assert answer.json["flags"][1]["key"] == "pro" and answer.json["flags"][1]["value"] is True
    for junk in (b'{"context":{"targetingKey":"u","n":NaN}}',
                 b'{"context":{"targetingKey":"u","n":1e999,"s":"\\ud800"}}',
                 b'{"context":{"targetingKey":"u","n":1e999,"x":}}'):  # fmt: skip
        refused = client.simulate_post(BULK, body=junk, headers=headers)
        assert (refused.status_code, refused.json["errorCode"]) == (400, "PARSE_ERROR"), junk


OVER: dict[str, tuple[dict[str, Any], str]] = {
    "51 attributes": (
        {f"a{i}": SECRET for i in range(51)},
        "Field 'context' has 51 attributes; at most 50 are allowed",
    ),
    "51 of an attribute's shape, some with odd names": (
        {
            **{f"a{i}": i for i in range(40)},
            **{f"odd name {i}": True for i in range(11)},
            "device": {"os": "x"},
        },
        "Field 'context' has 51 attributes; at most 50 are allowed",
    ),  # fmt: skip
    "a string of 1,025 characters": (
        {"plan": SECRET + "x" * (1025 - len(SECRET))},
        "Field 'context.plan' must be at most 1024 characters long",
    ),
    "an array of 101 strings": (
        {"tags": [SECRET] * 101},
        "Field 'context.tags' has 101 items; at most 100 are allowed",
    ),
    "an array's string of 1,025 characters": (
        {"tags": ["a", SECRET * 60]},
        "Field 'context.tags[1]' must be at most 1024 characters long",
    ),
}


@pytest.mark.parametrize(("fields", "message"), OVER.values(), ids=list(OVER))
def test_only_a_context_over_the_limits_is_refused(
    client: falcon.testing.TestClient,
    tenant: Tenant,
    admin: Admin,
    fields: dict[str, Any],
    message: str,
) -> None:
    usage = f"/organizations/{tenant.organization_id}/usage"
    before = admin.request("GET", usage)["evaluations"]
    for path, key in ((f"{BULK}/pro", {"key": "pro"}), (BULK, {})):
        answer = post(client, tenant, path, {"targetingKey": "u-1", **fields})
        assert answer.status_code == 400, answer.text
        assert answer.json == {
            **key,
            "errorCode": "INVALID_CONTEXT",
            "errorDetails": message,
            "status": 400,
            "error": "Bad Request",
            "message": message,
        }
        assert SECRET not in answer.text
        jsonschema.validate(answer.json, schema("OfrepEvaluationFailure"))
    assert admin.request("GET", usage)["evaluations"] == before  # nothing served


def test_the_bulk_etag_follows_the_attributes(
    client: falcon.testing.TestClient, tenant: Tenant
) -> None:
    pro = {"targetingKey": "u-1", "plan": "pro", "device": {"os": "x"}}
    first = post(client, tenant, BULK, pro)
    etag = first.headers["etag"]
    again = post(client, tenant, BULK, dict(reversed(list(pro.items()))),
                 headers={"If-None-Match": etag})  # fmt: skip
    assert again.status_code == 304  # the same context, its fields in another order
    free = post(client, tenant, BULK, {**pro, "plan": "free"}, headers={"If-None-Match": etag})
    assert free.status_code == 200 and free.headers["etag"] != etag
    assert {f["key"]: f["value"] for f in free.json["flags"]} == {"on": True, "pro": False}
    nested = post(client, tenant, BULK, {**pro, "device": {"os": "y"}},
                  headers={"If-None-Match": etag})  # fmt: skip
    assert nested.status_code == 200  # an ignored field is hashed too: never a stale answer
    assert {f["key"]: f["value"] for f in nested.json["flags"]} == {"on": True, "pro": True}
