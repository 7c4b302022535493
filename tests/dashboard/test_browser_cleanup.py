"""The cleanup view in a real browser (Debian's chromium, headless) against a real gunicorn
server, at a laptop's 1366 px and a phone's 390 px (contract section 14).

The evidence is the real pipeline's: flags made through the admin API, evaluations sent to the
server (each naming its application in ``sdk``) and sealed by it, one flag's evaluations of 40
days ago written to the lake as a sealed file (the server cannot be asked to evaluate in the
past), then ``run_pipeline_once`` over the server's data directory. The settings' thresholds are
the contract's defaults (stale after 30 days). Code references are uploaded through the
server's store, as ``flagsight code-refs --upload`` stores them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import Browser, Page, expect

from api.controlplane.documents import iso_time
from api.controlplane.resources.code_references import CodeReference
from api.controlplane.sqlite_store import SqliteControlPlaneStore
from api.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.dashboard.test_browser import (
    _wait_for_sealed_rows,
    eventually,
    key_is_served,
    served,
    sign_in,
)
from tests.dashboard.test_browser_first_hour import no_horizontal_overflow
from tests.dashboard.test_flag_activity import write_evaluations
from tests.support.admin import Admin, Tenant
from tests.support.needs import needs_chromium
from tests.support.server import GunicornServer
from tests.support.server_admin import admin_fixture  # noqa: F401 - the fixture ``admin``

pytestmark = needs_chromium()

DAY = 86_400.0
LONG_KEY = "a-rather-long-flag-key-for-a-small-screen.checkout-v2"
STALE = ("checkout-v1", "old-banner", LONG_KEY)
"""Stale: not evaluated for 40 days; expired yet evaluated; expired and never evaluated."""
APPLICATIONS = {"web/2.3": 3, "ios/1.4": 2}
"""Who evaluates ``old-banner`` and how many times."""
REFERENCES = {
    "github.com/acme/web-storefront": [("src/components/banner/OldBanner.tsx", 14),
                                        ("src/pages/home.tsx", 87), ("src/pages/home.tsx", 9)],
    "github.com/acme/ios": [("Sources/Home/BannerViewController.swift", 211)],
}  # fmt: skip
"""Where ``old-banner`` is named, by repository."""


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh context whose person confirms what they asked for."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    context.close()


def put_flag(admin: Admin, tenant: Tenant, key: str, **fields: Any) -> None:
    body = {"enabled": True, "rules": [{"type": "STATIC", "value": True}], **fields}
    admin.request("PUT", f"/environments/{tenant.environment_id}/flags/{key}", body)


def evaluate(server: GunicornServer, tenant: Tenant, flag: str, user: str, sdk: str) -> None:
    answer = requests.post(
        f"{server.url}/v1/evaluate", json={"flagKey": flag, "userIdentifier": user, "sdk": sdk},
        headers={"Authorization": f"ApiKey {tenant.api_key}"}, timeout=10,
    )  # fmt: skip
    assert answer.status_code == 200 and answer.json()["value"] is True, answer.text


def seed(admin: Admin, server: GunicornServer) -> Tenant:
    """An environment with three stale flags, one archived but evaluated, and three that the
    view leaves out (active, permanent though expired, new); the pipeline run over it."""
    tenant = admin.tenant(insights=True)
    yesterday = iso_time(time.time() - DAY)
    put_flag(admin, tenant, "old-banner", owner="growth-team", expiresAt=yesterday)
    put_flag(admin, tenant, LONG_KEY, expiresAt=yesterday)
    put_flag(admin, tenant, "checkout-v1")
    put_flag(admin, tenant, "pricing-2023")
    put_flag(admin, tenant, "search-v2")
    put_flag(admin, tenant, "legacy-nav", kind="permanent", expiresAt=yesterday)
    put_flag(admin, tenant, "brand-new")
    eventually(lambda: key_is_served(server, tenant.api_key))
    sent = 0
    for sdk, count in APPLICATIONS.items():
        for i in range(count):
            evaluate(server, tenant, "old-banner", f"user-{sdk}-{i}", sdk)
            sent += 1
    for flag in ("pricing-2023", "search-v2"):
        for i in range(2):
            evaluate(server, tenant, flag, f"user-{i}", "web/2.3")
            sent += 1
    put_flag(admin, tenant, "pricing-2023", archived=True)  # still asked for by the web app
    store = SqliteControlPlaneStore(server.data_dir / "controlplane.sqlite3")
    try:
        for repository, places in REFERENCES.items():
            found = [CodeReference("old-banner", path, line) for path, line in places]
            found.append(CodeReference("pricing-2023", "src/pricing.ts", 3))
            store.put_code_references(tenant.environment_id, repository, "4be1c0d", found)
    finally:
        store.close()
    _wait_for_sealed_rows(server.data_dir, "evaluation", tenant.environment_id, sent)
    settings = Settings(data_dir=server.data_dir, admin_token=ADMIN_TOKEN)
    long_ago = datetime.now(UTC).date() - timedelta(40)
    write_evaluations(Path(settings.events_location), tenant, "checkout-v1", long_ago, 4)
    from pipelines.cli import run_pipeline_once

    run_pipeline_once(settings, echo=len)
    return tenant


@pytest.mark.parametrize("width", [1366, 390])
def test_the_cleanup_view_shows_the_evidence_and_archives_in_one_click(
    page: Page, dashboard_server: GunicornServer, admin: Admin, screens: Path, width: int
) -> None:
    server = dashboard_server
    tenant = seed(admin, server)
    env = tenant.environment_id
    page.set_viewport_size({"width": width, "height": 844 if width < 600 else 768})
    sign_in(page, server)

    page.goto(f"{server.url}/dashboard/environments/{env}/flags")
    for key, stage in {"old-banner": "Stale", "search-v2": "Active", "legacy-nav": "Permanent",
                       "brand-new": "New", "pricing-2023": "Archived"}.items():  # fmt: skip
        expect(page.locator(f"#flag-{key} [data-stage]")).to_have_text(stage)
    no_horizontal_overflow(page, "flags")
    page.screenshot(path=str(screens / f"cleanup-flags-{width}.png"), full_page=True)
    page.get_by_role("navigation", name="Environment").get_by_role("link", name="Cleanup").click()
    expect(page.get_by_role("heading", name="Cleanup")).to_be_visible()

    stale = page.locator("[data-stale-flags]")
    expect(stale.locator("article[data-flag]")).to_have_count(len(STALE))
    for key in STALE:
        expect(stale.locator(f'[data-flag="{key}"]')).to_be_visible()
    banner = stale.locator('[data-flag="old-banner"]')
    expect(banner.locator("[data-reasons]")).to_have_text("Past its expiry date.")
    expect(banner.locator("[data-evidence=last-evaluated]")).to_contain_text("(today)")
    expect(banner.locator("[data-evidence=evaluations]")).to_contain_text(
        str(sum(APPLICATIONS.values()))
    )
    expect(banner.locator("[data-evidence=served]")).to_contain_text("100.0 % of them")
    expect(banner.locator("[data-evidence=applications]")).to_have_text(
        "Applications, last 30 days" + ", ".join(sorted(APPLICATIONS))
    )
    expect(banner.locator("[data-evidence=launched]")).to_contain_text("since")
    expect(banner.locator("[data-evidence=owner]")).to_contain_text("growth-team")
    expect(banner.locator("[data-evidence=expires]")).to_contain_text("UTC")
    for repository, places in REFERENCES.items():
        listed = banner.locator(f'[data-repository="{repository}"] li')
        expect(listed).to_have_text([f"{path}:{line}" for path, line in sorted(places)])
    expect(stale.locator('[data-flag="checkout-v1"] [data-not-found]')).to_contain_text(
        "Not found in the latest scan of github.com/acme/ios"
    )
    old = stale.locator('[data-flag="checkout-v1"]')
    expect(old.locator("[data-reasons]")).to_have_text("Not evaluated for 30 days or more.")
    expect(old.locator("[data-evidence=last-evaluated]")).to_contain_text("(40 days ago)")
    expect(old.locator("[data-evidence=evaluations]")).to_contain_text("0")
    never = stale.locator(f'[data-flag="{LONG_KEY}"] [data-evidence=last-evaluated]')
    expect(never).to_contain_text("never")
    forgotten = page.locator("[data-forgotten-flags] article[data-flag]")
    expect(forgotten).to_have_count(1)
    expect(forgotten.first).to_have_attribute("data-flag", "pricing-2023")
    expect(forgotten.first.locator("[data-reasons]")).to_contain_text(
        "Yet evaluated within the last 24 hours"
    )
    expect(forgotten.first.get_by_role("button")).to_have_count(0)  # archived already
    for key in ("search-v2", "legacy-nav", "brand-new"):
        expect(page.locator(f'[data-flag="{key}"]')).to_have_count(0)
    expect(page.locator("[data-thresholds]")).to_contain_text("FLAGSIGHT_LIFECYCLE_STALE_DAYS")
    no_horizontal_overflow(page, "cleanup")
    page.screenshot(path=str(screens / f"cleanup-{width}.png"), full_page=True)

    banner.get_by_role("button", name="Archive old-banner").click()  # one click, confirmed
    expect(page.locator("[data-archived]")).to_contain_text("Archived old-banner")
    expect(stale.locator('[data-flag="old-banner"]')).to_have_count(0)
    expect(stale.locator("article[data-flag]")).to_have_count(len(STALE) - 1)
    flag = admin.request("GET", f"/environments/{env}/flags/old-banner", expect=200)
    assert flag["archived"] is True and flag["enabled"] is True
    assert flag["rules"] == [{"type": "STATIC", "value": True}]
    assert flag["owner"] == "growth-team" and flag["expiresAt"] is not None
    eventually(lambda: served(server, tenant.api_key, "old-banner", "u")[2] == "FLAG_ARCHIVED")
    no_horizontal_overflow(page, "cleanup after archiving")

    page.locator("[data-archived]").get_by_role("link", name="audit log").click()
    change = page.locator("tr[data-audit-id]").filter(has_text="old-banner").first
    expect(change).to_contain_text("flag.updated")
    expect(change).to_contain_text("dashboard")
    no_horizontal_overflow(page, "audit")
    page.screenshot(path=str(screens / f"cleanup-audit-{width}.png"), full_page=True)
    change.get_by_role("button", name="Restore").click()
    expect(page.locator("[data-restored]")).to_be_visible()
    flag = admin.request("GET", f"/environments/{env}/flags/old-banner", expect=200)
    assert flag["archived"] is False and flag["owner"] == "growth-team"
    page.goto(f"{server.url}/dashboard/environments/{env}/cleanup")
    expect(page.locator('[data-stale-flags] [data-flag="old-banner"]')).to_be_visible()

    page.locator('[data-flag="old-banner"] h3').get_by_role("link").click()  # its editor
    lifecycle = page.locator("[data-lifecycle]")
    expect(lifecycle.get_by_role("heading")).to_have_text("Lifecycle: Stale")
    expect(lifecycle.locator("[data-reasons]")).to_have_text("Past its expiry date.")
    expect(page.get_by_label("Owner")).to_have_value("growth-team")
    no_horizontal_overflow(page, "editor")
    page.screenshot(path=str(screens / f"cleanup-editor-{width}.png"), full_page=True)
    page.get_by_label("Expires at (UTC)").fill("2099-12-31T18:00")
    page.get_by_label("Kind", exact=True).select_option("temporary")
    page.get_by_role("button", name="Save flag").first.click()
    expect(page.get_by_text("Saved.")).to_be_visible()
    expect(lifecycle.get_by_role("heading")).to_have_text("Lifecycle: Active")
    flag = admin.request("GET", f"/environments/{env}/flags/old-banner", expect=200)
    assert flag["expiresAt"] == "2099-12-31T18:00:00.000Z" and flag["owner"] == "growth-team"
