"""Metrics in a real browser (Debian's chromium, headless) against a real gunicorn server, at a
laptop's 1366 px and a phone's 390 px (contract 13, issue 42): create a metric (a refused
field marked where it is), edit it, delete it after the question; follow metrics from a flag's
page; start a rollout that guards on a metric with its tolerance (one of a count's kind refused
without it), read the guardrail by the metric's name; and the refusal to delete a metric the
running rollout guards on; the health view's row per metric, from health rows published into
the server's warehouse as the pipeline writes them. Nothing wider than the screen.

Screenshots go to ``$FLAGSIGHT_SCREENSHOTS`` when it is set (else the test's temporary folder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from tests.dashboard.test_browser_first_hour import (
    WIDTHS,
    fits,
    open_page,
    sign_in,
)
from tests.dashboard.test_metric_pages import METRIC_COMPARISONS
from tests.dashboard.test_rollouts import COVERAGE_GAP, publish_health
from tests.support.admin import Admin, Tenant
from tests.support.needs import needs_chromium
from tests.support.server import GunicornServer
from tests.support.server_admin import admin_fixture  # noqa: F401 - the fixture ``admin``

pytestmark = needs_chromium()

FLAG = "checkout-redesign"


def a_tenant(admin: Admin, *metrics: tuple[str, str, str]) -> Tenant:
    """An organization with a split flag and the metrics given as (key, name, kind)."""
    tenant = admin.split_tenant(FLAG)
    for key, name, kind in metrics:
        admin.request(
            "PUT", f"/organizations/{tenant.organization_id}/metrics/{key}",
            {"name": name, "event": key, "kind": kind, "windowHours": 72, "better": "higher"},
        )  # fmt: skip
    return tenant


def metric_of(admin: Admin, tenant: Tenant, key: str) -> Any:
    return admin.request("GET", f"/organizations/{tenant.organization_id}/metrics/{key}")


@pytest.mark.parametrize("device", WIDTHS)
def test_create_edit_and_delete_a_metric(
    browser: Browser, dashboard_server: GunicornServer, admin: Admin, screens: Path,
    device: str,
) -> None:  # fmt: skip
    tenant = a_tenant(admin)
    page = open_page(browser, WIDTHS[device], [])
    questions: list[str] = []
    page.on("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    sign_in(page, dashboard_server)
    page.goto(f"{dashboard_server.url}/dashboard/organizations/{tenant.organization_id}")
    page.get_by_role("navigation", name="Organization").get_by_role("link", name="Metrics").click()
    expect(page.get_by_role("heading", name="Metrics")).to_be_visible()
    expect(page.locator("[data-no-metrics]")).to_be_visible()

    form = page.get_by_role("region", name="Create a metric")
    form.get_by_label("Key").fill("purchase")
    form.get_by_label("Name").fill("Checkout conversion")
    form.get_by_label("Tracked event").fill("purchase")
    form.get_by_label("Kind").select_option("conversion")
    window = form.get_by_label("Window (hours after a user's first exposure)")
    window.fill("0")
    form.get_by_role("button", name="Create metric").click()
    expect(window).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#metric-window-error")).to_contain_text("Field 'windowHours'")
    expect(window).to_have_value("0")  # the person's input is kept
    expect(form.get_by_label("Name")).to_have_value("Checkout conversion")
    fits(page, screens, f"metric-refused-{device}")

    window.fill("48")
    form.get_by_role("button", name="Create metric").click()
    expect(page.locator("[data-metric-saved]")).to_contain_text("Metric purchase saved.")
    row = page.locator('[data-metric="purchase"]')
    for said in ("Checkout conversion", "purchase", "conversion", "48 h", "higher", "None"):
        expect(row).to_contain_text(said)
    fits(page, screens, f"metrics-{device}")

    row.get_by_role("link", name="Edit metric Checkout conversion").click()
    expect(page.get_by_role("heading", name="Edit this metric")).to_be_visible()
    page.get_by_label("Name").fill("Purchases")
    page.get_by_label("Better").select_option("lower")
    page.get_by_role("button", name="Save metric").click()
    expect(page.locator("[data-metric-saved]")).to_be_visible()
    assert (metric_of(admin, tenant, "purchase")["name"],
            metric_of(admin, tenant, "purchase")["better"]) == ("Purchases", "lower")  # fmt: skip

    page.locator('[data-metric="purchase"]').get_by_role(
        "button", name="Delete metric Purchases"
    ).click()
    expect(page.locator("[data-metric-deleted]")).to_contain_text("Metric purchase deleted.")
    assert questions and questions[-1].startswith("Delete the metric Purchases (purchase)?")
    expect(page.locator("[data-no-metrics]")).to_be_visible()
    page.context.close()


def test_follow_metrics_from_the_flag_page(
    browser: Browser, dashboard_server: GunicornServer, admin: Admin, screens: Path
) -> None:
    tenant = a_tenant(admin, ("purchase", "Purchases", "conversion"),
                      ("revenue", "Revenue", "sum"))  # fmt: skip
    page = open_page(browser, WIDTHS["phone"], [])
    sign_in(page, dashboard_server)
    page.goto(f"{dashboard_server.url}/dashboard/environments/{tenant.environment_id}/flags/{FLAG}")
    section = page.get_by_role("region", name="Metrics this flag follows")
    revenue = section.get_by_label("Revenue (sum of revenue, higher is better)")
    expect(revenue).not_to_be_checked()
    revenue.check()
    section.get_by_role("button", name="Save followed metrics").click()
    expect(page.locator("[data-metrics-saved]")).to_be_visible()
    expect(revenue).to_be_checked()
    expect(
        section.get_by_label("Purchases (conversion of purchase, higher is better)")
    ).not_to_be_checked()
    path = f"/environments/{tenant.environment_id}/flags/{FLAG}/followed-metrics"
    assert admin.request("GET", path) == {"metrics": ["revenue"]}
    fits(page, screens, "flag-metrics-phone")

    page.goto(f"{dashboard_server.url}/dashboard/organizations/{tenant.organization_id}/metrics")
    followers = page.locator('[data-metric="revenue"] [data-followers]')
    expect(followers).to_have_text(f"{FLAG} in production")
    followers.get_by_role("link").click()
    expect(page.get_by_role("region", name="Metrics this flag follows")).to_be_visible()
    page.context.close()


@pytest.mark.parametrize("device", WIDTHS)
def test_a_rollout_guards_on_a_metric_which_then_cannot_be_deleted(
    browser: Browser, dashboard_server: GunicornServer, admin: Admin, screens: Path,
    device: str,
) -> None:  # fmt: skip
    tenant = a_tenant(admin, ("purchase", "Purchases", "conversion"),
                      ("basket-value", "Basket value", "sum"))  # fmt: skip
    page = open_page(browser, WIDTHS[device], [])
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, dashboard_server)
    base = f"{dashboard_server.url}/dashboard/environments/{tenant.environment_id}/flags/{FLAG}"
    page.goto(f"{base}/insights")
    form = page.get_by_role("form", name="Start a guarded rollout")
    expect(form.get_by_label("Purchases tolerance in percentage points")).to_have_value("1")
    basket = form.get_by_label("Basket value tolerance in the events' own values")
    expect(basket).to_have_value("")
    form.get_by_label("Basket value", exact=True).check()
    form.get_by_role("button", name="Start a guarded rollout").click()
    expect(page.locator("[data-rollout-error]")).to_contain_text(
        "Field 'tolerances' must give metric:basket-value a tolerance"
    )
    expect(form.get_by_label("Basket value", exact=True)).to_be_checked()  # the input is kept
    fits(page, screens, f"rollout-metric-refused-{device}")

    basket.fill("2.5")
    form.get_by_role("button", name="Start a guarded rollout").click()
    expect(page.locator("[data-rollout-state]")).to_contain_text(
        "guardrails: Failure rate, p95 latency, Coverage, Basket value."
    )
    row = page.locator('[data-guardrail="metric:basket-value"]')
    expect(row.get_by_role("rowheader")).to_have_text("Basket value")
    expect(row.locator("[data-tolerance]")).to_have_text("2.5")
    expect(row).to_contain_text("Not judged yet")
    rollout = admin.request("GET", f"/environments/{tenant.environment_id}/flags/{FLAG}/rollout")
    assert rollout["tolerances"]["metric:basket-value"] == 2.5
    fits(page, screens, f"rollout-metric-{device}")

    page.goto(base)
    choice = page.locator('[data-metric-choice="basket-value"]')
    expect(choice.locator("[data-guarded]")).to_be_visible()

    page.goto(f"{dashboard_server.url}/dashboard/organizations/{tenant.organization_id}/metrics")
    page.locator('[data-metric="basket-value"]').get_by_role(
        "button", name="Delete metric Basket value"
    ).click()
    problem = page.locator("[data-metric-problem]")
    expect(problem).to_contain_text("Not deleted.")
    expect(problem).to_contain_text(f"flag '{FLAG}' in environment 'production'")
    expect(problem).to_contain_text("stop that rollout first")
    expect(page.locator('[data-metric="basket-value"] [data-followers]')).to_have_text(
        f"{FLAG} in production"
    )
    assert metric_of(admin, tenant, "basket-value")["kind"] == "sum"  # still there
    fits(page, screens, f"metric-guarded-{device}")
    page.context.close()


@pytest.mark.parametrize("device", WIDTHS)
def test_the_health_view_shows_each_followed_metric_beside_the_others(
    browser: Browser, dashboard_server: GunicornServer, admin: Admin, screens: Path,
    device: str,
) -> None:  # fmt: skip
    tenant = a_tenant(admin, ("purchase", "Purchases", "conversion"),
                      ("revenue", "Revenue", "sum"))  # fmt: skip
    comparisons = {**COVERAGE_GAP["comparisons"], **METRIC_COMPARISONS}
    publish_health(
        dashboard_server.data_dir / "warehouse.duckdb", tenant.environment_id,
        [{**COVERAGE_GAP, "flag_key": FLAG, "comparisons": comparisons}],
    )  # fmt: skip
    page = open_page(browser, WIDTHS[device], [])
    sign_in(page, dashboard_server)
    url = f"/dashboard/environments/{tenant.environment_id}/flags/{FLAG}/insights"
    page.goto(f"{dashboard_server.url}{url}")
    expect(page.locator("[data-comparison=coverage] [data-decision]")).to_have_text("regression")
    expect(page.get_by_role("heading", name="Metrics", exact=True)).to_be_visible()
    purchase = page.locator('[data-metric-row="purchase"]')
    expect(purchase.get_by_role("rowheader")).to_have_text("Purchases")
    expect(purchase.locator("[data-treatment]")).to_have_text("12.5 % 1,200 users")
    expect(purchase.locator("[data-control]")).to_have_text("10.2 % 1,180 users")
    expect(purchase.locator("[data-difference]")).to_have_text("+2.25 pp")
    expect(purchase.locator("[data-interval]")).to_have_text("+0.75 pp to +3.75 pp")
    expect(purchase.locator("[data-decision]")).to_have_text("improvement")
    expect(purchase.locator("[data-reduction]")).to_have_text(
        "interval 31 % narrower from pre-exposure data"
    )
    revenue = page.locator('[data-metric-row="revenue"]')
    expect(revenue.locator("[data-decision]")).to_have_text("regression")
    expect(revenue.locator("[data-difference]")).to_have_text("-2.50")
    fits(page, screens, f"health-metrics-{device}")
    page.context.close()
