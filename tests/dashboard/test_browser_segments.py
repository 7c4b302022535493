"""A segment's conditions in a real browser (Debian's chromium, headless) against a real
gunicorn server, at a laptop's 1366 px and a phone's 390 px (contract 12): add a condition,
see its operator's values hint and, saved, its words; reload and find it kept; the flag that
names the segment serves a user by their attributes; a bad condition is answered on the form
in the admin API's words; the pages fit the screen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.test_browser import eventually, key_is_served, sign_in
from tests.dashboard.test_browser_first_hour import no_horizontal_overflow
from tests.support.admin import Admin
from tests.support.needs import needs_chromium
from tests.support.server import GunicornServer
from tests.support.server_admin import admin_fixture  # noqa: F401 - the fixture ``admin``

pytestmark = needs_chromium()

FLAG = "german-beta"


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    yield page
    context.close()


def value_for(server: GunicornServer, api_key: str, user: str, country: str) -> bool:
    answer = requests.post(
        f"{server.url}/v1/evaluate", timeout=10, headers={"Authorization": f"ApiKey {api_key}"},
        json={"flagKey": FLAG, "userIdentifier": user, "attributes": {"country": country}},
    )  # fmt: skip
    return bool(answer.json()["value"])


@pytest.mark.parametrize("width", [1366, 390])
def test_add_a_condition_see_its_words_save_and_reload(
    page: Page, dashboard_server: GunicornServer, admin: Admin, screens: Path, width: int
) -> None:
    server = dashboard_server
    tenant = admin.tenant()
    org = tenant.organization_id
    admin.segment(org, "beta-testers", ["vip-1", "vip-2"])
    admin.flag(tenant.environment_id, FLAG,
               [{"type": "SEGMENT", "segment": "beta-testers", "value": True},
                {"type": "STATIC", "value": False}])  # fmt: skip
    eventually(lambda: key_is_served(server, tenant.api_key))
    page.set_viewport_size({"width": width, "height": 844 if width < 600 else 768})
    sign_in(page, server)

    page.goto(f"{server.url}/dashboard/organizations/{org}/segments")
    row = page.locator('[data-segment="beta-testers"]')
    expect(row.locator('[data-label="Conditions"]')).to_have_text("None")
    no_horizontal_overflow(page, "segments")
    row.get_by_role("link", name="Edit segment beta-testers").click()
    expect(page.locator("[data-segment-counts]")).to_have_text("2 members listed, 0 excluded.")
    expect(page.locator("[data-no-conditions]")).to_be_visible()
    no_horizontal_overflow(page, "a segment")

    form = page.locator("#edit-segment")
    form.get_by_label("Attribute of condition 1").fill("country")
    form.get_by_label("Operator of condition 1").select_option("IN")
    expect(form.locator("#condition-1-hint")).to_have_text("a string; one per line")
    form.get_by_label("Values of condition 1").fill("DE\nAT")
    form.get_by_label("Excluded identifiers").fill("blocked-1")
    no_horizontal_overflow(page, "a condition typed")
    form.get_by_role("button", name="Save segment").click()

    expect(page.locator("[data-segment-saved]")).to_be_visible()
    words = page.locator("[data-condition-words] li")
    expect(words).to_have_text(['country is one of "DE", "AT"'])
    expect(page.locator("[data-segment-counts]")).to_have_text("2 members listed, 1 excluded.")
    page.screenshot(path=str(screens / f"segment-conditions-{width}.png"), full_page=True)

    page.reload()
    expect(words).to_have_text(['country is one of "DE", "AT"'])
    form = page.locator("#edit-segment")
    expect(form.get_by_label("Attribute of condition 1")).to_have_value("country")
    expect(form.get_by_label("Operator of condition 1")).to_have_value("IN")
    expect(form.get_by_label("Values of condition 1")).to_have_value("DE\nAT")
    expect(form.get_by_label("Excluded identifiers")).to_have_value("blocked-1")
    no_horizontal_overflow(page, "a segment with a condition")
    eventually(lambda: value_for(server, tenant.api_key, "someone", "AT"))
    assert value_for(server, tenant.api_key, "someone", "FR") is False
    assert value_for(server, tenant.api_key, "blocked-1", "DE") is False
    assert value_for(server, tenant.api_key, "vip-1", "FR") is True

    form.get_by_label("Attribute of condition 2").fill("appVersion")
    form.get_by_label("Operator of condition 2").select_option("SEMVER_GREATER_THAN")
    form.get_by_label("Values of condition 2").fill("2.3")
    form.get_by_role("button", name="Save segment").click()
    message = (
        "Field 'conditions[1].values[0]' must be a Semantic Versioning 2.0.0 version (such as"
        " 1.4.0 or 2.0.0-rc.1)"
    )
    expect(page.locator("[data-segment-problem]")).to_have_text(f"Not saved. {message}")
    expect(page.locator("#condition-2-error")).to_contain_text(message)
    values = page.get_by_label("Values of condition 2")
    expect(values).to_have_attribute("aria-invalid", "true")  # the field the words name
    expect(values).to_have_value("2.3")  # kept as typed
    expect(words).to_have_text(['country is one of "DE", "AT"'])  # nothing saved
    no_horizontal_overflow(page, "a refused condition")
    page.screenshot(path=str(screens / f"segment-refused-{width}.png"), full_page=True)

    page.goto(f"{server.url}/dashboard/organizations/{org}/segments")
    row = page.locator('[data-segment="beta-testers"]')
    expect(row.locator('[data-label="Members"]')).to_have_text("2")
    expect(row.locator('[data-label="Conditions"]')).to_contain_text("1 condition")
    no_horizontal_overflow(page, "segments with conditions")
