"""The per-arm charts of the flag page: points in time order, changes marked where they fell,
and the same figures for the table beside them."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from api.controlplane.changes import AuditRecord
from api.web.dashboard.insights import arm_charts, markers

ACROSS_NEW_YEAR = ["2026-12-31T22:00:00Z", "2026-12-31T23:00:00Z", "2027-01-01T00:00:00Z",
                   "2027-01-01T01:00:00Z"]  # fmt: skip


def _windows() -> list[dict[str, object]]:
    return [
        {"window_start": at, "arm": "treatment", "evaluations": 10 * (n + 1), "failure_rate": 1.0}
        for n, at in enumerate(ACROSS_NEW_YEAR)
    ]


def test_a_range_across_new_year_is_drawn_in_time_order() -> None:
    svg = str(arm_charts(_windows(), "last 30 days", "hour")["evaluations"])
    line = re.search(r'<polyline class="line series-treatment" points="([^"]+)"', svg)[1]
    points = [tuple(map(float, p.split(","))) for p in line.split()]
    assert [x for x, _ in points] == sorted(x for x, _ in points)
    heights = [y for _, y in points]
    assert heights == sorted(heights, reverse=True)  # 10, 20, 30, 40 evaluations: rising
    labels = re.findall(r'<text class="axis" x="([\d.]+)"[^>]*>(\d\d-\d\d \d\d:\d\d)</text>', svg)
    assert [text for _, text in labels] == ["12-31 23:00", "01-01 00:00"]  # the ends crowd
    assert [float(x) for x, _ in labels] == sorted(float(x) for x, _ in labels)
    assert "2026-12-31 22:00: 10" in svg  # the description names each window in full


def test_a_change_is_marked_in_the_window_it_fell_in_whatever_the_year() -> None:
    change = AuditRecord(
        "aud_1", "org", datetime(2027, 1, 1, 0, 40, tzinfo=UTC).isoformat(), "admin-api",
        "flag.updated", "flag:env/f", None, None,
    )  # fmt: skip
    marked = markers([change], "hour")
    svg = str(arm_charts(_windows(), "last 30 days", "hour", marked)["evaluations"])
    assert marked == {datetime(2027, 1, 1, 0, 0, tzinfo=UTC): "flag.updated"}
    assert "<title>2027-01-01 00:00: flag.updated</title>" in svg


def test_the_table_has_a_row_per_window_with_both_arms() -> None:
    windows = [
        {"window_start": "2027-01-01T00:00:00Z", "arm": arm, "evaluations": n, "failure_rate": r}
        for arm, n, r in (("treatment", 10, 20.0), ("control", 12, None))
    ] + [{"window_start": "2027-01-02T00:00:00Z", "arm": "control", "evaluations": 3,
          "failure_rate": 0.0}]  # fmt: skip
    rows = arm_charts(windows, "all days", "day")["rows"]
    assert [row["at"] for row in rows] == ["2027-01-01", "2027-01-02"]
    assert rows[0]["treatment"]["evaluations"] == 10 and rows[0]["control"]["evaluations"] == 12
    assert rows[1]["treatment"] == {} and rows[1]["control"]["failure_rate"] == 0.0
