"""The dashboard in a real browser (Debian's chromium, headless) against a real gunicorn
server: what a person does and sees. Each test leaves screenshots in its temporary folder."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import Browser, Page, expect

from api.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin
from tests.support.needs import needs_chromium
from tests.support.server import GunicornServer
from tests.support.server_admin import admin_fixture  # noqa: F401 - the fixture ``admin``
from tests.support.timing import PROMPTLY_S

pytestmark = needs_chromium()


@pytest.fixture
def page(browser: Browser, tmp_path: Path) -> Iterator[Page]:
    """A fresh browser context (no cookies) on a laptop-sized screen."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())  # the person confirms what they asked for
    yield page
    context.close()


def shot(page: Page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def sign_in(page: Page, server: GunicornServer) -> None:
    page.goto(f"{server.url}/dashboard")
    expect(page.get_by_role("heading", name="Sign in to flagsight")).to_be_visible()
    page.get_by_label("Admin token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Organizations", exact=True)).to_be_visible()


def evaluate(server: GunicornServer, api_key: str, flag: str, user: str) -> requests.Response:
    return requests.post(
        f"{server.url}/v1/evaluate", json={"flagKey": flag, "userIdentifier": user},
        headers={"Authorization": f"ApiKey {api_key}"}, timeout=10,
    )  # fmt: skip


def served(server: GunicornServer, api_key: str, flag: str, user: str) -> tuple[Any, ...]:
    """What evaluation answers: value, matched rule type, error type."""
    answer = evaluate(server, api_key, flag, user).json()
    return answer["value"], answer["matchedRuleType"], (answer["error"] or {}).get("type")


def key_is_served(server: GunicornServer, api_key: str) -> bool:
    """A new key is known to every worker within a second; an empty feedback body is
    refused 400 (key known) or 401 (not yet), and nothing is metered. Answers from one
    worker prove nothing of the other: the check ends with every worker's config version."""
    server.wait_config_everywhere()
    statuses = {
        requests.post(
            f"{server.url}/v1/feedback/report", json={}, timeout=10,
            headers={"Authorization": f"ApiKey {api_key}"},
        ).status_code
        for _ in range(4)
    }  # fmt: skip
    return statuses == {400}


def eventually(check: Callable[[], bool], within_s: float = PROMPTLY_S) -> None:
    """Changes reach every worker within a second (contract section 2); allow two."""
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, "not true within the allowed time"
        time.sleep(0.1)


def test_sign_in_create_a_key_see_it_once_revoke_it_and_switch_insights_on(
    page: Page, dashboard_server: GunicornServer, tmp_path: Path
) -> None:
    server = dashboard_server
    page.goto(f"{server.url}/dashboard/organizations")
    page.get_by_label("Admin token").fill("wrong-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("That is not the admin token.")).to_be_visible()
    shot(page, tmp_path, "01-sign-in-refused")
    sign_in(page, server)

    org_name = f"Keys Org {uuid.uuid4().hex[:6]}"
    page.get_by_label("Name", exact=True).fill(org_name)
    page.get_by_label("Plan", exact=True).select_option("pro")
    page.get_by_role("button", name="Create organization").click()
    expect(page.get_by_role("heading", name=org_name)).to_be_visible()
    page.get_by_label("Key", exact=True).fill("production")
    page.get_by_role("button", name="Create environment").click()
    row = page.get_by_role("row", name="production")
    expect(row.get_by_text("Off", exact=True)).to_be_visible()
    row.get_by_role("button", name="Turn insights on").click()
    expect(page.get_by_role("row", name="production").get_by_text("On", exact=True)).to_be_visible()
    shot(page, tmp_path, "02-organization-insights-on")

    page.get_by_role("link", name="API keys of production").click()
    page.get_by_label("Name").fill("checkout service")
    page.get_by_role("button", name="Create API key").click()
    expect(page.get_by_text("it is shown only this once")).to_be_visible()
    key = page.get_by_label("The new API key").input_value()
    assert len(key) > 20
    page.get_by_role("button", name="Copy").click()
    expect(page.get_by_text("Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == key
    shot(page, tmp_path, "03-key-shown-once")
    eventually(lambda: evaluate(server, key, "any-flag", "u1").status_code == 200)

    page.get_by_role("navigation", name="Environment").get_by_role("link", name="API keys").click()
    expect(page.get_by_role("row", name="checkout service")).to_be_visible()
    assert key not in page.content()
    page.get_by_role("button", name="Revoke key checkout service").click()
    expect(page.get_by_text("is revoked")).to_be_visible()
    expect(page.get_by_role("row", name="checkout service")).to_have_count(0)
    shot(page, tmp_path, "04-key-revoked")
    eventually(lambda: evaluate(server, key, "any-flag", "u1").status_code == 401)


def test_create_a_flag_with_three_rules_and_toggle_it(
    page: Page, dashboard_server: GunicornServer, admin: Admin, tmp_path: Path
) -> None:
    server = dashboard_server
    tenant = admin.tenant(insights=True)
    eventually(lambda: key_is_served(server, tenant.api_key))
    sign_in(page, server)

    page.goto(f"{server.url}/dashboard/organizations/{tenant.organization_id}/segments")
    page.get_by_label("Key", exact=True).fill("beta-users")
    page.get_by_label("User identifiers").fill("alice\nbob\n\n  carol  \n")
    page.get_by_role("button", name="Save segment").click()
    expect(page.get_by_role("row", name="beta-users")).to_contain_text("3")

    page.goto(f"{server.url}/dashboard/environments/{tenant.environment_id}/flags")
    page.get_by_label("Key").fill("new-checkout")
    page.get_by_role("button", name="Create flag").click()
    expect(page.get_by_role("heading", name="Flag new-checkout")).to_be_visible()

    for kind in ("STATIC", "SEGMENT", "PERCENTAGE"):
        page.get_by_role("button", name=kind, exact=True).click()
    page.get_by_label("Serve").first.select_option("false")
    page.get_by_label("Segment").first.fill(
        "beta-users"
    )  # the SEGMENT rule's; PERCENTAGE has one too
    page.get_by_label("Percentage of users (0–100)").fill("150")
    page.get_by_role("button", name="Save flag").first.click()
    expect(page.get_by_text("Percentage must be a number from 0 to 100")).to_be_visible()
    expect(page.get_by_label("Percentage of users (0–100)")).to_have_attribute(
        "aria-invalid", "true"
    )
    shot(page, tmp_path, "05-validation-error")

    page.get_by_label("Percentage of users (0–100)").fill("25.5")
    page.get_by_role("button", name="Move down rule 1").click()  # STATIC below SEGMENT
    page.get_by_role("button", name="Move down rule 2").click()  # ... and below PERCENTAGE
    expect(page.get_by_text("Changes not saved yet")).to_be_visible()
    page.get_by_role("button", name="Save flag").first.click()
    expect(page.get_by_text("Saved.")).to_be_visible()
    shot(page, tmp_path, "06-three-rules-saved")
    stored = admin.request(
        "GET", f"/environments/{tenant.environment_id}/flags/new-checkout", expect=200
    )
    assert stored["rules"] == [
        {"type": "SEGMENT", "segment": "beta-users", "value": True},
        {"type": "PERCENTAGE", "percentage": 25.5, "value": True},
        {"type": "STATIC", "value": False},
    ]
    assert stored["enabled"] is False

    page.get_by_role("navigation", name="Environment").get_by_role("link", name="Flags").click()
    row = page.get_by_role("row", name="new-checkout")
    expect(row.get_by_text("Disabled")).to_be_visible()
    row.get_by_role("button", name="Enable new-checkout").click()
    expect(page.get_by_role("row", name="new-checkout").get_by_text("Enabled")).to_be_visible()
    shot(page, tmp_path, "07-flag-enabled")
    eventually(
        lambda: served(server, tenant.api_key, "new-checkout", "alice") == (True, "SEGMENT", None)
    )

    page.get_by_role("row", name="new-checkout").get_by_role(
        "button", name="Disable new-checkout"
    ).click()
    expect(page.get_by_role("row", name="new-checkout").get_by_text("Disabled")).to_be_visible()
    eventually(
        lambda: (
            served(server, tenant.api_key, "new-checkout", "alice")
            == (False, None, "FLAG_DISABLED")
        )
    )


def _wait_for_sealed_rows(data_dir: Path, kind: str, environment_id: str, rows: int) -> None:
    """Until the environment's events of a kind are all sealed.

    The server is shared by the module's tests, so the files of earlier tests say nothing
    about this one's: count this environment's rows.
    """
    import duckdb

    deadline = time.monotonic() + 30.0
    files = f"{data_dir}/events/event_type={kind}/*/*.parquet"
    while True:
        con = duckdb.connect()
        try:
            sealed = con.execute(
                f"SELECT count(*) FROM read_parquet('{files}') WHERE environment_id = ?",
                [environment_id],
            ).fetchone()[0]
        except duckdb.IOException:
            sealed = 0
        finally:
            con.close()
        if sealed >= rows:
            return
        assert time.monotonic() < deadline, f"{sealed} of {rows} {kind} rows sealed"
        time.sleep(0.25)


def test_metrics_after_a_pipeline_run_with_the_coverage_warning(
    page: Page, dashboard_server: GunicornServer, admin: Admin, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from pipelines.cli import run_pipeline_once

    server = dashboard_server
    tenant = admin.tenant(insights=True)
    admin.flag(tenant.environment_id, "search-v2", [{"type": "PERCENTAGE", "percentage": 50}])
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}
    eventually(lambda: key_is_served(server, tenant.api_key))
    users = [f"user-{i}" for i in range(120)]
    answers = requests.post(
        f"{server.url}/v1/evaluate/bulk", json={"flagKey": "search-v2", "userIdentifiers": users},
        headers=headers, timeout=30,
    ).json()  # fmt: skip
    feedback = [
        {"evaluationId": answers[user]["evaluationId"], "result": i % 4 != 0, "latencyMs": 100 + i}
        for i, user in enumerate(users[:60])
    ]
    status = requests.post(
        f"{server.url}/v1/feedback/bulk", json={"feedbacks": feedback}, headers=headers, timeout=30
    ).status_code
    assert status == 204
    _wait_for_sealed_rows(server.data_dir, "evaluation", tenant.environment_id, len(users))
    _wait_for_sealed_rows(server.data_dir, "feedback", tenant.environment_id, len(feedback))
    monkeypatch.setenv("DAGSTER_HOME", str(server.data_dir / "dagster"))
    settings = Settings(data_dir=server.data_dir, admin_token=ADMIN_TOKEN)
    run_pipeline_once(settings, echo=lambda line: None)

    sign_in(page, server)
    page.goto(
        f"{server.url}/dashboard/environments/{tenant.environment_id}/flags/search-v2/insights"
    )
    metrics = page.locator("dl.metrics")
    expect(metrics.locator("div", has_text="Evaluations")).to_contain_text("120")
    expect(metrics.locator("div", has_text="Feedback")).to_contain_text("60")
    expect(metrics.locator("div", has_text="Coverage")).to_contain_text("50.0 %")
    expect(metrics.locator("div", has_text="Success rate")).to_contain_text("75.0 %")
    expect(metrics.locator("div", has_text="Failure rate")).to_contain_text("25.0 %")
    expect(metrics.locator("div", has_text="Average latency")).to_contain_text("129.5 ms")
    expect(page.get_by_text("As of")).to_be_visible()
    expect(page.locator("[data-warning=coverage]")).to_contain_text("under the 80 % advised")
    expect(page.get_by_role("img", name="Feedback coverage per day")).to_be_visible()
    expect(page.get_by_role("img", name="Success rate per day")).to_be_visible()
    arms = page.locator("[data-arms]")
    expect(arms.locator("tr", has_text="Users").first).to_contain_text("Users")
    failure = page.locator("[data-comparison=failureRate] [data-decision]")
    expect(failure).to_have_text("withheld")
    expect(page.locator("[data-comparison=failureRate]")).to_contain_text(
        "users with feedback per arm"
    )
    shot(page, tmp_path, "08-insights-coverage-warning")


def test_health_view_shows_a_regression_with_its_interval_and_arm_charts(
    browser: Browser, dashboard_server: GunicornServer, admin: Admin, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    import random

    from flagsight_core.hashing import bucket, threshold

    from pipelines.cli import run_pipeline_once

    server = dashboard_server
    tenant = admin.tenant(insights=True)
    admin.flag(tenant.environment_id, "checkout-v3", [{"type": "PERCENTAGE", "percentage": 50}])
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}
    eventually(lambda: key_is_served(server, tenant.api_key))
    eventually(lambda: served(server, tenant.api_key, "checkout-v3", "u")[2] is None)
    users = [f"shopper-{i}" for i in range(3000)]
    answer = requests.post(
        f"{server.url}/v1/evaluate/bulk", json={"flagKey": "checkout-v3", "userIdentifiers": users},
        headers=headers, timeout=30,
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    answers = answer.json()
    rng = random.Random(5)
    feedback = []
    for user in users:
        treated = bucket("checkout-v3", user) < threshold(50)
        ok = rng.random() >= (0.25 if treated else 0.05)
        latency = rng.lognormvariate(5.0, 0.3)
        feedback.append(
            {"evaluationId": answers[user]["evaluationId"], "result": ok, "latencyMs": latency}
        )
    for start in range(0, len(feedback), 500):
        status = requests.post(
            f"{server.url}/v1/feedback/bulk", json={"feedbacks": feedback[start : start + 500]},
            headers=headers, timeout=30,
        ).status_code  # fmt: skip
        assert status == 204
    _wait_for_sealed_rows(server.data_dir, "evaluation", tenant.environment_id, len(users))
    _wait_for_sealed_rows(server.data_dir, "feedback", tenant.environment_id, len(feedback))
    monkeypatch.setenv("DAGSTER_HOME", str(server.data_dir / "dagster"))
    run_pipeline_once(Settings(data_dir=server.data_dir, admin_token=ADMIN_TOKEN), echo=print)

    for width, height in ((1366, 768), (390, 844)):
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        sign_in(page, server)
        page.goto(
            f"{server.url}/dashboard/environments/{tenant.environment_id}/flags/checkout-v3/insights"
        )
        expect(page.locator("[data-comparison=failureRate] [data-decision]")).to_have_text(
            "regression"
        )
        expect(page.get_by_role("img", name="Failure rate difference")).to_be_visible()
        expect(page.locator("[data-sample-ratio]")).to_contain_text("50.0 % expected")
        expect(page.get_by_role("img", name="Failure rate by arm")).to_be_visible()
        expect(page.get_by_role("img", name="Evaluations by arm")).to_be_visible()
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page scrolls sideways at {width} px"
        shot(page, tmp_path, f"09-health-regression-{width}")
        context.close()


@pytest.mark.parametrize("limit", [100])
def test_usage_states_within_overage_and_blocked(
    page: Page, dashboard_server: GunicornServer, admin: Admin, tmp_path: Path, limit: int
) -> None:
    server = dashboard_server
    tenant = admin.tenant(plan="enterprise", limit=limit)
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    eventually(lambda: key_is_served(server, tenant.api_key))
    url = f"{server.url}/dashboard/organizations/{tenant.organization_id}/usage"
    served = 0

    def spend(count: int) -> Any:
        nonlocal served
        users = [f"u{served + i}" for i in range(count)]
        served += count
        return requests.post(
            f"{server.url}/v1/evaluate/bulk", json={"flagKey": "f", "userIdentifiers": users},
            headers={"Authorization": f"ApiKey {tenant.api_key}"}, timeout=30,
        ).json()  # fmt: skip

    sign_in(page, server)
    spend(60)
    page.goto(url)
    expect(page.get_by_text("60 of 100 evaluations this month")).to_be_visible()
    expect(page.get_by_text("Within limit")).to_be_visible()
    expect(page.get_by_text("40 evaluations left before overage")).to_be_visible()
    shot(page, tmp_path, "09-usage-within")

    spend(45)
    page.reload()
    expect(page.get_by_text("105 of 100 evaluations this month")).to_be_visible()
    expect(page.locator("[data-usage-state]")).to_contain_text("Overage")
    expect(page.locator("[data-usage-state]")).to_contain_text("still served up to 110")
    shot(page, tmp_path, "10-usage-overage")

    answers = spend(10)
    assert sum(a["error"] is not None for a in answers.values()) == 5
    page.reload()
    expect(page.get_by_text("110 of 100 evaluations this month")).to_be_visible()
    expect(page.locator("[data-usage-state]")).to_contain_text("Blocked")
    expect(page.locator("[data-usage-state]")).to_contain_text("PLAN_LIMIT_EXCEEDED")
    shot(page, tmp_path, "11-usage-blocked")


def test_start_and_stop_a_guarded_rollout_then_restore_from_the_audit_log(
    page: Page, dashboard_server: GunicornServer, admin: Admin, tmp_path: Path
) -> None:
    server = dashboard_server
    tenant = admin.tenant(insights=True)
    admin.flag(tenant.environment_id, "guarded", [{"type": "PERCENTAGE", "percentage": 20}])
    insights = f"{server.url}/dashboard/environments/{tenant.environment_id}/flags/guarded/insights"
    sign_in(page, server)
    page.goto(insights)

    form = page.get_by_role("form", name="Start a guarded rollout")
    form.get_by_label("Steps").fill("5, 200")
    form.get_by_role("button", name="Start a guarded rollout").click()
    expect(page.locator("[data-rollout-error]")).to_contain_text("steps[1]")
    expect(form.get_by_label("Steps")).to_have_value("5, 200")  # the person's input is kept

    form.get_by_label("Steps").fill("1, 5, 25, 50, 100")
    form.get_by_role("button", name="Start a guarded rollout").click()
    expect(page.locator("[data-rollout-state]")).to_contain_text("running")
    expect(page.locator("[data-rollout-state]")).to_contain_text("step 1 of 5 (1 %)")
    assert (
        admin.request("GET", f"/environments/{tenant.environment_id}/flags/guarded")["rules"][0][
            "percentage"
        ]
        == 1
    )
    expect(page.locator("[data-changes]")).to_contain_text("rollout.started by dashboard")
    shot(page, tmp_path, "10-rollout-running")

    page.get_by_role("button", name="Stop the rollout").click()  # confirmed (see ``page``)
    expect(page.get_by_role("form", name="Start a guarded rollout")).to_be_visible()
    assert (
        admin.request("GET", f"/environments/{tenant.environment_id}/flags/guarded/rollout")[
            "status"
        ]
        == 404
    )

    page.goto(f"{server.url}/dashboard/organizations/{tenant.organization_id}/audit")
    started = page.locator("tr", has_text="rollout.started")
    expect(started).to_contain_text("dashboard")
    started.get_by_role("button", name="Restore").click()
    expect(page.locator("[data-restored]")).to_be_visible()
    flag = admin.request("GET", f"/environments/{tenant.environment_id}/flags/guarded")
    assert flag["rules"][0]["percentage"] == 20  # as before the rollout started
    shot(page, tmp_path, "11-audit-log")


@pytest.mark.parametrize("width", [1366, 390])
def test_a_step_waiting_to_be_judged_says_so_on_the_insights_page(
    page: Page, dashboard_server: GunicornServer, admin: Admin, tmp_path: Path, width: int
) -> None:
    """A step whose time has passed with nothing to judge waits (the guardian, run by the real
    pipeline, records why) and the insights page shows it as a banner, with the guardian's
    evidence per guardrail: nothing shown yet, no interval bounded, no user so far."""
    from pipelines.cli import run_pipeline_once

    server = dashboard_server
    tenant = admin.tenant(insights=True)
    admin.flag(tenant.environment_id, "quiet", [{"type": "PERCENTAGE", "percentage": 0}])
    path = f"/environments/{tenant.environment_id}/flags/quiet/rollout"
    admin.request("PUT", path, {"steps": [1, 100], "stepMinutes": 0.01}, expect=200)
    time.sleep(1.0)  # the step's time (0.6 s) has passed
    run_pipeline_once(Settings(data_dir=server.data_dir, admin_token=ADMIN_TOKEN), echo=len)
    rollout = admin.request("GET", path, expect=200)
    assert rollout["state"] == "running" and rollout["step"] == 0
    reason = rollout["waiting"]["reason"]
    assert "not yet shown within" in reason
    assert set(rollout["guard"]["guardrails"]) == {"failureRate", "latencyP95Ms", "coverage"}

    page.set_viewport_size({"width": width, "height": 800})
    sign_in(page, server)
    page.goto(f"{server.url}/dashboard/environments/{tenant.environment_id}/flags/quiet/insights")
    banner = page.locator("[data-rollout-waiting]")
    expect(banner).to_contain_text("Waiting to judge this step")
    expect(banner).to_contain_text(reason)
    rows = page.locator("[data-guardrails] tbody tr")
    expect(rows).to_have_count(3)
    for row in rows.all():
        expect(row.locator("[data-status]")).to_have_text("Not yet shown")
        expect(row.locator("[data-interval]")).to_have_text("not bounded yet")
        expect(row.locator("[data-users]")).to_have_text("0 treatment, 0 control")
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    shot(page, tmp_path, f"12-rollout-waiting-{width}")


@pytest.mark.parametrize("width", [1366, 390])
def test_a_rolled_back_rollout_says_why_and_its_decisions_fit_a_phone(
    page: Page, dashboard_server: GunicornServer, admin: Admin, tmp_path: Path, width: int
) -> None:
    """The guardian's decision written through the store, as the pipeline writes it; the page
    shows a banner with the reason, its decisions fit the screen, times read as UTC, the
    guardrails by name and every button styled."""
    from api.controlplane.changes import RolloutAction
    from api.controlplane.sqlite_store import SqliteControlPlaneStore

    server = dashboard_server
    tenant = admin.tenant(insights=True)
    key = "a-rather-long-flag-key-for-a-small-screen.checkout-v2"
    admin.flag(tenant.environment_id, key, [{"type": "PERCENTAGE", "percentage": 0}])
    admin.request("PUT", f"/environments/{tenant.environment_id}/flags/{key}/rollout", {},
                  expect=200)  # fmt: skip
    reason = ("regression: Failure rate (treatment - control +12.2 pp, interval [+4.7 pp, "
              "+24 pp], tolerance 1 pp); p95 latency (treatment - control +310 ms, interval "
              "[+120 ms, +480 ms], tolerance 50 ms)")  # fmt: skip
    store = SqliteControlPlaneStore(server.data_dir / "controlplane.sqlite3")
    try:
        store.decide_rollout(tenant.environment_id, key, 0, RolloutAction.ROLLED_BACK, reason, None)
    finally:
        store.close()

    page.set_viewport_size({"width": width, "height": 800})
    sign_in(page, server)
    page.goto(f"{server.url}/dashboard/environments/{tenant.environment_id}/flags/{key}/insights")
    banner = page.locator("[data-rollout-banner=rolledBack]")
    expect(banner).to_contain_text("Rolled back to 0 %")
    expect(banner).to_contain_text(reason)
    expect(page.locator("[data-rollout-state]")).to_contain_text(
        "guardrails: Failure rate, p95 latency, Coverage"
    )
    expect(page.locator("[data-decisions]")).to_contain_text("UTC")
    form = page.get_by_role("form", name="Start a guarded rollout")
    expect(form.get_by_label("p95 latency", exact=True)).to_be_visible()
    expect(form.get_by_label("p95 latency tolerance in milliseconds")).to_have_value("50")
    for button in page.locator("main button").all():
        assert "button" in (button.get_attribute("class") or ""), button.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    shot(page, tmp_path, f"13-rollout-rolled-back-{width}")
