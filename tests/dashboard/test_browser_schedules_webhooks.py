"""Schedules, webhooks and the flags list's evaluation figures in a real browser (Debian's
chromium, headless) against a real gunicorn server, at a laptop's 1366 px and a phone's 390 px:
what a person sees at each step, and nothing wider than the screen.

Screenshots go to ``$FLAGSIGHT_SCREENSHOTS`` when it is set (else the test's temporary folder).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from api.settings import Settings
from tests.dashboard.test_browser_first_hour import (
    WIDTHS,
    fits,
    open_page,
    sign_in,
)
from tests.dashboard.test_flag_activity import write_evaluations
from tests.pipelines.support import materialize_all
from tests.support.admin import Admin, Tenant
from tests.support.needs import needs_chromium
from tests.support.server import GunicornServer
from tests.support.server_admin import admin_fixture  # noqa: F401 - the fixture ``admin``

pytestmark = needs_chromium()

LONG_KEY = "new-checkout-flow-with-a-long-name"
LONG_URL = "https://hooks.example.com/flagsight/receivers/production/0123456789abcdef0123456789"


@pytest.fixture(scope="module")
def tenant(dashboard_server: GunicornServer, admin: Admin) -> Tenant:
    """Three flags, two of them evaluated (one 40 days ago only), and a pipeline run."""
    tenant = admin.tenant(insights=True)
    for key in (LONG_KEY, "dark-mode", "forgotten"):
        admin.flag(tenant.environment_id, key, [{"type": "STATIC"}])
    today = datetime.now(UTC).date()
    events = dashboard_server.data_dir / "events"
    write_evaluations(events, tenant, LONG_KEY, today, 1234)
    write_evaluations(events, tenant, "dark-mode", today - timedelta(40), 12)
    assert materialize_all(Settings(data_dir=dashboard_server.data_dir)).success
    return tenant


@pytest.mark.parametrize("device", WIDTHS)
def test_the_flags_list_shows_evaluations_and_stale_flags(
    browser: Browser, dashboard_server: GunicornServer, tenant: Tenant, screens: Path, device: str
) -> None:
    failures: list[str] = []
    page = open_page(browser, WIDTHS[device], failures)
    sign_in(page, dashboard_server)
    page.goto(f"{dashboard_server.url}/dashboard/environments/{tenant.environment_id}/flags")
    today = datetime.now(UTC).date()
    busy = page.get_by_role("row", name=LONG_KEY)
    expect(busy.locator("[data-evaluations]")).to_have_text("1,234")
    expect(busy.locator("[data-last-evaluated]")).to_have_text(f"today ({today})")
    old = page.get_by_role("row", name="dark-mode")
    expect(old.locator("[data-evaluations]")).to_have_text("0")
    expect(old.locator("[data-last-evaluated]")).to_contain_text("40 days ago")
    expect(page.get_by_role("row", name="forgotten").locator("[data-last-evaluated]")).to_have_text(
        "never"
    )
    expect(page.get_by_text("1 of 3 flags is stale")).to_be_visible()  # dark-mode; forgotten: new
    expect(busy.get_by_role("link", name=f"Schedules of {LONG_KEY}")).to_be_visible()
    fits(page, screens, f"{device}-flags-activity")
    assert failures == [], failures


@pytest.mark.parametrize("device", WIDTHS)
def test_schedule_a_change_see_a_refusal_and_cancel_it(
    browser: Browser, dashboard_server: GunicornServer, admin: Admin, screens: Path, device: str
) -> None:
    server = dashboard_server
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, LONG_KEY, [{"type": "STATIC"}], enabled=False)
    failures: list[str] = []
    page = open_page(browser, WIDTHS[device], failures)
    questions: list[str] = []
    page.on("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    sign_in(page, server)
    page.goto(f"{server.url}/dashboard/environments/{tenant.environment_id}/flags/{LONG_KEY}")
    page.get_by_role("link", name="Schedules", exact=True).click()
    expect(page.get_by_role("heading", name=f"Schedules of {LONG_KEY}")).to_be_visible()
    expect(page.get_by_text("No schedules for this flag yet.")).to_be_visible()
    fits(page, screens, f"{device}-schedules-empty")

    page.get_by_label("When (UTC)").fill("2099-06-01T09:30")
    page.get_by_label("Rules at that time (JSON)").fill(
        '[{"type": "PERCENTAGE", "percentage": 250}]'
    )
    page.get_by_role("button", name="Schedule", exact=True).click()
    expect(page.locator("#schedule-rules-error")).to_contain_text(
        "Field 'flag.rules[0].percentage'"
    )
    expect(page.get_by_label("Rules at that time (JSON)")).to_have_attribute("aria-invalid", "true")
    fits(page, screens, f"{device}-schedules-refused")

    page.get_by_label("Rules at that time (JSON)").fill(
        '[{"type": "PERCENTAGE", "percentage": 25}]'
    )
    page.get_by_label("Enabled — rules decide the value").check()
    page.get_by_role("button", name="Schedule", exact=True).click()
    expect(page.get_by_text("Every worker applies it within a second of its time")).to_be_visible()
    row = page.locator("[data-schedules] tbody tr").first
    expect(row).to_contain_text("2099-06-01 09:30:00 UTC")
    expect(row).to_contain_text("Enabled")
    expect(row).to_contain_text("Pending")
    row.get_by_text("1 rule").click()  # the details: the rules it will set
    expect(row.locator("pre")).to_contain_text('"percentage":25')
    fits(page, screens, f"{device}-schedules-pending")

    row.get_by_role("button", name="Cancel the schedule at 2099-06-01 09:30:00 UTC").click()
    assert "It will not be applied" in questions[-1]
    expect(page.get_by_text("cancelled: it will not be applied")).to_be_visible()
    expect(row).to_contain_text("Cancelled")
    expect(row.get_by_role("button")).to_have_count(0)
    fits(page, screens, f"{device}-schedules-cancelled")
    page.get_by_role("link", name="Edit the flag").click()
    expect(page.get_by_role("heading", name=f"Flag {LONG_KEY}")).to_be_visible()
    assert failures == [f"400 {server.url}/dashboard/environments/{tenant.environment_id}"
                        f"/flags/{LONG_KEY}/schedules"], failures  # fmt: skip


@pytest.mark.parametrize("device", WIDTHS)
def test_create_a_webhook_see_its_secret_once_and_delete_it(
    browser: Browser, dashboard_server: GunicornServer, admin: Admin, screens: Path, device: str
) -> None:
    server = dashboard_server
    tenant = admin.tenant()
    page = open_page(browser, WIDTHS[device], [])
    questions: list[str] = []
    page.on("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    sign_in(page, server)
    page.goto(f"{server.url}/dashboard/organizations/{tenant.organization_id}")
    page.get_by_role("navigation", name="Organization").get_by_role("link", name="Webhooks").click()
    expect(page.get_by_role("heading", name="Webhooks")).to_be_visible()
    expect(page.get_by_text("No webhooks yet.")).to_be_visible()
    fits(page, screens, f"{device}-webhooks-empty")

    for url, why in [
        ("http://user:secret@hooks.example.com/", "must not contain user information"),
        ("http://169.254.169.254/latest/meta-data/", "must not point to a link-local address"),
    ]:
        page.get_by_label("URL").fill(url)
        page.get_by_role("button", name="Create webhook").click()
        expect(page.locator("#webhook-url-error")).to_contain_text(f"Field 'url' {why}")
        expect(page.get_by_label("URL")).to_have_value(url)
        fits(page, screens, f"{device}-webhooks-refused")
    expect(page.get_by_text("No webhooks yet.")).to_be_visible()

    page.get_by_label("URL").fill(LONG_URL)
    page.get_by_label("rollout.held").uncheck()
    page.get_by_role("button", name="Create webhook").click()
    expect(page.get_by_text("it is shown only this once")).to_be_visible()
    secret = page.get_by_label("The new webhook's signing secret").input_value()
    assert secret.startswith("whsec_")
    row = page.locator("[data-webhooks] tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text(LONG_URL)
    expect(row).to_contain_text("flag.changed")
    expect(row).not_to_contain_text("rollout.held")
    fits(page, screens, f"{device}-webhooks-created")
    page.get_by_role("navigation", name="Organization").get_by_role("link", name="Webhooks").click()
    expect(row).to_have_count(1)
    expect(page.get_by_text("it is shown only this once")).to_have_count(0)
    assert secret not in page.content()

    row.get_by_role("button", name=f"Delete the webhook to {LONG_URL}").click()
    assert "This cannot be undone" in questions[-1]
    expect(page.get_by_text("nothing more is delivered to it")).to_be_visible()
    expect(page.get_by_text("No webhooks yet.")).to_be_visible()
    fits(page, screens, f"{device}-webhooks-deleted")
