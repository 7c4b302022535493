"""The insights page's charts in a real browser (Debian's chromium, headless) at a laptop's
1366 px and a phone's 390 px (issue 29): every line series is drawn as a line (no fill), no two
labels of a chart overlap or leave it, and the page does not scroll sideways (the tables beside
the charts opened too), for each range of the per-arm charts and for the daily columns.

The figures are written straight into a published warehouse file with the pipeline's own
schema (its migrations and SQL files): months of windows, so that labels crowd, and three
windows, the case the issue found drawn as filled triangles with overlapping labels.
Screenshots go to ``$FLAGSIGHT_SCREENSHOTS`` when it is set (else the test's temporary folder).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from playwright.sync_api import Browser, Page

from tests.dashboard.test_browser import sign_in
from tests.support.admin import Admin, Tenant
from tests.support.health_rows import insert_health
from tests.support.needs import needs_chromium
from tests.support.server import GunicornServer
from tests.support.server_admin import admin_fixture  # noqa: F401 - the fixture ``admin``
from warehouse.migrations import migrate
from warehouse.sql import run_script

pytestmark = needs_chromium()

WIDTHS = {"laptop": 1366, "phone": 390}
RANGES = ("24h", "30d", "all")
MANY, THREE = "checkout-with-many-windows", "checkout-three-windows"
CLEAR = "checkout-clear-of-zero"
"""A flag with three windows like ``THREE``, its health's intervals clear of 0: the end nearer 0 has its label on 0's
side, where the zero line is."""
HEALTH = {
    MANY: (4.25, -1.5, 10.0, "withheld", 312.5, -120.25, 745.5, "withheld"),
    THREE: (4.25, -1.5, 10.0, "withheld", 312.5, -120.25, 745.5, "withheld"),
    CLEAR: (2.0, 1.0, 3.0, "regression", -1200.0, -1300.0, -1100.0, "improvement"),
}
"""Each flag's failure-rate and p95 latency comparisons: difference, interval, decision."""


@pytest.fixture(scope="module")
def tenant(dashboard_server: GunicornServer, admin: Admin) -> Tenant:
    """An environment with two flags split 50/50 and a published warehouse with their figures."""
    tenant = admin.tenant(insights=True)
    for key in HEALTH:
        admin.flag(tenant.environment_id, key, [{"type": "PERCENTAGE", "percentage": 50}])
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    publish_warehouse(dashboard_server.data_dir, tenant, now)
    return tenant


def publish_warehouse(data_dir: Path, tenant: Tenant, now: datetime) -> None:
    """Writes the warehouse beside, then renames it into place, as the pipeline publishes."""
    scratch = data_dir / "warehouse.test.duckdb"
    con = duckdb.connect(str(scratch))
    try:
        migrate(con)
        env = tenant.environment_id
        minutes = [now - timedelta(minutes=m) for m in range(360, 0, -1) if not 200 < m < 230]
        hours = [now.replace(minute=0) - timedelta(hours=h) for h in range(720, 0, -1)]
        days = [now.replace(hour=0, minute=0) - timedelta(days=d) for d in range(90, -1, -1)]
        for key, grains in (
            (MANY, {"minute": minutes, "hour": hours, "day": days}),
            *(
                (key, {"minute": minutes[-3:], "hour": hours[-3:], "day": days[-3:]})
                for key in (THREE, CLEAR)
            ),
        ):
            for grain, starts in grains.items():
                for n, start in enumerate(starts):
                    for arm, evaluations, failures in (
                        ("treatment", 50 + n % 7, 3 + n % 4), ("control", 40 + n % 5, 1 + n % 2)
                    ):  # fmt: skip
                        feedback = 0 if n % 17 == 5 else 40  # no figure: the line breaks
                        con.execute(
                            "INSERT INTO flag_arm_windows VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [env, key, grain, start, arm, evaluations, 45, feedback,
                             min(failures, feedback), 120.0 * feedback, feedback],
                        )  # fmt: skip
            for n, day in enumerate(days if key == MANY else days[-1:]):
                if n % 11 == 3:
                    continue  # a day without evaluations: its column is missing
                con.execute(
                    "INSERT INTO flag_value_daily_stats VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [env, key, day.date(), True, tenant.organization_id, 250_000, 175_000,
                     160_000, 15_000, 2.1e7, 175_000],
                )  # fmt: skip
        for key, figures in HEALTH.items():
            row = {
                "organization_id": tenant.organization_id,
                "environment_id": env,
                "flag_key": key,
                "rollout_percentage": 50,
                "treatment_users": 500,
                "treatment_users_with_feedback": 300,
                "control_users": 500,
                "control_users_with_feedback": 300,
                "sample_ratio_expected": 0.5,
                "sample_ratio_observed": 0.5,
                "sample_ratio_p_value": 1.0,
                "sample_ratio_mismatch": False,
                "withheld_reason": "below_minimum_sample",
            }
            names = ("difference", "ci_low", "ci_high", "decision")
            insert_health(con, row, {
                "failureRate": dict(zip(names, figures[:4], strict=True)),
                "latencyP95Ms": dict(zip(names, figures[4:], strict=True)),
                "coverage": {},
            }, f"TIMESTAMPTZ '{now.isoformat()}'")  # fmt: skip
        con.execute("INSERT INTO environment_keys VALUES (?, 'production', ?)", [env, now])
        run_script(con, "flag_environment_daily")
        run_script(con, "flag_environment_metrics")
    finally:
        con.close()
    scratch.replace(data_dir / "warehouse.duckdb")


DRAWING = """() => [...document.querySelectorAll('svg.chart')].map(svg => {
  const box = r => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom});
  const style = el => getComputedStyle(el);
  return {
    title: svg.querySelector('title').textContent,
    box: box(svg.getBoundingClientRect()),
    lines: [...svg.querySelectorAll('.line')].map(el => ({
      tag: el.tagName, fill: style(el).fill, stroke: style(el).stroke,
      width: parseFloat(style(el).strokeWidth)})),
    bars: [...svg.querySelectorAll('.bar')].map(el => style(el).fill),
    labels: [...svg.querySelectorAll('text')].map(el => ({
      text: el.textContent, box: box(el.getBoundingClientRect())})),
  };
})"""


def overlapping(labels: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The pairs of labels whose boxes share more than a hair (half a pixel) each way."""

    def shared(a: dict[str, float], b: dict[str, float], low: str, high: str) -> float:
        return min(a[high], b[high]) - max(a[low], b[low])

    return [
        (a["text"], b["text"])
        for i, a in enumerate(labels)
        for b in labels[i + 1 :]
        if shared(a["box"], b["box"], "left", "right") > 0.5
        and shared(a["box"], b["box"], "top", "bottom") > 0.5
    ]


def outside(labels: list[dict[str, Any]], frame: dict[str, float]) -> list[str]:
    """The labels that run out of their chart (cut off at its edge), give or take half a pixel."""
    return [
        label["text"]
        for label in labels
        if label["box"]["left"] < frame["left"] - 0.5
        or label["box"]["right"] > frame["right"] + 0.5
        or label["box"]["top"] < frame["top"] - 0.5
        or label["box"]["bottom"] > frame["bottom"] + 0.5
    ]


def chart_problems(page: Page, where: str) -> tuple[list[str], int]:
    """What is wrong with the page's charts by what the issue asks, and how many line series
    were drawn (the arm charts must draw some)."""
    problems, drawn = [], 0
    for chart in page.evaluate(DRAWING):
        name = f"{where}, {chart['title']}"
        if wrong := [
            line for line in chart["lines"]
            if line["fill"] != "none" or line["stroke"] in ("none", "") or not line["width"] > 0
        ]:  # fmt: skip
            problems.append(f"{name}: {len(wrong)} of {len(chart['lines'])} lines as {wrong[0]}")
        drawn += len(chart["lines"])
        if any(fill == "none" for fill in chart["bars"]):
            problems.append(f"{name}: a column without fill")
        if pairs := overlapping(chart["labels"]):
            problems.append(f"{name}: labels overlap: {pairs}")
        if cut := outside(chart["labels"], chart["box"]):
            problems.append(f"{name}: labels cut off: {cut}")
    return problems, drawn


@pytest.mark.parametrize("device", WIDTHS)
def test_lines_are_lines_and_no_labels_overlap(
    browser: Browser, dashboard_server: GunicornServer, tenant: Tenant, device: str, tmp_path: Path
) -> None:
    screens = Path(os.environ.get("FLAGSIGHT_SCREENSHOTS") or tmp_path)
    screens.mkdir(parents=True, exist_ok=True)
    width = WIDTHS[device]
    context = browser.new_context(viewport={"width": width, "height": 844 if width < 600 else 768})
    page = context.new_page()
    problems: list[str] = []
    try:
        sign_in(page, dashboard_server)
        for key in (MANY, THREE):
            for chosen in RANGES:
                path = f"/dashboard/environments/{tenant.environment_id}/flags/{key}/insights"
                page.goto(f"{dashboard_server.url}{path}?range={chosen}")
                where = f"{key} {chosen} at {width} px"
                assert page.get_by_role("img", name="Evaluations by arm").is_visible(), where
                found, drawn = chart_problems(page, where)
                problems += found if drawn else [*found, f"{where}: no line drawn"]
                page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
                overflow = page.evaluate("document.documentElement.scrollWidth - innerWidth")
                if overflow > 0:
                    problems.append(f"{where}: the page scrolls sideways by {overflow} px")
                page.screenshot(path=str(screens / f"charts-{device}-{key}-{chosen}.png"),
                                full_page=True)  # fmt: skip
    finally:
        context.close()
    assert problems == [], "\n".join(problems)


INTERVALS = """() => [...document.querySelectorAll('svg.chart.interval')].map(svg => {
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  const box = (el, pad = 0) => {
    const r = el.getBoundingClientRect();
    return {left: r.left - pad, right: r.right + pad, top: r.top - pad, bottom: r.bottom + pad};
  };
  const stroke = el => parseFloat(getComputedStyle(el).strokeWidth) * scale / 2;
  return {
    title: svg.querySelector('title').textContent,
    box: box(svg),
    marks: [...svg.querySelectorAll('line, circle')].map(el => ({
      text: el.getAttribute('class'), box: box(el, stroke(el))})),
    labels: [...svg.querySelectorAll('text')].map(el => ({text: el.textContent, box: box(el)})),
  };
})"""


@pytest.mark.parametrize("device", WIDTHS)
def test_an_intervals_labels_clear_the_zero_line_the_bar_and_each_other(
    browser: Browser, dashboard_server: GunicornServer, tenant: Tenant, device: str, screens: Path
) -> None:
    """Intervals clear of 0 (a regression of +1.00 to +3.00 pp, an improvement of -1300 to
    -1100 ms): the label of the end nearer 0 stands where the zero line is drawn."""
    width = WIDTHS[device]
    context = browser.new_context(viewport={"width": width, "height": 844 if width < 600 else 768})
    page = context.new_page()
    try:
        sign_in(page, dashboard_server)
        path = f"/dashboard/environments/{tenant.environment_id}/flags/{CLEAR}/insights"
        page.goto(f"{dashboard_server.url}{path}")
        charts = page.evaluate(INTERVALS)
        page.screenshot(path=str(screens / f"intervals-{device}.png"), full_page=True)
    finally:
        context.close()
    assert [chart["title"] for chart in charts] == [
        "Failure rate difference", "p95 latency difference",
    ]  # fmt: skip
    for chart in charts:
        shown = {label["text"] for label in chart["labels"]}
        assert shown in ({"+1.00 pp", "+3.00 pp"}, {"-1300.00 ms", "-1100.00 ms"}), shown
        marks = {mark["text"] for mark in chart["marks"]}  # the zero line, the bar, the dot
        crossed = [pair for pair in overlapping(chart["labels"] + chart["marks"])
                   if not set(pair) <= marks]  # fmt: skip
        assert crossed == [], (device, chart["title"])
        assert outside(chart["labels"], chart["box"]) == [], (device, chart["title"])
