"""The per-arm charts of the flag page: points in time order, changes marked where they fell."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from api.controlplane.changes import AuditRecord
from api.dashboard.insights import arm_charts, markers

ACROSS_NEW_YEAR = ["2026-12-31T22:00:00Z", "2026-12-31T23:00:00Z", "2027-01-01T00:00:00Z",
                   "2027-01-01T01:00:00Z"]  # fmt: skip


def _windows() -> list[dict[str, object]]:
    return [
        {"window_start": at, "arm": "treatment", "evaluations": 10 * (n + 1), "failure_rate": 1.0}
        for n, at in enumerate(ACROSS_NEW_YEAR)
    ]


def test_a_range_across_new_year_is_drawn_in_time_order() -> None:
    svg = str(arm_charts(_windows(), "last 30 days")["evaluations"])
    line = re.search(r'<polyline class="line series-treatment" points="([^"]+)"', svg)[1]
    points = [tuple(map(float, p.split(","))) for p in line.split()]
    assert [x for x, _ in points] == sorted(x for x, _ in points)
    heights = [y for _, y in points]
    assert heights == sorted(heights, reverse=True)  # 10, 20, 30, 40 evaluations: rising
    times = re.findall(r'<text class="axis"[^>]*>(\d{4}-\d\d-\d\d \d\d:\d\d)</text>', svg)
    assert times == sorted(times) and times[0] == "2026-12-31 22:00"


def test_a_change_is_marked_in_the_window_it_fell_in_whatever_the_year() -> None:
    change = AuditRecord(
        "aud_1", "org", datetime(2027, 1, 1, 0, 40, tzinfo=UTC).isoformat(), "admin-api",
        "flag.updated", "flag:env/f", None, None,
    )  # fmt: skip
    marked = markers([change], "hour")
    svg = str(arm_charts(_windows(), "last 30 days", marked)["evaluations"])
    assert marked == {"2027-01-01 00:00": "flag.updated"}
    assert "<title>2027-01-01 00:00: flag.updated</title>" in svg
