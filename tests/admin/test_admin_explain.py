"""Explain (contract 12) through the real admin API: what each rule made of one user, up to the
deciding one, and the answer evaluation gives; the flag's state; attributes checked as
contract 12 says; nothing metered, no event, no attribute value in the logs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from flagsight_core import (
    evaluate,
    register_rule_type,
    unregister_rule_type,
)
from flagsight_core.hashing import bucket

from api.metering.meter import month_of
from api.observability.metrics import render
from api.web.attributes import check_attributes
from api.web.errors import BadRequest
from tests.admin import conftest
from tests.admin.conftest import NOW, AdminClient
from tests.support.attribute_rule import AttributeIsRule
from tests.support.openapi import OpenApiChecker

SEGMENT = "beta"
RULES = [
    {"type": "SEGMENT", "segment": SEGMENT, "value": True},
    {"type": "PERCENTAGE", "percentage": 50, "value": True},
    {"type": "STATIC", "value": False},
]


def users_where(wanted: Any, count: int = 1, flag_key: str = "checkout") -> list[str]:
    """Identifiers whose percentage bucket for ``flag_key`` satisfies ``wanted``."""
    found = [f"user-{i}" for i in range(1000) if wanted(bucket(flag_key, f"user-{i}"))]
    return found[:count]


def explain_path(env: dict[str, Any], key: str = "checkout") -> str:
    return f"/environments/{env['id']}/flags/{key}/explain"


def put_flag(admin: AdminClient, env: dict[str, Any], rules: list[Any], **fields: Any) -> None:
    body = {"enabled": True, "rules": rules, **fields}
    answer = admin.put(f"/environments/{env['id']}/flags/checkout", body)
    assert answer.status in (200, 201), answer


@pytest.fixture
def flag(admin_api: AdminClient, org: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """``checkout``: the segment ``beta`` (members ``vip-1``, ``vip-2``), then half of the rest,
    then false."""
    answer = admin_api.put(f"/organizations/{org['id']}/segments/{SEGMENT}",
                           {"userIdentifiers": ["vip-1", "vip-2"]})  # fmt: skip
    assert answer.status == 200, answer
    put_flag(admin_api, env, RULES)
    return env


def test_each_rule_up_to_the_deciding_one(admin_api: AdminClient, flag: dict[str, Any]) -> None:
    [inside] = users_where(lambda b: b < 5000)
    [outside] = users_where(lambda b: b >= 5000)
    member = admin_api.post(explain_path(flag), {"userIdentifier": "vip-1"})
    assert (member.status, member.body) == (200, {
        "value": True, "matchedRuleType": "SEGMENT", "error": None,
        "rules": [{"index": 0, "type": "SEGMENT", "matched": True}],
    })  # fmt: skip
    split = admin_api.post(explain_path(flag), {"userIdentifier": inside})
    assert split.body == {
        "value": True, "matchedRuleType": "PERCENTAGE", "error": None,
        "rules": [{"index": 0, "type": "SEGMENT", "matched": False},
                  {"index": 1, "type": "PERCENTAGE", "matched": True}],
    }  # fmt: skip
    rest = admin_api.post(explain_path(flag), {"userIdentifier": outside, "attributes": {}})
    assert rest.body == {
        "value": False, "matchedRuleType": "STATIC", "error": None,
        "rules": [{"index": 0, "type": "SEGMENT", "matched": False},
                  {"index": 1, "type": "PERCENTAGE", "matched": False},
                  {"index": 2, "type": "STATIC", "matched": True}],
    }  # fmt: skip


def test_the_answer_is_evaluations_for_every_user(
    admin_api: AdminClient, flag: dict[str, Any]
) -> None:
    """As the worker serves the flag now: the cache's flag and segments, the services' clock."""
    environment = admin_api.services.config.environment(flag["id"])
    served = environment.flags["checkout"]
    for user in ["vip-1", "vip-2", *(f"user-{i}" for i in range(40))]:
        result = evaluate(served, user, environment.segments, at=NOW)
        answer = admin_api.post(explain_path(flag), {"userIdentifier": user}).body
        assert (answer["value"], answer["matchedRuleType"]) == tuple(result[:2])
        assert [rule["matched"] for rule in answer["rules"]][-1] is True
        assert not any(rule["matched"] for rule in answer["rules"][:-1])


def test_no_rule_matched_lists_every_rule(admin_api: AdminClient, env: dict[str, Any]) -> None:
    put_flag(admin_api, env, [{"type": "PERCENTAGE", "percentage": 0}])
    answer = admin_api.post(explain_path(env), {"userIdentifier": "u"})
    assert answer.body == {
        "value": False, "matchedRuleType": None, "error": None,
        "rules": [{"index": 0, "type": "PERCENTAGE", "matched": False}],
    }  # fmt: skip
    put_flag(admin_api, env, [])
    assert admin_api.post(explain_path(env), {"userIdentifier": "u"}).body["rules"] == []


@pytest.mark.parametrize(
    ("state", "error", "message"),
    [
        ({"enabled": False}, "FLAG_DISABLED", "Flag disabled"),
        ({"archived": True}, "FLAG_ARCHIVED", "Flag archived"),
        ({"enabled": False, "archived": True}, "FLAG_ARCHIVED", "Flag archived"),
    ],
)
def test_a_flag_whose_state_decides_answers_its_error(
    admin_api: AdminClient, env: dict[str, Any], state: dict[str, Any], error: str, message: str
) -> None:
    put_flag(admin_api, env, RULES[1:], **state)
    answer = admin_api.post(explain_path(env), {"userIdentifier": "u"})
    assert (answer.status, answer.body) == (200, {
        "value": False, "matchedRuleType": None,
        "error": {"type": error, "message": message}, "rules": [],
    })  # fmt: skip


def test_a_missing_flag_is_flag_not_found_and_a_missing_environment_404(
    admin_api: AdminClient, env: dict[str, Any]
) -> None:
    answer = admin_api.post(explain_path(env, "nope"), {"userIdentifier": "u"})
    assert (answer.status, answer.body) == (200, {
        "value": False, "matchedRuleType": None,
        "error": {"type": "FLAG_NOT_FOUND", "message": "Flag not found"}, "rules": [],
    })  # fmt: skip
    gone = admin_api.post("/environments/env_0000000000000000/flags/x/explain",
                          {"userIdentifier": "u"})  # fmt: skip
    assert (gone.status, gone.body["message"]) == (
        404,
        "Environment 'env_0000000000000000' does not exist",
    )
    bad_key = admin_api.post(explain_path(env, "no%20spaces"), {"userIdentifier": "u"})
    assert bad_key.status == 400 and "'flagKey' must match" in bad_key.body["message"]


def test_the_admin_token_comes_first(admin_api: AdminClient, flag: dict[str, Any]) -> None:
    answer = admin_api.post(explain_path(flag), {"userIdentifier": 7}, token=None)
    assert answer.status == 401


# -- segments by conditions (contract 12) ------------------------------------------------------

DACH_PRO = [
    {"attribute": "plan", "operator": "EQUALS", "values": ["pro"]},
    {"attribute": "country", "operator": "IN", "values": ["DE", "AT"]},
    {"attribute": "appVersion", "operator": "SEMVER_GREATER_THAN", "values": ["2.2.99"]},
]


def held(*flags: bool) -> list[dict[str, Any]]:
    """``DACH_PRO``'s conditions as explain reports them, each held or not."""
    return [
        {"attribute": c["attribute"], "operator": c["operator"], "held": flag}
        for c, flag in zip(DACH_PRO, flags, strict=True)
    ]


@pytest.fixture
def dach(admin_api: AdminClient, org: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """``dach-pro``: always alice, never bob, else pro users in DE or AT on 2.3 or later; the
    flag asks it through a SEGMENT rule, then through a percentage of 100 within it."""
    body = {"userIdentifiers": ["alice"], "excludedUserIdentifiers": ["bob"],
            "conditions": DACH_PRO}  # fmt: skip
    answer = admin_api.put(f"/organizations/{org['id']}/segments/dach-pro", body)
    assert answer.status == 200, answer
    put_flag(admin_api, env, [
        {"type": "SEGMENT", "segment": "dach-pro", "value": False},
        {"type": "PERCENTAGE", "percentage": 100, "segment": "dach-pro"},
        {"type": "STATIC", "value": True},
    ])  # fmt: skip
    return env


PRO_IN_DE = {"plan": "pro", "country": "DE", "appVersion": "2.3.0"}


@pytest.mark.parametrize(
    ("user", "attributes", "conditions", "in_segment"),
    [
        ("carol", PRO_IN_DE, held(True, True, True), True),
        ("carol", {**PRO_IN_DE, "country": "FR"}, held(True, False, True), False),
        ("carol", {"plan": "pro", "appVersion": "2.2.99"}, held(True, False, False), False),
        ("carol", None, held(False, False, False), False),
        ("alice", None, held(False, False, False), True),  # listed: in, whatever they say
        ("bob", PRO_IN_DE, held(True, True, True), False),  # excluded: out, whatever they say
    ],
)
def test_a_segment_of_conditions_reports_each_one(
    admin_api: AdminClient, dach: dict[str, Any], user: str, attributes: Any,
    conditions: list[dict[str, Any]], in_segment: bool,
) -> None:  # fmt: skip
    answer = admin_api.post(explain_path(dach), {"userIdentifier": user,
                                                 "attributes": attributes})  # fmt: skip
    assert answer.status == 200, answer
    first = {"index": 0, "type": "SEGMENT", "matched": in_segment, "conditions": conditions}
    if in_segment:
        assert answer.body == {"value": False, "matchedRuleType": "SEGMENT", "error": None,
                               "rules": [first]}  # fmt: skip
        return
    # outside the segment, the percentage within it does not apply either: the last rule decides
    assert answer.body == {
        "value": True, "matchedRuleType": "STATIC", "error": None,
        "rules": [first,
                  {"index": 1, "type": "PERCENTAGE", "matched": False, "conditions": conditions},
                  {"index": 2, "type": "STATIC", "matched": True}],
    }  # fmt: skip
    environment = admin_api.services.config.environment(dach["id"])
    result = evaluate(environment.flags["checkout"], user, environment.segments, attributes,
                      at=NOW)  # fmt: skip
    assert tuple(result[:2]) == (answer.body["value"], answer.body["matchedRuleType"])


def test_a_percentage_within_a_segment_reports_its_conditions(
    admin_api: AdminClient, org: dict[str, Any], env: dict[str, Any]
) -> None:
    body = {"conditions": DACH_PRO}
    assert admin_api.put(f"/organizations/{org['id']}/segments/dach-pro", body).status == 200
    put_flag(admin_api, env, [{"type": "PERCENTAGE", "percentage": 100, "segment": "dach-pro"}])
    answer = admin_api.post(explain_path(env), {"userIdentifier": "u", "attributes": PRO_IN_DE})
    assert answer.body == {
        "value": True, "matchedRuleType": "PERCENTAGE", "error": None,
        "rules": [{"index": 0, "type": "PERCENTAGE", "matched": True,
                   "conditions": held(True, True, True)}],
    }  # fmt: skip


# -- attributes, and a rule that reads one ---------------------------------------------------


@pytest.fixture
def attribute_rule(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """ATTRIBUTE_IS for one test (list it before the API's fixtures: registered before them,
    forgotten after); answers are checked against a document that describes it."""
    register_rule_type(AttributeIsRule)
    monkeypatch.setattr(conftest, "_CHECKER", OpenApiChecker())
    yield
    unregister_rule_type("ATTRIBUTE_IS")


def test_a_rule_registered_here_reads_the_attributes_and_says_what_it_asked(
    attribute_rule: None, admin_api: AdminClient, env: dict[str, Any]
) -> None:
    rules = [{"type": "ATTRIBUTE_IS", "attribute": "plan", "equals": "pro"}, RULES[2]]
    put_flag(admin_api, env, rules)
    pro = admin_api.post(explain_path(env), {"userIdentifier": "u", "attributes": {"plan": "pro"}})
    assert pro.body == {
        "value": True, "matchedRuleType": "ATTRIBUTE_IS", "error": None,
        "rules": [{"index": 0, "type": "ATTRIBUTE_IS", "matched": True,
                   "conditions": [{"attribute": "plan", "operator": "EQUALS", "held": True}]}],
    }  # fmt: skip
    for attributes in ({"plan": "free"}, {"plan": 7}, {"country": "pro"}, None):
        body = {"userIdentifier": "u", "attributes": attributes}
        other = admin_api.post(explain_path(env), body).body
        assert other["rules"] == [
            {"index": 0, "type": "ATTRIBUTE_IS", "matched": False,
             "conditions": [{"attribute": "plan", "operator": "EQUALS", "held": False}]},
            {"index": 1, "type": "STATIC", "matched": True},
        ], attributes  # fmt: skip


def test_attributes_of_every_shape_are_taken(admin_api: AdminClient, flag: dict[str, Any]) -> None:
    attributes = {"country": "DE", "age": 42, "score": -0.5, "beta": True, "tags": ["a", "b"],
                  "empty": [], "long": "x" * 1024, **{f"a{i}": i for i in range(43)}}  # fmt: skip
    assert len(attributes) == 50
    answer = admin_api.post(explain_path(flag), {"userIdentifier": "vip-1",
                                                 "attributes": attributes})  # fmt: skip
    assert answer.status == 200 and answer.body["value"] is True


NAME_RULE = "a name is 1 to 64 letters, digits, '.', '_' or '-'"
VALUE_RULE = (
    "must be a string of at most 1024 characters, a finite number, a boolean or an array of at"
    " most 100 such strings"
)
BAD_ATTRIBUTES = [
    ([], "Field 'attributes' must be a JSON object of attributes by name"),
    ("plan=pro", "Field 'attributes' must be a JSON object of attributes by name"),
    ({"bad name": 1}, f"Field 'attributes' has an attribute named 'bad name'; {NAME_RULE}"),
    ({"a" * 65: 1}, f"Field 'attributes' has an attribute named '{'a' * 64}…'; {NAME_RULE}"),
    ({"plan\n": "pro"}, f"Field 'attributes' has an attribute named 'plan\\n'; {NAME_RULE}"),
    ({"userIdentifier": "u2"}, "Field 'attributes.userIdentifier' is not allowed: the name is"
                               " reserved for the user's identifier, which conditions read by"
                               " that name"),
    ({"plan": None}, f"Field 'attributes.plan' {VALUE_RULE}"),
    ({"plan": {"name": "pro"}}, f"Field 'attributes.plan' {VALUE_RULE}"),
    ({"plan": "x" * 1025}, "Field 'attributes.plan' must be at most 1024 characters long"),
    ({"tags": ["a", 1]}, "Field 'attributes.tags[1]' must be a string: an array attribute holds"
                         " strings only"),
    ({"tags": ["a", "x" * 1025]}, "Field 'attributes.tags[1]' must be at most 1024 characters"
                                  " long"),
    ({"tags": ["a"] * 101}, "Field 'attributes.tags' has 101 items; at most 100 are allowed"),
    ({"big": 10**400}, "Field 'attributes.big' must be a finite number"),
    ({f"a{i}": i for i in range(51)}, "Field 'attributes' has 51 attributes; at most 50 are"
                                      " allowed"),
]  # fmt: skip
"""Bad attributes and the 400's words: those of ``POST /v1/evaluate`` (``api.web.attributes``),
so the two doors refuse alike."""


@pytest.mark.parametrize(("attributes", "message"), BAD_ATTRIBUTES)
def test_bad_attributes_are_400_naming_the_field(
    admin_api: AdminClient, flag: dict[str, Any], attributes: Any, message: str
) -> None:
    answer = admin_api.post(explain_path(flag), {"userIdentifier": "u", "attributes": attributes})
    assert (answer.status, answer.body) == (400, {
        "status": 400, "error": "Bad Request", "message": message,
    })  # fmt: skip
    with pytest.raises(BadRequest) as public:  # the public API's validator says the same
        check_attributes(attributes)
    assert public.value.description == message


def test_a_number_no_double_holds_is_named(admin_api: AdminClient, flag: dict[str, Any]) -> None:
    """1e999 is valid JSON: the field is named, as ``/v1/evaluate`` names it."""
    body = b'{"userIdentifier": "u", "attributes": {"big": 1e999}}'
    answer = admin_api.post(explain_path(flag), body=body,
                            headers={"Content-Type": "application/json"})  # fmt: skip
    assert (answer.status, answer.body["message"]) == (
        400,
        "Field 'attributes.big' must be a finite number",
    )
    malformed = admin_api.post(explain_path(flag), body=b'{"userIdentifier": NaN}',
                               headers={"Content-Type": "application/json"})  # fmt: skip
    assert malformed.status == 400 and malformed.body["message"].startswith("Malformed JSON")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Field 'userIdentifier' is required"),
        ({"userIdentifier": ""}, "Field 'userIdentifier' must be a string of 1 to 1024 characters"),
        ({"userIdentifier": "x" * 1025},
         "Field 'userIdentifier' must be a string of 1 to 1024 characters"),
        ({"userIdentifier": 7}, "Field 'userIdentifier' must be a string of 1 to 1024 characters"),
    ],
)  # fmt: skip
def test_a_bad_identifier_is_400_naming_it(
    admin_api: AdminClient, flag: dict[str, Any], body: dict[str, Any], message: str
) -> None:
    answer = admin_api.post(explain_path(flag), body)
    assert (answer.status, answer.body["message"]) == (400, message)


# -- not metered, no event, no attribute value logged ----------------------------------------


class NoEventLog:
    """An event log that records whatever is asked of it (explain must ask nothing)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.asked.append(name)
        raise AssertionError(f"explain used the event log ({name})")


MARKER = "marker-7f3e9c-attribute-value"


def test_nothing_is_metered_or_logged(
    admin_api: AdminClient, org: dict[str, Any], flag: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    services = admin_api.services
    services.event_log = NoEventLog()  # type: ignore[assignment]
    usage_path = f"/organizations/{org['id']}/usage"
    before = admin_api.get(usage_path).body
    metrics_before = render(services.metrics)[0]
    caplog.set_level(logging.DEBUG)
    for i in range(25):
        body = {"userIdentifier": f"user-{i}", "attributes": {"email": MARKER, "tags": [MARKER]}}
        assert admin_api.post(explain_path(flag), body).status == 200
    assert admin_api.get(usage_path).body == before
    assert before["evaluations"] == 0
    assert services.meter.usage(org["id"], month_of(NOW)) == 0  # the meter itself
    assert services.event_log.asked == []  # type: ignore[attr-defined]
    assert render(services.metrics)[0] == metrics_before
    assert MARKER not in caplog.text
