"""The flag page's "try a user" form in a real browser (Debian's chromium, headless) against a
real gunicorn server, at a laptop's 1366 px and a phone's 390 px (contract 12's explain): the
answer is the one ``/v1/evaluate`` gives the same user, each rule and condition is said in words, bad input
is answered on the form in the admin API's words, and the page fits the screen."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from flagsight_core.hashing import bucket
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.test_browser import eventually, key_is_served, served, sign_in
from tests.dashboard.test_browser_first_hour import no_horizontal_overflow
from tests.support.admin import Admin, Tenant
from tests.support.needs import needs_chromium
from tests.support.server import GunicornServer
from tests.support.server_admin import admin_fixture  # noqa: F401 - the fixture ``admin``

pytestmark = needs_chromium()

FLAG = "new-checkout-flow"
RULES = [
    {"type": "SEGMENT", "segment": "beta-testers", "value": True},
    {"type": "PERCENTAGE", "percentage": 30, "value": True},
    {"type": "STATIC", "value": False},
]
OUTSIDE = next(f"customer-{i}" for i in range(1000) if bucket(FLAG, f"customer-{i}") >= 3000)
"""Neither a beta tester nor within the 30 %: the last rule decides."""


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    yield page
    context.close()


def seed(admin: Admin, server: GunicornServer) -> Tenant:
    tenant = admin.tenant()
    admin.request("PUT", f"/organizations/{tenant.organization_id}/segments/beta-testers", {
        "userIdentifiers": ["vip-1", "vip-2"],
        "conditions": [
            {"attribute": "country", "operator": "IN", "values": ["DE", "AT"]},
            {"attribute": "appVersion", "operator": "SEMVER_GREATER_THAN", "values": ["2.2.99"]},
            {"attribute": "plan", "operator": "EQUALS", "values": ["pro"]},
        ],
    }, expect=200)  # fmt: skip
    admin.flag(tenant.environment_id, FLAG, RULES)
    eventually(lambda: key_is_served(server, tenant.api_key))
    return tenant


@pytest.mark.parametrize("width", [1366, 390])
def test_try_a_user_shows_the_answer_and_each_rule(
    page: Page, dashboard_server: GunicornServer, admin: Admin, screens: Path, width: int
) -> None:
    server = dashboard_server
    tenant = seed(admin, server)
    page.set_viewport_size({"width": width, "height": 844 if width < 600 else 768})
    sign_in(page, server)
    page.goto(f"{server.url}/dashboard/environments/{tenant.environment_id}/flags/{FLAG}")
    section = page.locator("[data-try-user]")
    expect(section.get_by_role("heading", name="Try a user")).to_be_visible()
    no_horizontal_overflow(page, "flag page")

    section.get_by_label("User identifier").fill("vip-1")
    section.get_by_role("button", name="Try this user").click()
    answer = page.locator("[data-trial-answer]")
    expect(answer).to_have_text("vip-1 gets ON (true): rule 1 (SEGMENT) decided.")
    expect(page.locator("[data-trial-rule]")).to_have_count(1)
    expect(page.locator("[data-trial-segment]")).to_have_text(
        "vip-1 is listed in segment beta-testers: in, whatever its conditions say."
    )
    assert served(server, tenant.api_key, FLAG, "vip-1") == (True, "SEGMENT", None)

    section = page.locator("[data-try-user]")  # a new page: the form kept what was typed
    expect(section.get_by_label("User identifier")).to_have_value("vip-1")
    section.get_by_label("User identifier").fill(OUTSIDE)
    section.get_by_label("Attributes as JSON (optional)").fill('{"country": "DE"}')
    section.get_by_label("Name of attribute 1").fill("appVersion")
    section.get_by_label("Value of attribute 1").fill("2.3.0")
    section.get_by_label("Name of attribute 2").fill("beta")
    section.get_by_label("Kind of attribute 2").select_option("boolean")
    section.get_by_label("Value of attribute 2").fill("true")
    section.get_by_role("button", name="Try this user").click()
    expect(answer).to_have_text(f"{OUTSIDE} gets OFF (false): rule 3 (STATIC) decided.")
    rules = page.locator("[data-trial-rule]")
    expect(rules).to_have_count(3)
    expect(rules.nth(0)).to_contain_text("Rule 1 did not match: SEGMENT beta-testers, serves ON.")
    expect(rules.nth(0).locator("[data-trial-segment]")).to_have_text(
        f"{OUTSIDE} is neither listed in nor excluded from segment beta-testers: its conditions"
        " decide."
    )
    expect(rules.nth(0).locator("[data-condition]")).to_have_text([
        '✓ country is one of "DE", "AT": held',
        '✓ appVersion is a version above "2.2.99": held',
        '✗ plan is "pro": did not hold',
    ])  # fmt: skip
    expect(rules.nth(1)).to_contain_text("Rule 2 did not match: PERCENTAGE 30 %, serves ON.")
    expect(rules.nth(2)).to_contain_text("Rule 3 matched: STATIC, serves OFF, so it decides.")
    assert served(server, tenant.api_key, FLAG, OUTSIDE) == (False, "STATIC", None)
    shown = json.loads(page.locator("[data-trial-json]").text_content() or "")
    body = {"userIdentifier": OUTSIDE, "attributes": {"country": "DE", "appVersion": "2.3.0"}}
    explain_path = f"/environments/{tenant.environment_id}/flags/{FLAG}/explain"
    assert shown == admin.request("POST", explain_path, body, expect=200)
    expect(page.get_by_label("Name of attribute 2")).to_have_value("beta")  # rows kept
    no_horizontal_overflow(page, "an answer")
    page.screenshot(path=str(screens / f"try-user-{width}.png"), full_page=True)

    section = page.locator("[data-try-user]")
    section.get_by_label("Attributes as JSON (optional)").fill('{"userIdentifier": "someone"}')
    section.get_by_role("button", name="Try this user").click()
    problem = page.locator("[data-try-problem]")
    expect(problem).to_contain_text(
        "Not tried. Field 'attributes.userIdentifier' is not allowed: the name is reserved for"
        " the user's identifier, which conditions read by that name"
    )
    expect(page.locator("[data-trial-answer]")).to_have_count(0)
    no_horizontal_overflow(page, "a refusal")
    page.screenshot(path=str(screens / f"try-user-refused-{width}.png"), full_page=True)
