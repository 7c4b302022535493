"""Organizations, their plans and limits, and monthly usage."""

from __future__ import annotations

import re

import pytest

from api.metering.meter import month_of

NOW_MONTH = 202503


def test_create_read_list(admin_api) -> None:
    created = admin_api.post("/organizations", {"name": "Acme", "plan": "team"})
    assert created.status == 201
    org_id = created.body["id"]
    assert re.fullmatch(r"org_[0-9a-f]{16}", org_id)
    expected = {"id": org_id, "name": "Acme", "plan": "team", "monthlyEvaluationLimit": 10_000_000}
    assert created.body == expected
    assert admin_api.get(f"/organizations/{org_id}").body == expected
    other = admin_api.organization("free")
    assert admin_api.get("/organizations").body == {"items": [expected, other]}


@pytest.mark.parametrize(
    ("plan", "limit"), [("free", 10_000), ("pro", 1_000_000), ("team", 10_000_000)]
)
def test_plans_take_their_limit(admin_api, plan, limit) -> None:
    assert admin_api.organization(plan)["monthlyEvaluationLimit"] == limit
    assert (
        admin_api.organization(plan, monthlyEvaluationLimit=limit)["monthlyEvaluationLimit"]
        == limit
    )


def test_enterprise_takes_a_custom_limit(admin_api) -> None:
    org = admin_api.organization("enterprise", monthlyEvaluationLimit=123_456)
    assert (org["plan"], org["monthlyEvaluationLimit"]) == ("enterprise", 123_456)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"plan": "pro"}, "Field 'name' is required"),
        ({"name": "", "plan": "pro"}, "Field 'name' must be 1 to 200 characters long"),
        ({"name": 5, "plan": "pro"}, "Field 'name' must be a string"),
        ({"name": "A"}, "Field 'plan' is required"),
        ({"name": "A", "plan": "gold"}, "Field 'plan' must be one of free, pro, team, enterprise"),
        ({"name": "A", "plan": "PRO"}, "Field 'plan' must be one of free, pro, team, enterprise"),
        (
            {"name": "A", "plan": "enterprise"},
            "Field 'monthlyEvaluationLimit' is required for the enterprise plan",
        ),
        (
            {"name": "A", "plan": "enterprise", "monthlyEvaluationLimit": 0},
            "Field 'monthlyEvaluationLimit' must be an integer from 1 to 1000000000000000",
        ),
        (
            {"name": "A", "plan": "enterprise", "monthlyEvaluationLimit": 1.5},
            "Field 'monthlyEvaluationLimit' must be an integer or null",
        ),
        (
            {"name": "A", "plan": "enterprise", "monthlyEvaluationLimit": True},
            "Field 'monthlyEvaluationLimit' must be an integer or null",
        ),
        (
            {"name": "A", "plan": "pro", "monthlyEvaluationLimit": 5},
            "Field 'monthlyEvaluationLimit' can only be chosen on the enterprise plan"
            " (the pro plan's limit is 1000000)",
        ),
    ],
)
def test_create_refuses_invalid_fields(admin_api, body, message) -> None:
    answer = admin_api.post("/organizations", body)
    assert (answer.status, answer.body) == (
        400,
        {"status": 400, "error": "Bad Request", "message": message},
    )


def test_body_must_be_a_json_object(admin_api) -> None:
    answer = admin_api.post("/organizations", ["name"])
    assert (answer.status, answer.body["message"]) == (400, "The body must be a JSON object")
    answer = admin_api.post(
        "/organizations", body="{", headers={"Content-Type": "application/json"}
    )
    assert answer.status == 400 and answer.body["message"].startswith("Malformed JSON body")


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_non_json_body_is_415(admin_api, content_type) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    answer = admin_api.post("/organizations", body='{"name":"A","plan":"pro"}', headers=headers)
    assert (answer.status, answer.body) == (
        415,
        {
            "status": 415,
            "error": "Unsupported Media Type",
            "message": "The request body must be application/json (Content-Type header)",
        },
    )


def test_body_over_the_admin_limit_is_413(make_admin) -> None:
    from api.settings import BodyLimits

    admin_api = make_admin(body_limits=BodyLimits(admin=100))
    answer = admin_api.post("/organizations", {"name": "A" * 200, "plan": "pro"})
    assert (answer.status, answer.body) == (
        413,
        {
            "status": 413,
            "error": "Payload Too Large",
            "message": "The request body is larger than 100 bytes",
        },
    )
    assert admin_api.post("/organizations", {"name": "A", "plan": "pro"}).status == 201


@pytest.mark.parametrize(
    ("start", "patch", "expected"),
    [
        ("free", {"plan": "pro"}, ("pro", 1_000_000)),
        ("pro", {"plan": "enterprise", "monthlyEvaluationLimit": 5}, ("enterprise", 5)),
        ("enterprise", {"monthlyEvaluationLimit": 7}, ("enterprise", 7)),
        ("enterprise", {"plan": "enterprise"}, ("enterprise", 42)),
        ("pro", {"plan": "enterprise"}, ("enterprise", 1_000_000)),  # keeps its quota
        ("enterprise", {"plan": "team"}, ("team", 10_000_000)),
        ("team", {}, ("team", 10_000_000)),
    ],
)
def test_patch_changes_plan_and_limit(admin_api, start, patch, expected) -> None:
    extra = {"monthlyEvaluationLimit": 42} if start == "enterprise" else {}
    org = admin_api.organization(start, **extra)
    answer = admin_api.patch(f"/organizations/{org['id']}", patch)
    assert answer.status == 200
    assert (answer.body["plan"], answer.body["monthlyEvaluationLimit"]) == expected
    assert admin_api.get(f"/organizations/{org['id']}").body == answer.body
    assert admin_api.services.config.organization(org["id"]).monthly_evaluation_limit == expected[1]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"monthlyEvaluationLimit": 5}, "Field 'monthlyEvaluationLimit' can only be chosen on the"
         " enterprise plan (the pro plan's limit is 1000000)"),
        ({"plan": 3}, "Field 'plan' must be one of free, pro, team, enterprise"),
    ],
)  # fmt: skip
def test_patch_refuses_invalid_changes(admin_api, org, patch, message) -> None:
    answer = admin_api.patch(f"/organizations/{org['id']}", patch)
    assert (answer.status, answer.body["message"]) == (400, message)
    assert admin_api.get(f"/organizations/{org['id']}").body == org


@pytest.mark.parametrize(("method", "suffix"), [("GET", ""), ("PATCH", ""), ("GET", "/usage")])
def test_missing_organization_is_404(admin_api, method, suffix) -> None:
    answer = admin_api.call(method, f"/organizations/org_0123456789abcdef{suffix}", {"plan": "pro"})
    assert (answer.status, answer.body) == (
        404,
        {
            "status": 404,
            "error": "Not Found",
            "message": "Organization 'org_0123456789abcdef' does not exist",
        },
    )


@pytest.mark.parametrize(
    ("used", "overage", "blocked"),
    [
        (0, False, False),
        (10_000, False, False),
        (10_001, True, False),
        (10_999, True, False),
        (11_000, True, True),
    ],
)
def test_usage_of_the_current_utc_month(admin_api, used, overage, blocked) -> None:
    org = admin_api.organization("free")
    meter = admin_api.services.meter
    assert month_of(admin_api.services.clock()) == NOW_MONTH
    if used:
        assert meter.consume(org["id"], NOW_MONTH, used, 11_000) == used
    meter.consume(org["id"], NOW_MONTH - 1, 5, 11_000)  # last month does not count
    answer = admin_api.get(f"/organizations/{org['id']}/usage")
    assert (answer.status, answer.body) == (
        200,
        {
            "month": "2025-03",
            "evaluations": used,
            "limit": 10_000,
            "hardLimit": 11_000,
            "overage": overage,
            "blocked": blocked,
        },
    )
