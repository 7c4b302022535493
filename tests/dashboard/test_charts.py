"""The server-rendered SVG charts: accessible, scaled, escaped."""

from __future__ import annotations

import re

from api.dashboard.charts import Point, column_chart


def test_a_chart_names_itself_and_every_day_for_assistive_technology() -> None:
    svg = column_chart(
        [Point("2026-11-20", 40.0), Point("2026-11-21", None)],
        title="Coverage",
        unit=" %",
        y_max=100.0,
    )
    assert 'role="img"' in svg and "<title" in svg
    assert "2026-11-20: 40 %, 2026-11-21: no figure" in svg
    assert len(re.findall(r'<rect class="bar"', svg)) == 1  # no bar for a day without a figure


def test_bars_are_scaled_to_the_axis_and_the_guide_is_drawn() -> None:
    svg = column_chart(
        [Point("d1", 50.0), Point("d2", 100.0)],
        title="t",
        y_max=100.0,
        guide=80.0,
        guide_label="80 % advised",
    )
    heights = [float(h) for h in re.findall(r'<rect class="bar"[^>]*height="([\d.]+)"', svg)]
    assert heights[1] == heights[0] * 2
    assert 'class="guide"' in svg and "80 % advised" in svg


def test_labels_are_escaped() -> None:
    assert "<script>" not in column_chart([Point("<script>", 1.0)], title="<b>")
