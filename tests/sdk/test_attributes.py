"""A user's attributes through the SDK (contract 12): sent in the body only when given, in
the body's shape; the OpenFeature context's fields of the shapes the contract takes."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from flagsight_sdk import FlagsightClient
from flagsight_sdk.attributes import for_core, from_openfeature
from flagsight_sdk.model import FAILURE_INTERNAL

from tests.sdk.fake_server import FakeServer, json_reply

GOOD = {"value": True, "matchedRuleType": "STATIC", "error": None, "evaluationId": "abc"}


def answer(path: str, body: dict) -> tuple[int, dict[str, str], bytes]:
    if path == "/v1/evaluate/bulk":
        return json_reply(200, {user: GOOD for user in body["userIdentifiers"]})
    return json_reply(200, GOOD)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer(answer)
    yield fake
    fake.close()


def test_a_single_evaluate_sends_attributes_only_when_given(server: FakeServer) -> None:
    client = FlagsightClient("fsk_x", server.url)
    assert client.evaluate("f", "u")
    assert client.evaluate("f", "u", {"plan": "pro", "tags": ("a", "b"), "age": 3, "ok": True})
    assert client.evaluate("f", "u", {})
    plain, given, empty = server.bodies("/v1/evaluate")
    assert "attributes" not in plain
    assert given["attributes"] == {"plan": "pro", "tags": ["a", "b"], "age": 3, "ok": True}
    assert empty["attributes"] == {}


def test_a_bulk_evaluate_sends_each_requests_users_attributes(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flagsight_sdk import client as client_module

    monkeypatch.setattr(client_module, "BULK_MAX_USERS", 2)
    client = FlagsightClient("fsk_x", server.url)
    users = ["a", "b", "c", "d", "e"]
    given = {"a": {"plan": "pro"}, "d": {"tags": ["x"]}, "nobody": {"plan": "free"}}
    assert set(client.evaluate_bulk("f", users, given)) == set(users)
    assert set(client.evaluate_bulk("f", users)) == set(users)
    sent = [body.get("attributes") for body in server.bodies("/v1/evaluate/bulk")]
    assert sent == [{"a": {"plan": "pro"}}, {"d": {"tags": ["x"]}}, None, None, None, None]


def test_attributes_that_are_not_a_mapping_fail_safe(server: FakeServer) -> None:
    client = FlagsightClient("fsk_x", server.url)
    single = client.evaluate("f", "u", ["plan"])  # type: ignore[arg-type]
    assert (single.value, single.failure) == (False, FAILURE_INTERNAL)
    assert client.evaluate_bulk("f", ["u"], ["plan"]) == {}  # type: ignore[arg-type]
    assert server.requests == []


def test_the_openfeature_context_keeps_the_shapes_contract_12_takes() -> None:
    fields = {
        "targetingKey": "u",
        "userIdentifier": "someone-else",  # reserved: the identifier is the targeting key
        "plan": "pro",
        "seats": 12,
        "ratio": 0.5,
        "beta": False,
        "tags": ["a", "b"],
        "none": [],
        "signedUp": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "naive": datetime(2026, 1, 2),
        "object": {"a": 1},
        "null": None,
        "mixed": ["a", 1],
        "nan": math.nan,
        "first name": "Ada",  # a name no condition can use: /v1 would refuse it
        "x" * 65: "too long a name",
    }
    assert from_openfeature(fields) == {
        "plan": "pro",
        "seats": 12,
        "ratio": 0.5,
        "beta": False,
        "tags": ("a", "b"),
        "none": (),
        "signedUp": "2026-01-02T03:04:05+00:00",
    }


def test_the_local_core_gets_arrays_as_tuples() -> None:
    assert for_core({"tags": ["a"], "plan": "pro", "t": ("b",)}) == {
        "tags": ("a",),
        "plan": "pro",
        "t": ("b",),
    }


def test_the_name_pattern_is_the_contracts() -> None:
    from flagsight_core.contract import ATTRIBUTE_NAME_PATTERN
    from flagsight_sdk.attributes import ATTRIBUTE_NAME

    assert ATTRIBUTE_NAME.pattern == ATTRIBUTE_NAME_PATTERN.pattern
