"""Guarded rollouts in a real browser (Debian's chromium, headless) against a real gunicorn
server, at a laptop's 1366 px and a phone's 390 px (issue 39): the guardian's evidence per
guardrail, the health view's coverage comparison and its answer at 100 %, the start form's
tolerances, the flags list's rollout badge and the flag editor's confirmation before a save
moves a running rollout's split. Nothing wider than the screen.

The guardian's evidence is written through the store as the pipeline writes it, and the
health rows into a published warehouse (``test_rollouts.publish_health``). Screenshots go to
``$FLAGSIGHT_SCREENSHOTS`` when it is set (else the test's temporary folder).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from api.controlplane.changes import RolloutAction
from api.controlplane.sqlite_store import SqliteControlPlaneStore
from tests.dashboard.test_browser_first_hour import (
    WIDTHS,
    fits,
    open_page,
    sign_in,
)
from tests.dashboard.test_rollouts import (
    COVERAGE_GAP,
    GUARD,
    WAITING,
    publish_health,
    split_health,
)
from tests.support.admin import Admin, Tenant
from tests.support.needs import needs_chromium
from tests.support.server import GunicornServer
from tests.support.server_admin import admin_fixture  # noqa: F401 - the fixture ``admin``

pytestmark = needs_chromium()

GUARDED = "checkout-with-a-rather-long-key.guarded-v2"
"""Its rollout runs at 25 %, with the guardian's evidence and a wait."""


def complete(width: int) -> str:
    """A flag at 100 %, its rollout long done; one per width (a test starts a rollout on it)."""
    return f"search-complete-{width}"


@pytest.fixture(scope="module")
def tenant(dashboard_server: GunicornServer, admin: Admin) -> Tenant:
    tenant = admin.split_tenant(GUARDED)
    env = tenant.environment_id
    for width in WIDTHS.values():
        admin.flag(env, complete(width), [{"type": "PERCENTAGE", "percentage": 100}])
    admin.flag(env, "dark-mode", [{"type": "STATIC"}])
    admin.request("PUT", f"/environments/{env}/flags/{GUARDED}/rollout",
                  {"tolerances": {"latencyP95Ms": 50}}, expect=200)  # fmt: skip
    store = SqliteControlPlaneStore(dashboard_server.data_dir / "controlplane.sqlite3")
    try:
        store.decide_rollout(
            env, GUARDED, 0, RolloutAction.ADVANCED, "the first step shown safe", None
        )
        assert store.note_rollout(env, GUARDED, 1, GUARD, WAITING)
    finally:
        store.close()
    publish_health(
        dashboard_server.data_dir / "warehouse.duckdb", env,
        [{**COVERAGE_GAP, "flag_key": GUARDED, "rollout_percentage": 25.0,
          "sample_ratio_expected": 0.25, "sample_ratio_observed": 0.25},
         *(split_health(complete(width), 100, 800, 0) for width in WIDTHS.values())],
    )  # fmt: skip
    return tenant


def insights(server: GunicornServer, tenant: Tenant, flag: str) -> str:
    return f"{server.url}/dashboard/environments/{tenant.environment_id}/flags/{flag}/insights"


@pytest.mark.parametrize("device", WIDTHS)
def test_a_running_rollout_shows_each_guardrails_evidence_and_coverage_beside_the_others(
    browser: Browser, dashboard_server: GunicornServer, tenant: Tenant, screens: Path, device: str
) -> None:
    page = open_page(browser, WIDTHS[device], [])
    sign_in(page, dashboard_server)
    page.goto(insights(dashboard_server, tenant, GUARDED))
    expect(page.locator("[data-rollout-state]")).to_contain_text("step 2 of 4 (25 %)")
    expect(page.locator("[data-rollout-waiting]")).to_contain_text(WAITING)
    rows = page.locator("[data-guardrails] tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("Failure rate")
    expect(rows.nth(0)).to_contain_text("Shown within tolerance")
    latency = rows.nth(1)
    for said in ("p95 latency", "50 ms", "Not yet shown", "up to +61.0 ms",
                 "1,200 treatment, 3,600 control", "about 4,300 more users at 25 %"):  # fmt: skip
        expect(latency).to_contain_text(said)
    expect(rows.nth(2)).to_contain_text("not bounded yet")
    assert "latencyP95Ms" not in page.locator("[data-guardrails]").inner_text()
    expect(page.get_by_role("form", name="Start a guarded rollout")).to_have_count(0)

    coverage = page.locator("[data-comparison=coverage]")
    expect(coverage.get_by_role("heading", name="Coverage")).to_be_visible()
    expect(coverage.locator("[data-decision]")).to_have_text("regression")
    expect(page.get_by_role("img", name="Coverage difference")).to_be_visible()
    expect(page.get_by_role("img", name="Failure rate difference")).to_be_visible()
    expect(page.get_by_role("img", name="p95 latency difference")).to_be_visible()
    fits(page, screens, f"rollout-guardrails-{device}")
    page.context.close()


@pytest.mark.parametrize("device", WIDTHS)
def test_at_100_percent_no_control_is_said_and_a_rollout_starts_with_its_tolerances(
    browser: Browser, dashboard_server: GunicornServer, tenant: Tenant, admin: Admin,
    screens: Path, device: str,
) -> None:  # fmt: skip
    flag = complete(WIDTHS[device])
    page = open_page(browser, WIDTHS[device], [])
    sign_in(page, dashboard_server)
    page.goto(insights(dashboard_server, tenant, flag))
    for name in ("failureRate", "latencyP95Ms", "coverage"):
        expect(page.locator(f"[data-comparison={name}]")).to_contain_text("No control arm any more")
    form = page.get_by_role("form", name="Start a guarded rollout")
    expect(form.get_by_label("Failure rate tolerance in percentage points")).to_have_value("1")
    expect(form.get_by_label("Coverage tolerance in percentage points")).to_have_value("5")
    tolerance = form.get_by_label("p95 latency tolerance in milliseconds")
    expect(tolerance).to_have_value("50")
    fits(page, screens, f"rollout-no-control-{device}")

    tolerance.fill("a lot")
    form.get_by_role("button", name="Start a guarded rollout").click()
    expect(page.locator("[data-rollout-error]")).to_contain_text("Field 'tolerances'")
    expect(tolerance).to_have_value("a lot")  # the person's input is kept
    tolerance.fill("80")
    form.get_by_role("button", name="Start a guarded rollout").click()
    expect(page.locator("[data-rollout-state]")).to_contain_text("running")
    expect(page.locator("[data-guardrail=latencyP95Ms]")).to_contain_text("80 ms")
    expect(page.locator("[data-guardrail=latencyP95Ms]")).to_contain_text("Not judged yet")
    path = f"/environments/{tenant.environment_id}/flags/{flag}/rollout"
    assert admin.request("GET", path)["tolerances"] == {
        "failureRate": 1.0, "latencyP95Ms": 80.0, "coverage": 5.0,
    }  # fmt: skip
    fits(page, screens, f"rollout-started-{device}")
    page.context.close()


@pytest.mark.parametrize("device", WIDTHS)
def test_the_flags_list_and_editor_show_the_rollout_and_ask_before_moving_its_split(
    browser: Browser, dashboard_server: GunicornServer, tenant: Tenant, admin: Admin,
    screens: Path, device: str,
) -> None:  # fmt: skip
    page = open_page(browser, WIDTHS[device], [])
    sign_in(page, dashboard_server)
    page.goto(f"{dashboard_server.url}/dashboard/environments/{tenant.environment_id}/flags")
    badge = page.get_by_role("row", name=GUARDED).locator("[data-rollout-badge]")
    expect(badge).to_contain_text("Rollout at 25 %")
    expect(page.get_by_role("row", name="dark-mode").locator("[data-rollout-badge]")).to_have_count(
        0
    )
    fits(page, screens, f"rollout-flags-list-{device}")

    badge.click()
    expect(page.get_by_role("heading", name="Guarded rollout")).to_be_visible()
    page.goto(
        f"{dashboard_server.url}/dashboard/environments/{tenant.environment_id}/flags/{GUARDED}"
    )
    expect(page.locator("[data-rollout-running]")).to_contain_text("A guarded rollout is running")
    percentage = page.get_by_label("Percentage of users (0–100)")
    expect(percentage).to_have_value("25")
    percentage.fill("60")
    page.get_by_role("button", name="Save flag").first.click()
    warning = page.locator("[data-split-warning]")
    expect(warning).to_contain_text("would serve 60 %, where the rollout set 25 %")
    expect(warning).to_contain_text("Stopping the rollout first is advised")
    expect(percentage).to_have_value("60")  # the draft is kept
    flag_path = f"/environments/{tenant.environment_id}/flags/{GUARDED}"
    assert admin.request("GET", flag_path)["rules"][0]["percentage"] == 25  # not saved
    fits(page, screens, f"rollout-editor-warning-{device}")

    page.get_by_label("Change it anyway").check()
    page.get_by_role("button", name="Save flag").first.click()
    expect(page.get_by_text("Saved.")).to_be_visible()
    assert admin.request("GET", flag_path)["rules"][0]["percentage"] == 60
    page.get_by_label("Percentage of users (0–100)").fill("25")  # as the rollout set it
    page.get_by_role("button", name="Save flag").first.click()
    expect(page.locator("[data-split-warning]")).to_be_visible()  # a change again: asked
    page.get_by_label("Change it anyway").check()
    page.get_by_role("button", name="Save flag").first.click()
    expect(page.get_by_text("Saved.")).to_be_visible()
    page.context.close()
