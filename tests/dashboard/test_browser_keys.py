"""Keys on the dashboard read as words, in a real browser (Debian's chromium, headless) against a
real gunicorn server, at a laptop's 1366 px and a phone's 390 px: a short key stays on one line
(``overflow-wrap: anywhere`` let a table column shrink to one letter, so the organization page
showed "production" as pro/duc/tio/n at 390 px), a long one wraps after its '-' and breaks
mid-word only when it alone is wider than the screen allows, and no page is wider than the
screen, even with a key of the longest length allowed.

Screenshots go to ``$FLAGSIGHT_SCREENSHOTS`` when it is set (else the test's temporary folder).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from flagsight_core.contract import KEY_MAX
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.test_browser_first_hour import (
    WIDTHS,
    no_horizontal_overflow,
    open_page,
    sign_in,
)
from tests.support.admin import Admin, Tenant
from tests.support.needs import needs_chromium
from tests.support.server import GunicornServer
from tests.support.server_admin import admin_fixture  # noqa: F401 - the fixture ``admin``

pytestmark = needs_chromium()

MEDIUM = "new-checkout-flow-with-a-long-name"
HYPHENATED = "new-checkout-flow-with-a-long-name-for-a-phone"
LONGEST = "x" * KEY_MAX  # no place to break at all
OTHER_ENVIRONMENT = "staging.eu-west_2"

LINES_OF = """text => {
  const code = [...document.querySelectorAll('main code')].find(c => c.textContent === text);
  if (!code) return null;
  // The text's lines, each as the characters on it: a range's boxes are the text's line
  // fragments (the element's own getClientRects() is one box for an inline block).
  const node = code.firstChild, lines = new Map();
  for (let i = 0; i < node.length; i++) {
    const range = document.createRange();
    range.setStart(node, i);
    range.setEnd(node, i + 1);
    const rect = range.getBoundingClientRect();
    if (rect.width === 0) continue;  // a break's zero-width position
    const top = Math.round(rect.top);
    lines.set(top, (lines.get(top) || '') + node.data[i]);
  }
  return [...lines.entries()].sort((a, b) => a[0] - b[0]).map(entry => entry[1]);
}"""


@pytest.fixture(scope="module")
def tenant(dashboard_server: GunicornServer, admin: Admin) -> Tenant:
    tenant = admin.tenant(insights=True)  # environment "production"
    admin.tenant(organization_id=tenant.organization_id, environment=OTHER_ENVIRONMENT)
    admin.request(  # named in words: the key is what is long
        "POST",
        f"/organizations/{tenant.organization_id}/environments",
        {"key": LONGEST, "name": "Longest key", "insightsEnabled": False},
        expect=201,
    )
    for key in ("dark-mode", MEDIUM, HYPHENATED, LONGEST):
        admin.flag(tenant.environment_id, key, [{"type": "STATIC"}])
    admin.segment(tenant.organization_id, "beta-testers", ["user-1"])
    admin.segment(tenant.organization_id, LONGEST, ["user-1"])
    return tenant


def lines_of(page: Page, key: str) -> list[str]:
    lines = page.evaluate(LINES_OF, key)
    assert lines is not None, f"no <code>{key}</code> on {page.url}"
    return lines


@pytest.mark.parametrize("device", WIDTHS)
def test_keys_stay_whole_unless_they_must_wrap_and_no_page_is_wider_than_the_screen(
    browser: Browser, dashboard_server: GunicornServer, tenant: Tenant, screens: Path, device: str
) -> None:
    server = dashboard_server
    page = open_page(browser, WIDTHS[device], [])
    sign_in(page, server)
    environment = f"{server.url}/dashboard/environments/{tenant.environment_id}"
    pages = {
        "organization": (
            f"{server.url}/dashboard/organizations/{tenant.organization_id}",
            ["production", OTHER_ENVIRONMENT],
        ),
        "flags": (f"{environment}/flags", ["dark-mode", MEDIUM]),
        "segments": (
            f"{server.url}/dashboard/organizations/{tenant.organization_id}/segments",
            ["beta-testers"],
        ),
        "flag-editor": (f"{environment}/flags/dark-mode", ["dark-mode"]),
        "long-flag-editor": (f"{environment}/flags/{LONGEST}", []),
        "api-keys": (f"{environment}/api-keys", [tenant.api_key_id]),
    }
    for name, (url, short_keys) in pages.items():
        page.goto(url)
        page.screenshot(path=str(screens / f"{device}-keys-{name}.png"), full_page=True)
        no_horizontal_overflow(page, name)
        for key in short_keys:
            assert lines_of(page, key) == [key], (name, device)

    # The longest key breaks, but only where a line is full.
    page.goto(pages["flags"][0])
    longest = lines_of(page, LONGEST)
    assert len(longest) > 1 and "".join(longest) == LONGEST
    width = page.evaluate("innerWidth")
    widths = page.evaluate(
        """key => [...document.querySelectorAll('main code')]
             .filter(c => c.textContent === key)
             .map(c => c.getBoundingClientRect().right)""",
        LONGEST,
    )
    assert widths and max(widths) <= width

    # A hyphenated key wider than its line wraps after a '-', never inside a word: in the
    # flags list (its column is at most 24rem wide) and in its editor's heading.
    for where in (pages["flags"][0], f"{environment}/flags/{HYPHENATED}"):
        page.goto(where)
        lines = lines_of(page, HYPHENATED)
        assert "".join(lines) == HYPHENATED
        assert all(line.endswith("-") for line in lines[:-1]), (where, lines)
    if device == "phone":
        assert len(lines) > 1, lines  # 46 monospace letters at 1.6rem: wider than 390 px

    # A phone shows these tables as one block per row; they are still rows to a screen reader.
    page.goto(pages["organization"][0])
    expect(page.get_by_role("row", name="production")).to_have_count(1)
    expect(
        page.get_by_role("row", name="production").get_by_role("button", name="Turn insights off")
    ).to_be_visible()


@pytest.mark.parametrize("device", WIDTHS)
def test_why_a_change_cannot_be_restored_stays_inside_the_audit_table(
    browser: Browser, dashboard_server: GunicornServer, admin: Admin, tenant: Tenant, device: str
) -> None:
    """The reason wraps in its cell: at 1366 px it ran past the table, cut off at the page's
    edge ("cannot be restored: API key 'key_…'" without "is already revoked")."""
    key = admin.request(
        "POST", f"/environments/{tenant.environment_id}/api-keys", {"name": "gone"}, expect=201
    )
    admin.request("DELETE", f"/api-keys/{key['id']}", expect=204)
    page = open_page(browser, WIDTHS[device], [])
    sign_in(page, dashboard_server)
    page.goto(f"{dashboard_server.url}/dashboard/organizations/{tenant.organization_id}/audit")
    no_horizontal_overflow(page, "audit")
    reason = page.locator("[data-not-restorable]", has_text=key["id"])
    expect(reason).to_contain_text("is already revoked")
    overflow = reason.evaluate(
        """el => {
          const box = el.closest('.table-scroll') || el.closest('main');
          return el.getBoundingClientRect().right - box.getBoundingClientRect().right;
        }"""
    )
    assert overflow <= 0.5, overflow  # seen whole, without scrolling the table
