"""Rollouts, schedules and webhooks through the admin API: validation, states, and what a
guardian decision does to the flag (contract section 10)."""

from __future__ import annotations

import pytest

from api.controlplane.changes import RolloutAction
from tests.admin.conftest import AdminClient

RULES = [{"type": "STATIC", "value": False}, {"type": "PERCENTAGE", "percentage": 0}]


@pytest.fixture
def flag_path(admin_api: AdminClient, env: dict) -> str:
    path = f"/environments/{env['id']}/flags/checkout"
    assert admin_api.put(path, {"enabled": True, "rules": RULES[1:]}).status == 201
    return path


def test_a_rollout_starts_at_its_first_step(admin_api: AdminClient, flag_path: str) -> None:
    answer = admin_api.put(f"{flag_path}/rollout", {"steps": [1, 5, 100], "stepMinutes": 10})
    assert answer.status == 200
    assert answer.body["state"] == "running"
    assert (answer.body["step"], answer.body["percentage"], answer.body["decisions"]) == (0, 1, [])
    assert admin_api.get(flag_path).body["rules"][0]["percentage"] == 1
    assert admin_api.get(f"{flag_path}/rollout").body == answer.body


def test_defaults_are_the_documented_plan(admin_api: AdminClient, flag_path: str) -> None:
    body = admin_api.put(f"{flag_path}/rollout").body
    assert body["steps"] == [10, 25, 50, 100]
    assert body["stepMinutes"] == 10
    assert body["guardrails"] == ["failureRate", "latencyP95Ms", "coverage"]
    assert body["tolerances"] == {"failureRate": 1.0, "latencyP95Ms": 50.0, "coverage": 5.0}
    assert body["guard"] is None


def test_tolerances_named_replace_their_defaults(admin_api: AdminClient, flag_path: str) -> None:
    plan = {"guardrails": ["failureRate", "latencyP95Ms"], "tolerances": {"failureRate": 0.25}}
    body = admin_api.put(f"{flag_path}/rollout", plan).body
    assert body["tolerances"] == {"failureRate": 0.25, "latencyP95Ms": 50.0}
    assert admin_api.get(f"{flag_path}/rollout").body["tolerances"] == body["tolerances"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"steps": [5, 1, 100]}, "steps[1]"),
        ({"steps": [1, 50]}, "steps"),
        ({"steps": [0, 100]}, "steps[0]"),
        ({"steps": [1.001, 100]}, "steps[0]"),
        ({"stepMinutes": 0}, "stepMinutes"),
        ({"guardrails": ["errors"]}, "guardrails"),
        ({"tolerances": [1]}, "tolerances"),
        ({"tolerances": {"errors": 1}}, "tolerances"),
        ({"guardrails": ["coverage"], "tolerances": {"failureRate": 1}}, "tolerances"),
        ({"tolerances": {"failureRate": 0}}, "tolerances"),
        ({"tolerances": {"failureRate": -1}}, "tolerances"),
        ({"tolerances": {"failureRate": "1"}}, "tolerances"),
        ({"tolerances": {"failureRate": True}}, "tolerances"),
        ({"tolerances": {"coverage": 101}}, "tolerances"),
    ],
)
def test_bad_plans_are_400_naming_the_field(
    admin_api: AdminClient, flag_path: str, body: dict, field: str
) -> None:
    answer = admin_api.put(f"{flag_path}/rollout", body)
    assert answer.status == 400
    assert f"'{field}'" in answer.body["message"]


def test_a_flag_without_a_percentage_rule_cannot_roll_out(
    admin_api: AdminClient, env: dict
) -> None:
    path = f"/environments/{env['id']}/flags/plain"
    admin_api.put(path, {"enabled": True, "rules": [{"type": "STATIC"}]})
    assert admin_api.put(f"{path}/rollout", {}).status == 409
    assert admin_api.put(f"/environments/{env['id']}/flags/missing/rollout", {}).status == 404


def test_a_rollback_sets_the_first_percentage_rule_to_0_and_is_served_at_once(
    admin_api: AdminClient, env: dict
) -> None:
    path = f"/environments/{env['id']}/flags/checkout"
    admin_api.put(path, {"enabled": True, "rules": RULES})
    admin_api.put(f"{path}/rollout", {"steps": [20, 100]})
    store = admin_api.services.store
    stats = {"failureRate": {"decision": "regression"}}
    after = store.decide_rollout(env["id"], "checkout", 0, RolloutAction.ROLLED_BACK, "why", stats)
    assert after is not None
    assert (
        store.decide_rollout(env["id"], "checkout", 0, RolloutAction.ADVANCED, "late", None) is None
    )
    body = admin_api.get(f"{path}/rollout").body
    assert (body["state"], body["percentage"]) == ("rolledBack", 0)
    assert [(d["action"], d["reason"], d["statistics"]) for d in body["decisions"]] == [
        ("rolledBack", "why", stats)
    ]
    assert admin_api.get(path).body["rules"] == [
        {"type": "STATIC", "value": False}, {"type": "PERCENTAGE", "percentage": 0, "value": True}
    ]  # fmt: skip
    admin_api.services.config.refresh()
    flag = admin_api.services.config.environment(env["id"]).flags["checkout"]
    assert flag.rules[1].percentage == 0


def test_advancing_to_the_last_step_completes(
    admin_api: AdminClient, env: dict, flag_path: str
) -> None:
    admin_api.put(f"{flag_path}/rollout", {"steps": [10, 100]})
    store = admin_api.services.store
    store.decide_rollout(env["id"], "checkout", 0, RolloutAction.COMPLETED, "time", None)
    body = admin_api.get(f"{flag_path}/rollout").body
    assert (body["state"], body["step"], body["percentage"]) == ("completed", 1, 100)


def test_stopping_leaves_the_percentage(admin_api: AdminClient, flag_path: str) -> None:
    admin_api.put(f"{flag_path}/rollout", {"steps": [5, 100]})
    assert admin_api.delete(f"{flag_path}/rollout").status == 204
    assert admin_api.get(f"{flag_path}/rollout").status == 404
    assert admin_api.get(flag_path).body["rules"][0]["percentage"] == 5


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"at": "2030-01-01T00:00:00", "flag": {"enabled": True, "rules": []}}, "at"),
        ({"at": "tomorrow", "flag": {"enabled": True, "rules": []}}, "at"),
        ({"at": "0001-01-01T00:00:00+14:00", "flag": {"enabled": True, "rules": []}}, "at"),
        ({"at": "2030-01-01T00:00:00Z", "flag": {"rules": []}}, "flag.enabled"),
        ({"at": "2030-01-01T00:00:00Z", "flag": {"enabled": True, "rules": [{}]}}, "flag.rules[0].type"),
    ],
)  # fmt: skip
def test_bad_schedules_are_400_naming_the_field(
    admin_api: AdminClient, flag_path: str, body: dict, field: str
) -> None:
    answer = admin_api.post(f"{flag_path}/schedules", body)
    assert answer.status == 400
    assert f"'{field}'" in answer.body["message"]


def test_schedules_are_listed_and_cancelled(admin_api: AdminClient, flag_path: str) -> None:
    body = {"at": "2030-01-01T01:00:00+01:00", "flag": {"enabled": False, "rules": []}}
    made = admin_api.post(f"{flag_path}/schedules", body).body
    assert (made["at"], made["state"]) == ("2030-01-01T00:00:00.000Z", "pending")
    assert admin_api.delete(f"{flag_path}/schedules/{made['id']}").status == 204
    assert admin_api.get(f"{flag_path}/schedules").body["items"][0]["state"] == "cancelled"
    assert admin_api.delete(f"{flag_path}/schedules/{made['id']}").status == 404


def test_a_webhook_secret_is_shown_once(admin_api: AdminClient, org: dict) -> None:
    made = admin_api.post(
        f"/organizations/{org['id']}/webhooks",
        {"url": "https://example.test/hook", "events": ["flag.changed", "rollout.held"]},
    )
    assert made.status == 201
    assert made.body["secret"].startswith("whsec_")
    listed = admin_api.get(f"/organizations/{org['id']}/webhooks").body["items"]
    assert listed == [{k: v for k, v in made.body.items() if k != "secret"}]
    assert admin_api.delete(f"/webhooks/{made.body['id']}").status == 204
    assert admin_api.get(f"/organizations/{org['id']}/webhooks").body["items"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://x.test/", "events": ["flag.changed"]}, "url"),
        ({"url": "http://[::1/", "events": ["flag.changed"]}, "url"),
        ({"url": "http://x.test:99999/", "events": ["flag.changed"]}, "url"),
        ({"url": "https://x.test/", "events": []}, "events"),
        ({"url": "https://x.test/", "events": ["flag.deleted"]}, "events"),
    ],
)
def test_bad_webhooks_are_400(admin_api: AdminClient, org: dict, body: dict, field: str) -> None:
    answer = admin_api.post(f"/organizations/{org['id']}/webhooks", body)
    assert answer.status == 400
    assert f"'{field}'" in answer.body["message"]


def test_listing_the_schedules_of_a_malformed_flag_key_is_400(
    admin_api: AdminClient, flag_path: str
) -> None:
    bad = flag_path.rsplit("/", 1)[0] + "/bad%20key"
    answer = admin_api.get(f"{bad}/schedules")
    assert answer.status == 400
    assert "'flagKey' must match" in answer.body["message"]


def test_a_rollout_put_without_a_body_starts_with_the_documented_defaults(
    admin_api: AdminClient, flag_path: str
) -> None:
    """The body is optional (every field has a default), and the OpenAPI document says so."""
    from api.web.openapi.document import openapi_document

    answer = admin_api.put(f"{flag_path}/rollout")  # no body at all
    assert answer.status == 200
    assert (answer.body["steps"], answer.body["stepMinutes"]) == ([10, 25, 50, 100], 10)
    paths = openapi_document()["paths"]
    operation = paths["/admin/v1/environments/{envId}/flags/{flagKey}/rollout"]
    assert operation["put"]["requestBody"]["required"] is False
