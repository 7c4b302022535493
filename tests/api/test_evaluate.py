"""POST /v1/evaluate and /v1/evaluate/bulk: every rule of spec 4.1, 4.2, 5, 7 and contract 2-4."""

from __future__ import annotations

import re

import pytest

from tests.support.admin import Admin, Tenant

UNAUTHORIZED = {
    "status": 401,
    "error": "Unauthorized",
    "message": "Missing or invalid Authorization header",
}
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")


def evaluate(client, tenant: Tenant, flag: str, user: str = "user-1", **extra):
    return client.simulate_post(
        "/v1/evaluate",
        json={"flagKey": flag, "userIdentifier": user, **extra},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
    )


def outcome(body: dict) -> tuple:
    assert ID_PATTERN.fullmatch(body["evaluationId"])
    error = body["error"] and (body["error"]["type"], body["error"]["message"])
    return body["value"], body["matchedRuleType"], error


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer {key}"},
        {"X-API-Key": "{key}"},
        {"Authorization": "apikey {key}"},
        {"Authorization": "ApiKey"},
        {"Authorization": "ApiKey fsk_not-a-real-key"},
        {"Authorization": "{key}"},
    ],
    ids=[
        "missing",
        "bearer",
        "x-api-key",
        "lowercase-scheme",
        "no-key",
        "unknown-key",
        "no-scheme",
    ],
)
@pytest.mark.parametrize(
    "path", ["/v1/evaluate", "/v1/evaluate/bulk", "/v1/feedback/report", "/v1/feedback/bulk"]
)
def test_only_apikey_scheme_is_accepted(client, tenant, headers, path) -> None:
    headers = {k: v.format(key=tenant.api_key) for k, v in headers.items()}
    result = client.simulate_post(
        path, json={"flagKey": "f", "userIdentifier": "u"}, headers=headers
    )
    assert (result.status_code, result.json) == (401, UNAUTHORIZED)


def test_authentication_is_checked_before_the_body(client) -> None:
    result = client.simulate_post(
        "/v1/evaluate", body="{not json", headers={"Content-Type": "application/json"}
    )
    assert (result.status_code, result.json) == (401, UNAUTHORIZED)


def test_flag_not_found(client, tenant) -> None:
    result = evaluate(client, tenant, "missing-flag")
    assert result.status_code == 200
    assert outcome(result.json) == (False, None, ("FLAG_NOT_FOUND", "Flag not found"))


def test_flag_disabled(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "off", [{"type": "STATIC"}], enabled=False)
    assert outcome(evaluate(client, tenant, "off").json) == (
        False,
        None,
        ("FLAG_DISABLED", "Flag disabled"),
    )


def test_flag_archived_wins_over_disabled(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "old", [{"type": "STATIC"}], enabled=False, archived=True)
    assert outcome(evaluate(client, tenant, "old").json) == (
        False,
        None,
        ("FLAG_ARCHIVED", "Flag archived"),
    )


def test_rules_decide_in_order(client, admin, tenant) -> None:
    admin.segment(tenant.organization_id, "beta", ["vip-1"])
    admin.flag(
        tenant.environment_id,
        "checkout",
        [
            {"type": "SEGMENT", "segment": "beta"},
            {"type": "PERCENTAGE", "percentage": 6.32},
            {"type": "STATIC", "value": False},
        ],
    )
    assert outcome(evaluate(client, tenant, "checkout", "vip-1").json) == (True, "SEGMENT", None)
    # bucket("checkout", "user-1") is computed independently in tests/cases/bucketing.json
    assert outcome(evaluate(client, tenant, "checkout", "alice@example.com").json) == (
        False,
        "STATIC",
        None,
    )


def test_percentage_rule_follows_the_contract_bucketing(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "new-checkout", [{"type": "PERCENTAGE", "percentage": 6.32}])
    assert outcome(evaluate(client, tenant, "new-checkout", "user-1").json) == (
        True,
        "PERCENTAGE",
        None,
    )  # bucket 631
    admin.flag(tenant.environment_id, "new-checkout", [{"type": "PERCENTAGE", "percentage": 6.31}])
    assert outcome(evaluate(client, tenant, "new-checkout", "user-1").json) == (False, None, None)


def test_no_rule_matches(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "empty", [])
    assert outcome(evaluate(client, tenant, "empty").json) == (False, None, None)


def test_flag_keys_are_case_sensitive(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "Dark-Mode", [{"type": "STATIC"}])
    assert outcome(evaluate(client, tenant, "dark-mode").json)[2][0] == "FLAG_NOT_FOUND"


def test_keys_are_scoped_to_their_environment(client, admin, tenant) -> None:
    staging = admin.tenant(organization_id=tenant.organization_id, environment="staging")
    admin.flag(tenant.environment_id, "banner", [{"type": "STATIC", "value": True}])
    admin.flag(staging.environment_id, "banner", [{"type": "STATIC", "value": False}])
    assert evaluate(client, tenant, "banner").json["value"] is True
    assert evaluate(client, staging, "banner").json["value"] is False


def test_unknown_fields_are_ignored_and_sdk_accepted(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    result = evaluate(client, tenant, "f", sdk="flagsight-python/0.1", somethingElse=[1, 2])
    assert outcome(result.json) == (True, "STATIC", None)


def test_every_answer_has_a_unique_evaluation_id(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    ids = {evaluate(client, tenant, "f").json["evaluationId"] for _ in range(50)}
    ids |= {evaluate(client, tenant, "missing").json["evaluationId"] for _ in range(50)}
    assert len(ids) == 100


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"userIdentifier": "u"}, "Field 'flagKey' is required"),
        ({"flagKey": 7, "userIdentifier": "u"}, "Field 'flagKey' must be a string"),
        (
            {"flagKey": "", "userIdentifier": "u"},
            "Field 'flagKey' must be 1 to 128 characters long",
        ),
        (
            {"flagKey": "f" * 129, "userIdentifier": "u"},
            "Field 'flagKey' must be 1 to 128 characters long",
        ),
        ({"flagKey": "f"}, "Field 'userIdentifier' is required"),
        (
            {"flagKey": "f", "userIdentifier": "u" * 1025},
            "Field 'userIdentifier' must be 1 to 1024 characters long",
        ),
        ({"flagKey": "f", "userIdentifier": "u", "sdk": 3}, "Field 'sdk' must be a string or null"),
        ([1, 2], "The body must be a JSON object"),
    ],
)
def test_invalid_bodies_are_400_naming_the_field(client, tenant, body, message) -> None:
    result = client.simulate_post(
        "/v1/evaluate", json=body, headers={"Authorization": f"ApiKey {tenant.api_key}"}
    )
    assert (result.status_code, result.json) == (
        400,
        {"status": 400, "error": "Bad Request", "message": message},
    )


def test_malformed_json_is_400(client, tenant) -> None:
    result = client.simulate_post(
        "/v1/evaluate",
        body='{"flagKey": ',
        headers={"Authorization": f"ApiKey {tenant.api_key}", "Content-Type": "application/json"},
    )
    assert result.status_code == 400
    assert result.json["error"] == "Bad Request" and result.json["message"].startswith(
        "Malformed JSON body"
    )


def test_a_body_that_is_not_json_is_415(client, tenant) -> None:
    result = client.simulate_post(
        "/v1/evaluate",
        body="flagKey=f",
        headers={
            "Authorization": f"ApiKey {tenant.api_key}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    assert result.status_code == 415
    assert result.json["error"] == "Unsupported Media Type"


def test_a_body_over_the_limit_is_413(client, tenant) -> None:
    result = client.simulate_post(
        "/v1/evaluate",
        json={"flagKey": "f", "userIdentifier": "u", "padding": "x" * 70_000},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
    )
    assert (result.status_code, result.json["error"]) == (413, "Payload Too Large")


def test_unknown_path_is_404_and_wrong_method_405(client, tenant) -> None:
    missing = client.simulate_get("/v1/nothing-here")
    assert (missing.status_code, missing.json["status"], missing.json["error"]) == (
        404,
        404,
        "Not Found",
    )
    wrong = client.simulate_get(
        "/v1/evaluate", headers={"Authorization": f"ApiKey {tenant.api_key}"}
    )
    assert (wrong.status_code, wrong.json["status"], wrong.json["error"]) == (
        405,
        405,
        "Method Not Allowed",
    )


def bulk(client, tenant, flag, users):
    return client.simulate_post(
        "/v1/evaluate/bulk",
        json={"flagKey": flag, "userIdentifiers": users},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
    )


def test_bulk_answers_one_entry_per_user(client, admin, tenant) -> None:
    admin.segment(tenant.organization_id, "beta", ["b1"])
    admin.flag(tenant.environment_id, "f", [{"type": "SEGMENT", "segment": "beta"}])
    result = bulk(client, tenant, "f", ["b1", "x1"])
    assert result.status_code == 200
    assert {user: outcome(entry) for user, entry in result.json.items()} == {
        "b1": (True, "SEGMENT", None),
        "x1": (False, None, None),
    }


def test_bulk_errors_appear_in_every_entry(client, tenant) -> None:
    result = bulk(client, tenant, "missing", ["a", "b"])
    assert {u: outcome(e) for u, e in result.json.items()} == {
        "a": (False, None, ("FLAG_NOT_FOUND", "Flag not found")),
        "b": (False, None, ("FLAG_NOT_FOUND", "Flag not found")),
    }


def test_bulk_empty_list_is_an_empty_map(client, tenant) -> None:
    assert (bulk(client, tenant, "f", []).status_code, bulk(client, tenant, "f", []).json) == (
        200,
        {},
    )


def test_bulk_repeated_users_are_evaluated_and_metered_once(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    result = bulk(client, tenant, "f", ["a", "b", "a", "a"])
    assert list(result.json) == ["a", "b"]
    usage = admin.request("GET", f"/organizations/{tenant.organization_id}/usage", expect=200)
    assert usage["evaluations"] == 2


def test_bulk_of_ten_thousand_users(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "f", [{"type": "PERCENTAGE", "percentage": 30}])
    users = [f"user-{i}" for i in range(10_000)]
    result = bulk(client, tenant, "f", users)
    assert result.status_code == 200 and list(result.json) == users
    on = sum(entry["value"] for entry in result.json.values())
    assert 2_800 < on < 3_200
    assert len({entry["evaluationId"] for entry in result.json.values()}) == 10_000


def test_bulk_answers_identifiers_that_json_must_escape(client, admin, tenant) -> None:
    """Quotes, backslashes and control characters come back as the same identifiers."""
    admin.segment(tenant.organization_id, "beta", ['say "hi"', "tab\there"])
    admin.flag(tenant.environment_id, "f", [{"type": "SEGMENT", "segment": "beta"}])
    users = ['say "hi"', "back\\slash", "tab\there", "naïve ☃", "line\u2028sep", "plain"]
    result = bulk(client, tenant, "f", users)
    assert result.status_code == 200 and list(result.json) == users
    assert [result.json[u]["value"] for u in users] == [True, False, True, False, False, False]


def test_bulk_over_ten_thousand_users_is_400(client, tenant) -> None:
    result = bulk(client, tenant, "f", [f"u{i}" for i in range(10_001)])
    assert result.status_code == 400
    assert (
        result.json["message"]
        == "Field 'userIdentifiers' has 10001 items; at most 10000 are allowed"
    )


@pytest.mark.parametrize(
    ("users", "index"), [(["ok", 5], 1), (["", "x"], 0), (["a", "b", "u" * 1025], 2)]
)
def test_bulk_invalid_identifier_is_400_naming_the_index(client, tenant, users, index) -> None:
    result = bulk(client, tenant, "f", users)
    assert result.status_code == 400
    assert result.json["message"].startswith(f"Field 'userIdentifiers[{index}]' must be a string")


def usage(admin: Admin, tenant: Tenant) -> dict:
    return admin.request("GET", f"/organizations/{tenant.organization_id}/usage", expect=200)


def test_plan_limit_blocks_at_the_hard_threshold(client, admin) -> None:
    tenant = admin.tenant(plan="enterprise", limit=10)
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    answers = [outcome(evaluate(client, tenant, "f", f"u{i}").json) for i in range(14)]
    assert answers[:11] == [(True, "STATIC", None)] * 11
    limit_error = ("PLAN_LIMIT_EXCEEDED", "Plan limit exceeded. Upgrade your plan to continue.")
    assert answers[11:] == [(False, None, limit_error)] * 3
    # whatever the flag: plan blocking comes first
    assert outcome(evaluate(client, tenant, "missing").json) == (False, None, limit_error)
    assert {k: v for k, v in usage(admin, tenant).items() if k != "month"} == {
        "evaluations": 11, "limit": 10, "hardLimit": 11, "overage": True, "blocked": True,
    }  # fmt: skip


def test_overage_before_blocking(client, admin) -> None:
    tenant = admin.tenant(plan="enterprise", limit=20)
    for i in range(21):
        evaluate(client, tenant, "f", f"u{i}")
    state = usage(admin, tenant)
    assert (state["evaluations"], state["hardLimit"], state["overage"], state["blocked"]) == (
        21,
        22,
        True,
        False,
    )


def test_bulk_is_served_in_first_appearance_order_until_the_threshold(client, admin) -> None:
    tenant = admin.tenant(plan="enterprise", limit=5)  # hard threshold 5
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    evaluate(client, tenant, "f", "first")
    result = bulk(client, tenant, "f", ["a", "b", "a", "c", "d", "e", "f"]).json
    served = [u for u, e in result.items() if e["error"] is None]
    refused = [
        u for u, e in result.items() if e["error"] and e["error"]["type"] == "PLAN_LIMIT_EXCEEDED"
    ]
    assert (served, refused) == (["a", "b", "c", "d"], ["e", "f"])
    assert usage(admin, tenant)["evaluations"] == 5


def test_free_plan_limits(admin) -> None:
    tenant = admin.tenant(plan="free")
    assert (usage(admin, tenant)["limit"], usage(admin, tenant)["hardLimit"]) == (10_000, 11_000)


def test_a_revoked_key_is_refused(client, admin, tenant, services) -> None:
    assert evaluate(client, tenant, "f").status_code == 200
    admin.request("DELETE", f"/api-keys/{tenant.api_key_id}", expect=204)
    result = evaluate(client, tenant, "f")
    assert (result.status_code, result.json) == (401, UNAUTHORIZED)
