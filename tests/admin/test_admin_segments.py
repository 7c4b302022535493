"""Segments: put replaces the whole segment (its identifiers, its excluded identifiers and its
conditions, contract 12), reads, lists, deletes (refused while in use), restores."""

from __future__ import annotations

from typing import Any

import pytest
from flagsight_core import evaluate
from flagsight_core.conditions import conditions_from_json


def path(org: dict, key: str = "beta") -> str:
    return f"/organizations/{org['id']}/segments/{key}"


def test_put_then_get_then_replace(admin_api, org, env) -> None:
    put = admin_api.put(path(org), {"userIdentifiers": ["u1", "u2", "u1", "u3"]})
    assert put.status == 200
    assert put.body == {
        "key": "beta", "size": 3, "excludedSize": 0, "conditions": [],
        "updatedAt": put.body["updatedAt"],
    }  # fmt: skip
    got = admin_api.get(path(org))
    assert got.body == {
        **put.body, "userIdentifiers": ["u1", "u2", "u3"], "excludedUserIdentifiers": []
    }  # fmt: skip
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


# --- contract 12: exclusions and conditions ------------------------------------------------------

PRO = {"attribute": "plan", "operator": "EQUALS", "values": ["pro"]}
GERMANY = {"attribute": "country", "operator": "IN", "values": ["DE", "AT"]}


def test_conditions_and_exclusions_are_kept_and_echoed(admin_api, org) -> None:
    body = {
        "userIdentifiers": ["alice", "ann"],
        "excludedUserIdentifiers": ["bob", "bob", "bea"],
        "conditions": [PRO, GERMANY, {"attribute": "beta", "operator": "EXISTS"}],
    }
    put = admin_api.put(path(org), body)
    conditions = [PRO, GERMANY, {"attribute": "beta", "operator": "EXISTS", "values": []}]
    assert (put.status, put.body) == (200, {
        "key": "beta", "size": 2, "excludedSize": 2, "conditions": conditions,
        "updatedAt": put.body["updatedAt"],
    })  # fmt: skip
    assert admin_api.get(path(org)).body == {
        **put.body, "userIdentifiers": ["alice", "ann"], "excludedUserIdentifiers": ["bob", "bea"]
    }  # fmt: skip
    listed = admin_api.get(f"/organizations/{org['id']}/segments").body["items"]
    assert listed == [put.body]


@pytest.mark.parametrize(
    "condition",
    [
        {"attribute": "d", "operator": "BEFORE", "values": ["2024-01-01T00:00:00." + "1" * 5_000 + "Z"]},
        {"attribute": "v", "operator": "SEMVER_EQUALS", "values": ["1.0.0-" + "7" * 5_000]},
    ],
)  # fmt: skip
def test_values_past_pythons_int_limit_are_taken_as_any(admin_api, org, condition) -> None:
    """An instant's fraction and a version's numeric identifier may have any number of digits;
    past Python's 4,300 a PUT of one was a 500."""
    put = admin_api.put(path(org), {"conditions": [condition]})
    assert (put.status, put.body["conditions"]) == (200, [condition])


def test_an_expression_within_the_program_bound_is_taken_and_one_stored_before_served(
    admin_api, org, env
) -> None:
    """``^.{0,256}$`` compiles to 2,306 RE2 instructions: taken. One past the bound that a
    segment held before the bound existed is still served (only writes are checked)."""
    bounded = condition(attribute="bio", operator="MATCHES", values=["^.{0,256}$"])
    assert admin_api.put(path(org), {"conditions": [bounded]}).status == 200
    large = {"attribute": "bio", "operator": "MATCHES", "values": ["(.{0,100}){0,10}x"]}
    store = admin_api.services.store
    store.put_segment(org["id"], "older", [], conditions=conditions_from_json([large]))
    flag = {"enabled": True, "rules": [{"type": "SEGMENT", "segment": "older"}]}
    admin_api.put(f"/environments/{env['id']}/flags/banner", flag)
    admin_api.services.config.refresh()
    config = admin_api.services.config.environment(env["id"])
    assert evaluate(config.flags["banner"], "u", config.segments, {"bio": "ax"}).value is True


@pytest.mark.parametrize("number", [b"1e400", b"-" + b"9" * 5_000])
def test_a_number_no_double_holds_is_named_not_malformed(admin_api, org, number) -> None:
    """Valid JSON past a double's range (past Python's 4,300-digit int too): the 400 names
    the value, as for any other number a condition does not take."""
    body = b'{"conditions":[{"attribute":"seats","operator":"LESS_THAN","values":[' + number
    answer = admin_api.put(
        path(org), body=body + b"]}]}", headers={"Content-Type": "application/json"}
    )
    assert (answer.status, answer.body["message"]) == (
        400, "Field 'conditions[0].values[0]' must be a finite number",
    )  # fmt: skip


def test_an_empty_body_is_an_empty_segment(admin_api, org, env) -> None:
    put = admin_api.put(path(org), {})
    assert (put.status, put.body["size"], put.body["excludedSize"], put.body["conditions"]) == (
        200, 0, 0, [],
    )  # fmt: skip
    assert "anyone" not in admin_api.services.config.environment(env["id"]).segments["beta"]


@pytest.mark.parametrize(
    ("user", "attributes", "member"),
    [
        ("alice", {}, True),  # listed: in, whatever the conditions say
        ("bob", {"plan": "pro", "country": "DE"}, False),  # excluded wins over conditions
        ("carol", {"plan": "pro", "country": "AT"}, True),  # every condition holds
        ("carol", {"plan": "pro", "country": "FR"}, False),  # one does not
        ("carol", {}, False),
    ],
)
def test_listed_then_excluded_then_conditions(admin_api, org, env, user, attributes, member):
    body = {"userIdentifiers": ["alice"], "excludedUserIdentifiers": ["bob", "alice"],
            "conditions": [PRO, GERMANY]}  # fmt: skip
    admin_api.put(path(org), body)
    flag = {"enabled": True, "rules": [{"type": "SEGMENT", "segment": "beta"}]}
    admin_api.put(f"/environments/{env['id']}/flags/banner", flag)
    config = admin_api.services.config.environment(env["id"])
    assert evaluate(config.flags["banner"], user, config.segments, attributes).value is member


def condition(**fields: Any) -> dict[str, Any]:
    return {"attribute": "plan", "operator": "EQUALS", "values": ["pro"], **fields}


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        ("pro", "Field 'conditions' must be an array"),
        ([PRO, PRO, condition(operator="LESS_THAN", values=["10"])],
         "Field 'conditions[2].values[0]' must be a finite number"),
        ([condition(operator="MATCHES", values=["(unclosed"])],
         "Field 'conditions[0].values[0]' must be an RE2 regular expression of at most 256"
         " characters: missing ): (unclosed"),
        ([PRO, condition(operator="MATCHES", values=["(.{0,100}){0,10}x"])],
         "Field 'conditions[1].values[0]' must compile to at most 2,500 RE2 instructions (it"
         " compiles to 9,014; a counted repetition such as {0,100} multiplies what it repeats)"),
        ([condition(operator="SEMVER_LESS_THAN", values=["2.3"])],
         "Field 'conditions[0].values[0]' must be a Semantic Versioning 2.0.0 version (such as"
         " 1.4.0 or 2.0.0-rc.1)"),
        ([condition(operator="BEFORE", values=["2025-06-01"])],
         "Field 'conditions[0].values[0]' must be an RFC 3339 instant with its offset (such as"
         " 2025-06-01T00:00:00Z) or Unix seconds"),
        ([condition(operator="EXISTS")],
         "Field 'conditions[0].values' must hold no values for EXISTS"),
        ([condition(operator="IN", values=[])],
         "Field 'conditions[0].values' must hold 1 to 100 values for IN"),
        ([condition(operator="LIKE")],
         "Field 'conditions[0].operator' must be one of EQUALS, NOT_EQUALS, IN, NOT_IN, CONTAINS,"
         " STARTS_WITH, ENDS_WITH, MATCHES, LESS_THAN, LESS_OR_EQUAL, GREATER_THAN,"
         " GREATER_OR_EQUAL, SEMVER_EQUALS, SEMVER_LESS_THAN, SEMVER_GREATER_THAN, BEFORE,"
         " AFTER, EXISTS"),
        ([condition(attribute="bad name")],
         "Field 'conditions[0].attribute' must be an attribute name ([A-Za-z0-9._-]{1,64})"),
        ([PRO] * 21, "Field 'conditions' has 21 items; at most 20 are allowed"),
    ],
)  # fmt: skip
def test_bad_conditions_are_refused_naming_the_field(admin_api, org, conditions, message):
    answer = admin_api.put(path(org), {"userIdentifiers": ["a"], "conditions": conditions})
    assert (answer.status, answer.body) == (
        400,
        {"status": 400, "error": "Bad Request", "message": message},
    )
    assert admin_api.get(path(org)).status == 404


def test_excluded_identifiers_are_checked_as_the_members(admin_api, org) -> None:
    answer = admin_api.put(path(org), {"excludedUserIdentifiers": ["ok", ""]})
    assert (answer.status, answer.body["message"]) == (
        400,
        "Field 'excludedUserIdentifiers[1]' must be a string of 1 to 1024 characters",
    )


def test_a_percentage_rule_names_a_segment_that_exists_and_keeps_it_in_use(
    admin_api, org, env
) -> None:
    flag = f"/environments/{env['id']}/flags/banner"
    rules = [{"type": "PERCENTAGE", "percentage": 10, "segment": "beta"}]
    answer = admin_api.put(flag, {"enabled": True, "rules": rules})
    assert (answer.status, answer.body["message"]) == (
        400,
        "Field 'rules[0].segment' names segment 'beta', which does not exist in this organization",
    )
    admin_api.put(path(org), {"conditions": [PRO]})
    put = admin_api.put(flag, {"enabled": True, "rules": rules})
    assert (put.status, put.body["rules"]) == (201, [{**rules[0], "value": True}])
    answer = admin_api.delete(path(org))
    assert (answer.status, answer.body["message"]) == (
        409,
        "Segment 'beta' is used by flag 'banner' in environment 'production';"
        " remove that rule first",
    )


@pytest.mark.parametrize(
    ("segment", "message"),
    [
        ("", "Field 'rules[0].segment' must be a segment key ([A-Za-z0-9._-]{1,128})"),
        (None, "Field 'rules[0].segment' must be a segment key ([A-Za-z0-9._-]{1,128})"),
        ("bad key", "Field 'rules[0].segment' must be a segment key ([A-Za-z0-9._-]{1,128})"),
    ],
)
def test_a_percentage_rule_segment_is_a_key(admin_api, env, segment, message) -> None:
    rules = [{"type": "PERCENTAGE", "percentage": 10, "segment": segment}]
    answer = admin_api.put(
        f"/environments/{env['id']}/flags/banner", {"enabled": True, "rules": rules}
    )
    assert (answer.status, answer.body["message"]) == (400, message)


def test_restore_puts_a_segment_with_conditions_back(admin_api, org, env) -> None:
    body = {"userIdentifiers": ["alice"], "excludedUserIdentifiers": ["bob"],
            "conditions": [PRO, GERMANY]}  # fmt: skip
    first = admin_api.put(path(org), body).body
    admin_api.put(path(org), {"userIdentifiers": ["dave"]})
    change = admin_api.get(f"/organizations/{org['id']}/audit").body["items"][0]
    assert (change["action"], change["before"], change["after"]["conditions"]) == (
        "segment.put", first, [],
    )  # fmt: skip
    restored = admin_api.post(f"/audit/{change['id']}/restore")
    assert (restored.status, restored.body["after"]) == (201, first)
    got = admin_api.get(path(org)).body
    assert got == {**first, "userIdentifiers": ["alice"], "excludedUserIdentifiers": ["bob"]}
    admin_api.put(f"/environments/{env['id']}/flags/banner",
                  {"enabled": True, "rules": [{"type": "SEGMENT", "segment": "beta"}]})  # fmt: skip
    config = admin_api.services.config.environment(env["id"])
    de = {"plan": "pro", "country": "DE"}
    assert evaluate(config.flags["banner"], "carol", config.segments, de).value
    assert not evaluate(config.flags["banner"], "bob", config.segments, de).value
