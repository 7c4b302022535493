"""Segments: put replaces the whole set, reads, lists, deletes (refused while in use)."""

from __future__ import annotations

import pytest


def path(org: dict, key: str = "beta") -> str:
    return f"/organizations/{org['id']}/segments/{key}"


def test_put_then_get_then_replace(admin_api, org, env) -> None:
    put = admin_api.put(path(org), {"userIdentifiers": ["u1", "u2", "u1", "u3"]})
    assert put.status == 200
    assert put.body == {"key": "beta", "size": 3, "updatedAt": put.body["updatedAt"]}
    got = admin_api.get(path(org))
    assert got.body == {**put.body, "userIdentifiers": ["u1", "u2", "u3"]}
    membership = admin_api.services.config.environment(env["id"]).segments["beta"]
    assert ("u2" in membership, "u4" in membership) == (True, False)

    replaced = admin_api.put(path(org), {"userIdentifiers": ["u4"]})
    assert (replaced.status, replaced.body["size"]) == (200, 1)
    assert admin_api.get(path(org)).body["userIdentifiers"] == ["u4"]
    membership = admin_api.services.config.environment(env["id"]).segments["beta"]
    assert ("u2" in membership, "u4" in membership) == (False, True)


def test_list_has_summaries_sorted_by_key(admin_api, org) -> None:
    admin_api.put(path(org, "zeta"), {"userIdentifiers": ["a"]})
    admin_api.put(path(org, "alpha"), {"userIdentifiers": []})
    listed = admin_api.get(f"/organizations/{org['id']}/segments")
    assert [(s["key"], s["size"]) for s in listed.body["items"]] == [("alpha", 0), ("zeta", 1)]
    assert all("userIdentifiers" not in s for s in listed.body["items"])


def test_segments_belong_to_their_organization(admin_api, org) -> None:
    admin_api.put(path(org), {"userIdentifiers": ["a"]})
    other = admin_api.organization()
    assert admin_api.get(path(other)).status == 404
    assert admin_api.get(path(org, "Beta")).status == 404  # case-sensitive


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Field 'userIdentifiers' is required"),
        ({"userIdentifiers": "u1"}, "Field 'userIdentifiers' must be an array"),
        ({"userIdentifiers": ["ok", 5]}, "Field 'userIdentifiers[1]' must be a string of 1 to 1024 characters"),
        ({"userIdentifiers": [""]}, "Field 'userIdentifiers[0]' must be a string of 1 to 1024 characters"),
        ({"userIdentifiers": ["a", "b", "x" * 1025]}, "Field 'userIdentifiers[2]' must be a string of 1 to 1024 characters"),
    ],
)  # fmt: skip
def test_put_refuses_invalid_fields(admin_api, org, body, message) -> None:
    answer = admin_api.put(path(org), body)
    assert (answer.status, answer.body) == (
        400,
        {"status": 400, "error": "Bad Request", "message": message},
    )
    assert admin_api.get(path(org)).status == 404


def test_put_refuses_more_than_a_million_identifiers(admin_api, org) -> None:
    answer = admin_api.put(path(org), {"userIdentifiers": ["u"] * 1_000_001})
    assert (answer.status, answer.body["message"]) == (
        400,
        "Field 'userIdentifiers' has 1000001 items; at most 1000000 are allowed",
    )


def test_put_refuses_an_invalid_key(admin_api, org) -> None:
    answer = admin_api.put(path(org, "bad key!"), {"userIdentifiers": []})
    assert answer.status == 400
    assert answer.body["message"].startswith("'segmentKey' must match [A-Za-z0-9._-]{1,128}")


def test_missing_organization_and_segment_are_404(admin_api, org) -> None:
    missing_org = {"id": "org_0000000000000000"}
    assert admin_api.put(path(missing_org), {"userIdentifiers": ["a"]}).status == 404
    assert admin_api.get(f"/organizations/{missing_org['id']}/segments").status == 404
    answer = admin_api.get(path(org, "nope"))
    assert (answer.status, answer.body["message"]) == (
        404,
        f"Segment 'nope' does not exist in organization '{org['id']}'",
    )
    answer = admin_api.delete(path(org, "nope"))
    assert (answer.status, answer.body["message"]) == (
        404,
        "Segment 'nope' does not exist in this organization",
    )


def test_delete_refused_while_a_rule_names_it(admin_api, org, env) -> None:
    admin_api.put(path(org), {"userIdentifiers": ["a"]})
    rules = [{"type": "SEGMENT", "segment": "beta"}]
    flag = f"/environments/{env['id']}/flags/banner"
    assert admin_api.put(flag, {"enabled": True, "rules": rules}).status == 201
    answer = admin_api.delete(path(org))
    assert (answer.status, answer.body) == (
        409,
        {
            "status": 409,
            "error": "Conflict",
            "message": "Segment 'beta' is used by flag 'banner' in environment 'production';"
            " remove that rule first",
        },
    )
    assert admin_api.put(flag, {"enabled": True, "rules": []}).status == 200
    assert (admin_api.delete(path(org)).status, admin_api.get(path(org)).status) == (204, 404)
    assert "beta" not in admin_api.services.config.environment(env["id"]).segments
