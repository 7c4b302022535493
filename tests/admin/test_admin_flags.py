"""Flags: put creates (201) or replaces (200); rules validated; segments must exist."""

from __future__ import annotations

import re

import pytest
from flagsight_core import Flag, PercentageRule, SegmentRule, StaticRule, evaluate

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def flag_path(env: dict, key: str = "checkout") -> str:
    return f"/environments/{env['id']}/flags/{key}"


def test_put_creates_then_replaces(admin_api, env) -> None:
    rules = [{"type": "PERCENTAGE", "percentage": 12.5}, {"type": "STATIC", "value": False}]
    created = admin_api.put(flag_path(env), {"enabled": True, "rules": rules})
    assert created.status == 201
    assert TIMESTAMP.fullmatch(created.body.pop("updatedAt"))
    assert created.body.pop("lifecycle")["stage"] == "new"  # tests/admin/test_admin_lifecycle.py
    assert created.body == {
        "key": "checkout",
        "enabled": True,
        "archived": False,
        "rules": [
            {"type": "PERCENTAGE", "percentage": 12.5, "value": True},
            {"type": "STATIC", "value": False},
        ],
        "kind": "temporary",
        "owner": None,
        "expiresAt": None,
    }
    replaced = admin_api.put(flag_path(env), {"enabled": False, "archived": True, "rules": []})
    assert replaced.status == 200
    assert (replaced.body["enabled"], replaced.body["archived"], replaced.body["rules"]) == (
        False,
        True,
        [],
    )
    got = admin_api.get(flag_path(env))
    assert (got.status, got.body) == (200, replaced.body)
    cached = admin_api.services.config.environment(env["id"]).flags["checkout"]
    assert cached == Flag("checkout", enabled=False, archived=True, rules=())


def test_flag_keys_are_case_sensitive_and_listed_by_key(admin_api, env) -> None:
    for key in ("b.flag", "A_flag", "a-flag"):
        assert admin_api.put(flag_path(env, key), {"enabled": True, "rules": []}).status == 201
    listed = admin_api.get(f"/environments/{env['id']}/flags")
    assert [f["key"] for f in listed.body["items"]] == ["A_flag", "a-flag", "b.flag"]
    assert admin_api.get(flag_path(env, "A-flag")).status == 404


def test_rules_reach_evaluation(admin_api, org, env) -> None:
    admin_api.put(f"/organizations/{org['id']}/segments/beta", {"userIdentifiers": ["vip"]})
    rules = [{"type": "SEGMENT", "segment": "beta"}, {"type": "PERCENTAGE", "percentage": 0}]
    admin_api.put(flag_path(env), {"enabled": True, "rules": rules})
    config = admin_api.services.config.environment(env["id"])
    flag = config.flags["checkout"]
    assert flag.rules == (SegmentRule("beta"), PercentageRule(0.0))
    assert evaluate(flag, "vip", config.segments).value is True
    assert evaluate(flag, "someone", config.segments).value is False
    admin_api.put(flag_path(env), {"enabled": True, "rules": [{"type": "STATIC"}]})
    assert admin_api.services.config.environment(env["id"]).flags["checkout"].rules == (
        StaticRule(),
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"rules": []}, "Field 'enabled' is required"),
        ({"enabled": "true", "rules": []}, "Field 'enabled' must be a boolean"),
        ({"enabled": True}, "Field 'rules' is required"),
        ({"enabled": True, "rules": {}}, "Field 'rules' must be an array"),
        ({"enabled": True, "archived": 0, "rules": []}, "Field 'archived' must be a boolean"),
        ({"enabled": True, "rules": [{"type": "STATIC"}, "x"]}, "Field 'rules[1]' must be an object"),
        ({"enabled": True, "rules": [{"type": "NOPE"}]}, "Field 'rules[0].type' must be one of STATIC, SEGMENT, PERCENTAGE"),
        ({"enabled": True, "rules": [{"type": "STATIC", "value": 1}]}, "Field 'rules[0].value' must be a boolean"),
        ({"enabled": True, "rules": [{"type": "PERCENTAGE", "percentage": 100.5}]}, "Field 'rules[0].percentage' must be a number from 0 to 100"),
        ({"enabled": True, "rules": [{"type": "PERCENTAGE", "percentage": 1.234}]}, "Field 'rules[0].percentage' must have at most two decimals"),
        ({"enabled": True, "rules": [{"type": "SEGMENT"}]}, "Field 'rules[0].segment' must be a segment key ([A-Za-z0-9._-]{1,128})"),
        ({"enabled": True, "rules": [{"type": "STATIC"}, {"type": "SEGMENT", "segment": "ghost"}]},
         "Field 'rules[1].segment' names segment 'ghost', which does not exist in this organization"),
        ({"enabled": True, "rules": [{"type": "STATIC"}] * 101}, "Field 'rules' has 101 items; at most 100 are allowed"),
    ],
)  # fmt: skip
def test_put_refuses_invalid_fields(admin_api, env, body, message) -> None:
    answer = admin_api.put(flag_path(env), body)
    assert (answer.status, answer.body) == (
        400,
        {"status": 400, "error": "Bad Request", "message": message},
    )
    assert admin_api.get(flag_path(env)).status == 404


def test_segment_of_another_organization_does_not_count(admin_api, env) -> None:
    other = admin_api.organization()
    admin_api.put(f"/organizations/{other['id']}/segments/beta", {"userIdentifiers": ["a"]})
    answer = admin_api.put(
        flag_path(env), {"enabled": True, "rules": [{"type": "SEGMENT", "segment": "beta"}]}
    )
    assert answer.status == 400


@pytest.mark.parametrize("key", ["has space", "x" * 129, "semi;colon"])
def test_put_refuses_an_invalid_flag_key(admin_api, env, key) -> None:
    answer = admin_api.put(flag_path(env, key), {"enabled": True, "rules": []})
    assert answer.status == 400
    assert answer.body["message"].startswith("'flagKey' must match [A-Za-z0-9._-]{1,128}")


def test_delete(admin_api, env) -> None:
    admin_api.put(flag_path(env), {"enabled": True, "rules": []})
    answer = admin_api.delete(flag_path(env))
    assert (answer.status, answer.body) == (204, None)
    assert "checkout" not in admin_api.services.config.environment(env["id"]).flags
    again = admin_api.delete(flag_path(env))
    assert (again.status, again.body) == (
        404,
        {
            "status": 404,
            "error": "Not Found",
            "message": "Flag 'checkout' does not exist in this environment",
        },
    )


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("GET", ""), ("GET", "/checkout"), ("PUT", "/checkout"), ("DELETE", "/checkout")],
)
def test_missing_environment_is_404(admin_api, method, suffix) -> None:
    path = f"/environments/env_0000000000000000/flags{suffix}"
    answer = admin_api.call(method, path, {"enabled": True, "rules": []})
    assert answer.status == 404
    if method != "DELETE":
        assert answer.body["message"] == "Environment 'env_0000000000000000' does not exist"


def test_flag_missing_in_existing_environment_is_404(admin_api, env) -> None:
    answer = admin_api.get(flag_path(env, "nope"))
    assert (answer.status, answer.body["message"]) == (
        404,
        f"Flag 'nope' does not exist in environment '{env['id']}'",
    )


def test_environment_version_moves_with_its_flags_only(admin_api, org, env) -> None:
    other = admin_api.environment(org["id"], "staging")
    config = admin_api.services.config
    before, other_before = (
        config.environment(env["id"]).version,
        config.environment(other["id"]).version,
    )
    admin_api.put(flag_path(env), {"enabled": True, "rules": []})
    assert config.environment(env["id"]).version > before
    assert config.environment(other["id"]).version == other_before
    admin_api.put(f"/organizations/{org['id']}/segments/s", {"userIdentifiers": []})
    assert config.environment(other["id"]).version > other_before  # segments are organization-wide
