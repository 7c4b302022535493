"""The flag page's "try a user" form (contract 12's explain), through Falcon's test client: the
answer and each rule in words, attributes as JSON or rows (and both), bad input answered on
the form in the admin API's words, the flag as served rather than the editor's draft, and
nothing metered."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from flagsight_core import register_rule_type, unregister_rule_type
from flagsight_core.conditions import Condition, Operator
from flagsight_core.hashing import bucket
from flagsight_core.segments import SegmentMembership, segment_of

from api.metering.meter import month_of
from api.serving.services import Services
from api.web.admin.explain import Explained, ExplainRequest, explained
from api.web.dashboard import flags
from api.web.dashboard.try_user import segment_words
from tests.admin.test_admin_explain import AttributeIsRule
from tests.dashboard.conftest import DashClient
from tests.dashboard.test_flag_lifecycle_pages import text_of as page_text
from tests.support.admin import Admin, Tenant

RULES = [
    {"type": "SEGMENT", "segment": "beta", "value": True},
    {"type": "PERCENTAGE", "percentage": 50, "value": True},
    {"type": "STATIC", "value": False},
]


@pytest.fixture
def tenant(dash_admin: Admin) -> Tenant:
    tenant = dash_admin.tenant()
    dash_admin.segment(tenant.organization_id, "beta", ["vip-1"])
    dash_admin.flag(tenant.environment_id, "checkout", RULES)
    return tenant


def text_of(page_html: str) -> str:
    """The page's text as read: tags dropped, no space left before punctuation."""
    return re.sub(r" ([:.,;])", r"\1", page_text(page_html))


def try_path(tenant: Tenant, key: str = "checkout") -> str:
    return f"/dashboard/environments/{tenant.environment_id}/flags/{key}/explain"


def try_user(
    person: DashClient,
    tenant: Tenant,
    user: str,
    json_text: str = "",
    rows: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
):  # noqa: ANN201 - a test Result
    fields = [("try_user", user), ("try_attributes", json_text)]
    for name, kind, value in [*rows, ("", "text", ""), ("", "text", "")]:
        fields += [("try_name", name), ("try_kind", kind), ("try_value", value)]
    return person.post(try_path(tenant), fields)


def outside_user(flag_key: str = "checkout") -> str:
    return next(f"u{i}" for i in range(1000) if bucket(flag_key, f"u{i}") >= 5000)


def test_the_flag_page_offers_the_form(person: DashClient, tenant: Tenant) -> None:
    page = person.get(f"/dashboard/environments/{tenant.environment_id}/flags/checkout")
    assert page.status_code == 200
    assert 'id="try-user"' in page.text and 'name="try_user"' in page.text
    assert page.text.count('name="try_name"') == 3


def test_the_answer_and_each_rule_in_words(person: DashClient, tenant: Tenant) -> None:
    member = try_user(person, tenant, "vip-1")
    assert member.status_code == 200, member.text
    text = text_of(member.text)
    assert "vip-1 gets ON (true): rule 1 (SEGMENT) decided." in text
    assert "Rule 1 matched: SEGMENT beta, serves ON, so it decides." in text
    assert "vip-1 is listed in segment beta." in text
    assert "Rule 2" not in text  # up to the deciding rule only

    user = outside_user()
    rest = text_of(try_user(person, tenant, user).text)
    assert f"{user} gets OFF (false): rule 3 (STATIC) decided." in rest
    assert "Rule 1 did not match: SEGMENT beta, serves ON." in rest
    assert f"{user} is not listed in segment beta." in rest
    assert "Rule 2 did not match: PERCENTAGE 50 %, serves ON." in rest
    assert "Rule 3 matched: STATIC, serves OFF, so it decides." in rest
    assert '"matchedRuleType": "STATIC"' in rest  # the API's answer, shown as it is


def test_attributes_as_json_and_rows_are_one_request(
    person: DashClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the form sends is the admin API's request: the JSON, then the rows read by kind."""
    asked: list[ExplainRequest] = []

    def spy(services: Services, env_id: str, flag_key: str, request: ExplainRequest) -> Explained:
        asked.append(request)
        return explained(services, env_id, flag_key, request)

    monkeypatch.setattr(flags, "explained", spy)
    page = try_user(
        person, tenant, "vip-1", '{"country": "DE", "score": 0.5}',
        [("age", "number", "42"), ("beta", "boolean", "TRUE"), ("tags", "list", "a, b,,c "),
         ("note", "text", " as typed ")],
    )  # fmt: skip
    assert page.status_code == 200, text_of(page.text)
    [request] = asked
    assert request.userIdentifier == "vip-1"
    assert request.attributes == {"country": "DE", "score": 0.5, "age": 42.0, "beta": True,
                                  "tags": ["a", "b", "c"], "note": " as typed "}  # fmt: skip
    assert 'value="age"' in page.text and 'value="a, b,,c "' in page.text  # kept on the form
    assert "{&#34;country&#34;: &#34;DE&#34;, &#34;score&#34;: 0.5}" in page.text
    assert page.text.count('name="try_name"') == 6  # four filled, two empty

    asked.clear()
    try_user(person, tenant, "vip-1")
    assert asked[0].attributes is None  # neither JSON nor rows: no attributes at all


@pytest.mark.parametrize(
    ("user", "json_text", "rows", "problem"),
    [
        ("", "", [], "Field 'userIdentifier' must be a string of 1 to 1024 characters"),
        ("u", "[1, 2]", [], "Field 'attributes' must be a JSON object of attributes by name"),
        ("u", '{"plan": ', [], "The attributes are not valid JSON: "),
        ("u", '{"userIdentifier": "x"}', [], "Field 'attributes.userIdentifier' is not allowed"),
        ("u", '{"plan": null}', [], "Field 'attributes.plan' must be a string of at most 1024"
                                    " characters, a finite number"),
        ("u", '{"big": 1e999}', [], "Field 'attributes.big' must be a finite number"),
        ("u", "", [("bad name", "text", "x")], "Field 'attributes' has an attribute named"
                                                " 'bad name'; a name is 1 to 64 letters"),
        ("u", "", [("age", "number", "forty")], "Attribute 'age' (row 1) must be a number"),
        ("u", "", [("beta", "boolean", "yes")], "Attribute 'beta' (row 1) must be true or false"),
        ("u", '{"age": 1}', [("age", "number", "2")], "Attribute 'age' is given twice (row 1)"),
        ("u", "", [("", "text", "orphan")], "Row 1 has a value but no attribute name"),
        ("u", "", [("long", "text", "x" * 1025)],
         "Field 'attributes.long' must be at most 1024 characters long"),
    ],
)  # fmt: skip
def test_bad_input_is_answered_on_the_form_in_the_apis_words(
    person: DashClient, tenant: Tenant, user: str, json_text: str,
    rows: list[tuple[str, str, str]], problem: str,
) -> None:  # fmt: skip
    page = try_user(person, tenant, user, json_text, rows)
    assert page.status_code == 400
    text = text_of(page.text)
    assert f"Not tried. {problem}" in text
    assert "data-trial-answer" not in page.text
    assert f'value="{user}"' in page.text  # the form keeps what was typed


def test_the_flag_as_served_and_its_state(
    person: DashClient, tenant: Tenant, dash_admin: Admin
) -> None:
    dash_admin.flag(tenant.environment_id, "checkout", RULES, enabled=False)
    text = text_of(try_user(person, tenant, "vip-1").text)
    assert "vip-1 gets OFF (false): the flag is disabled (FLAG_DISABLED): no rule is asked." in text
    dash_admin.flag(tenant.environment_id, "checkout", RULES, archived=True)
    text = text_of(try_user(person, tenant, "vip-1").text)
    assert "the flag is archived (FLAG_ARCHIVED)" in text


def test_a_missing_flag_is_the_pages_404(person: DashClient, tenant: Tenant) -> None:
    page = person.post(try_path(tenant, "nope"), [("try_user", "u")])
    assert page.status_code == 404


def test_nothing_is_metered(person: DashClient, tenant: Tenant, services: Services) -> None:
    for i in range(5):
        assert try_user(person, tenant, f"user-{i}").status_code == 200
    assert services.meter.usage(tenant.organization_id, month_of(services.clock())) == 0


def test_a_get_goes_to_the_flag_page(person: DashClient, tenant: Tenant) -> None:
    answer = person.get(try_path(tenant))
    assert answer.status_code == 303
    assert answer.headers["location"].endswith("/flags/checkout")


# -- conditions, through a rule registered here ---------------------------------------------


@pytest.fixture
def attribute_rule() -> Iterator[None]:
    """The admin tests' ATTRIBUTE_IS (it asks one condition) for one test: list it first."""
    register_rule_type(AttributeIsRule)
    yield
    unregister_rule_type("ATTRIBUTE_IS")


def test_each_condition_in_words_held_or_not(
    attribute_rule: None, person: DashClient, dash_admin: Admin
) -> None:
    tenant = dash_admin.tenant()
    rules = [{"type": "ATTRIBUTE_IS", "attribute": "plan", "equals": "pro"}, RULES[2]]
    dash_admin.flag(tenant.environment_id, "checkout", rules)
    pro = text_of(try_user(person, tenant, "u1", rows=[("plan", "text", "pro")]).text)
    assert "u1 gets ON (true): rule 1 (ATTRIBUTE_IS) decided." in pro
    assert "Rule 1 matched: ATTRIBUTE_IS plan, value pro, serves ON, so it decides." in pro
    assert 'plan is "pro": held' in pro
    free = text_of(try_user(person, tenant, "u2", '{"plan": "free"}').text)
    assert 'plan is "pro": did not hold' in free
    assert "Rule 2 matched: STATIC, serves OFF, so it decides." in free


def test_a_segment_by_conditions_says_which_list_or_the_conditions_decided() -> None:
    listed, excluded = SegmentMembership.build(["ann"]), SegmentMembership.build(["eve"])
    europe = segment_of(listed, excluded, (Condition("country", Operator.IN, ("DE", "AT")),))
    assert segment_words("ann", "europe", europe) == (
        "ann is listed in segment europe: in, whatever its conditions say"
    )
    assert segment_words("eve", "europe", europe) == (
        "eve is excluded from segment europe: out, whatever its conditions say"
    )
    assert segment_words("zed", "europe", europe) == (
        "zed is neither listed in nor excluded from segment europe: its conditions decide"
    )
    assert segment_words("ann", "gone", None) == "segment gone does not exist, so no one is in it"
