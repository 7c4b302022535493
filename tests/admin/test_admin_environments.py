"""Environments: keys unique per organization, names, the insights switch."""

from __future__ import annotations

import re

import pytest


def test_create_list_read(admin_api, org) -> None:
    created = admin_api.post(
        f"/organizations/{org['id']}/environments",
        {"key": "production", "name": "Production", "insightsEnabled": True},
    )
    assert created.status == 201
    env_id = created.body["id"]
    assert re.fullmatch(r"env_[0-9a-f]{16}", env_id)
    expected = {"id": env_id, "key": "production", "name": "Production", "insightsEnabled": True}
    assert created.body == expected
    staging = admin_api.environment(org["id"], "staging")
    assert staging["name"] == "staging" and staging["insightsEnabled"] is False
    listed = admin_api.get(f"/organizations/{org['id']}/environments")
    assert listed.body == {"items": [expected, staging]}
    assert admin_api.get(f"/environments/{env_id}").body == expected


def test_duplicate_key_in_one_organization_is_409(admin_api, org) -> None:
    admin_api.environment(org["id"], "production")
    answer = admin_api.post(f"/organizations/{org['id']}/environments", {"key": "production"})
    assert (answer.status, answer.body) == (
        409,
        {
            "status": 409,
            "error": "Conflict",
            "message": "Environment key 'production' already exists in this organization",
        },
    )
    other = admin_api.organization()
    assert admin_api.environment(other["id"], "production")["key"] == "production"
    assert admin_api.environment(org["id"], "Production")["key"] == "Production"  # case-sensitive


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Field 'key' is required"),
        ({"key": ""}, "Field 'key' must be 1 to 128 characters long"),
        ({"key": "has space"}, "Field 'key' must match [A-Za-z0-9._-]{1,128}"),
        ({"key": "k" * 129}, "Field 'key' must be 1 to 128 characters long"),
        ({"key": "ok", "name": ""}, "Field 'name' must be 1 to 200 characters long"),
        ({"key": "ok", "insightsEnabled": "yes"}, "Field 'insightsEnabled' must be a boolean"),
    ],
)
def test_create_refuses_invalid_fields(admin_api, org, body, message) -> None:
    answer = admin_api.post(f"/organizations/{org['id']}/environments", body)
    assert (answer.status, answer.body["message"]) == (400, message)


def test_create_in_missing_organization_is_404(admin_api) -> None:
    answer = admin_api.post("/organizations/org_0000000000000000/environments", {"key": "p"})
    assert (answer.status, answer.body["message"]) == (
        404,
        "Organization 'org_0000000000000000' does not exist",
    )
    answer = admin_api.get("/organizations/org_0000000000000000/environments")
    assert answer.status == 404


def test_patch_name_and_insights(admin_api, env) -> None:
    answer = admin_api.patch(f"/environments/{env['id']}", {"insightsEnabled": False})
    assert answer.body == {**env, "insightsEnabled": False}
    answer = admin_api.patch(f"/environments/{env['id']}", {"name": "Prod"})
    assert (answer.status, answer.body) == (200, {**env, "insightsEnabled": False, "name": "Prod"})
    assert admin_api.services.config.environment(env["id"]).insights_enabled is False
    answer = admin_api.patch(f"/environments/{env['id']}", {"insightsEnabled": 1})
    assert (answer.status, answer.body["message"]) == (
        400,
        "Field 'insightsEnabled' must be a boolean",
    )


@pytest.mark.parametrize("method", ["GET", "PATCH"])
def test_missing_environment_is_404(admin_api, method) -> None:
    answer = admin_api.call(method, "/environments/env_0000000000000000", {"name": "x"})
    assert (answer.status, answer.body) == (
        404,
        {
            "status": 404,
            "error": "Not Found",
            "message": "Environment 'env_0000000000000000' does not exist",
        },
    )
