"""The server-rendered SVG charts: accessible, scaled, escaped; time axes labelled at round
times, as finely as their labels fit, and lines broken where a figure is missing."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from api.web.dashboard.charts import (
    FONT_SIZE,
    LABEL_GAP,
    LABEL_LEFT,
    TIME_STEPS,
    WIDTH,
    Point,
    Step,
    TimeScale,
    column_chart,
    interval_chart,
    label_format,
    label_width,
    labels_fit,
    line_chart,
    step_times,
    time_ticks,
)

MINUTE, HOUR, DAY = timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_chart_names_itself_and_every_day_for_assistive_technology() -> None:
    svg = column_chart(
        [Point(at("2026-11-20"), 40.0), Point(at("2026-11-21"), None)],
        title="Coverage",
        unit=" %",
        y_max=100.0,
    )
    assert 'role="img"' in svg and "<title" in svg
    assert "2 days. 2026-11-20: 40 %, 2026-11-21: no figure" in svg
    assert len(re.findall(r'<rect class="bar"', svg)) == 1  # no bar for a day without a figure


def test_bars_are_scaled_to_the_axis_and_the_guide_is_drawn() -> None:
    svg = column_chart(
        [Point(at("2026-11-20"), 50.0), Point(at("2026-11-21"), 100.0)],
        title="t",
        y_max=100.0,
        guide=80.0,
        guide_label="80 % advised",
    )
    heights = [float(h) for h in re.findall(r'<rect class="bar"[^>]*height="([\d.]+)"', svg)]
    assert heights[1] == heights[0] * 2
    assert 'class="guide"' in svg and "80 % advised" in svg


def test_a_day_without_figures_keeps_its_place() -> None:
    days = [at("2026-11-20"), at("2026-11-21"), at("2026-11-25")]
    svg = column_chart([Point(day, 1.0) for day in days], title="t")
    xs = [float(x) for x in re.findall(r'<rect class="bar" x="([\d.]+)"', svg)]
    assert xs[2] - xs[1] == pytest.approx(4 * (xs[1] - xs[0]), abs=0.2)


def test_labels_are_escaped() -> None:
    svg = column_chart([Point(at("2026-11-20"), 1.0)], title="<b>")
    svg += line_chart({"<script>": [Point(at("2026-11-20"), 1.0)]}, title="t", grain=MINUTE)
    assert "<script>" not in svg and "<b>" not in svg


def test_value_axis_labels_are_short_enough_for_the_margin() -> None:
    svg = column_chart([Point(at("2026-11-20"), 1_800_000.0)], title="t")
    assert re.findall(r'text-anchor="end">([^<]+)</text>', svg) == ["0", "1M", "2M"]
    assert "2026-11-20: 1,800,000" in svg  # the figure itself, in full, in its title


@pytest.mark.parametrize(
    ("step", "start", "end", "expected"),
    [
        (Step(MINUTE * 15), "2026-11-26 09:07", "2026-11-26 10:00", ["09:15", "09:30", "09:45", "10:00"]),
        (Step(HOUR * 6), "2026-12-31 19:00", "2027-01-01 13:00", ["01-01 00:00", "01-01 06:00", "01-01 12:00"]),
        (Step(DAY * 7), "2026-11-20 00:00", "2026-12-08 00:00", ["11-23", "11-30", "12-07"]),  # Mondays
        (Step(months=3), "2026-02-14 00:00", "2027-01-01 00:00", ["2026-04", "2026-07", "2026-10", "2027-01"]),
    ],
)  # fmt: skip
def test_ticks_fall_on_round_times_of_their_step(
    step: Step, start: str, end: str, expected: list[str]
) -> None:
    fmt = label_format(step, at(start), at(end))
    assert [t.strftime(fmt) for t in step_times(step, at(start), at(end))] == expected


@pytest.mark.parametrize(
    ("start", "end", "grain", "expected"),
    [
        ("2026-11-26 22:58", "2026-11-26 23:00", MINUTE, ["22:58", "22:59", "23:00"]),
        ("2026-11-26 09:00", "2026-11-26 15:00", MINUTE, ["10:00", "11:00", "12:00", "13:00", "14:00"]),
        ("2026-11-25 17:00", "2026-11-26 17:00", MINUTE, ["11-26 00:00", "11-26 12:00"]),
        ("2026-10-27 00:00", "2026-11-26 00:00", HOUR, ["11-02", "11-09", "11-16", "11-23"]),  # Mondays
        ("2026-11-20 00:00", "2026-11-30 00:00", DAY, ["11-21", "11-23", "11-25", "11-27", "11-29"]),
        ("2026-11-20 00:00", "2026-12-11 00:00", DAY, ["11-23", "11-30", "12-07"]),
        ("2026-10-01 00:00", "2027-02-01 00:00", DAY, ["2026-11", "2026-12", "2027-01"]),
        ("2025-01-01 00:00", "2026-11-26 00:00", DAY, ["2025-07", "2026-01", "2026-07"]),
    ],
)  # fmt: skip
def test_labels_are_as_many_as_fit_and_as_short_as_the_span_allows(
    start: str, end: str, grain: timedelta, expected: list[str]
) -> None:
    ticks = time_ticks(TimeScale(at(start), at(end)), grain)
    assert [t.text for t in ticks if t.text] == expected


def test_an_end_label_that_would_crowd_its_neighbour_is_left_out_not_the_step() -> None:
    scale = TimeScale(at("2026-11-26 09:00"), at("2026-11-26 15:00"))
    ticks = time_ticks(scale, MINUTE)
    assert [t.at.hour for t in ticks] == list(range(9, 16))  # every hour has its tick mark
    assert ticks[0].text == ticks[-1].text == ""  # 09:00 and 15:00 would not be whole there


def spans(start: datetime) -> list[tuple[TimeScale, timedelta]]:
    """Spans from a minute to twenty years, at the grain each range of the page has."""
    lengths = [MINUTE * n for n in (1, 2, 3, 7, 59, 61, 239, 1439)] + [
        HOUR * n for n in (25, 47, 100, 719)
    ] + [DAY * n for n in (3, 31, 90, 200, 366, 1000, 7300)]  # fmt: skip
    grains = {MINUTE: 1440 * MINUTE, HOUR: 30 * DAY, DAY: 10**6 * DAY}
    return [
        (TimeScale(start, start + length), grain)
        for length in lengths
        for grain, longest in grains.items()
        if grain <= length <= longest
    ]


@pytest.mark.parametrize(
    "start", [at("2026-11-26 23:57"), at("2026-12-31 13:13"), at("2027-02-28 00:00")]
)
def test_every_span_gets_labels_that_fit_without_touching(start: datetime) -> None:
    for scale, grain in spans(start):
        ticks = time_ticks(scale, grain)
        labelled = [t for t in ticks if t.text]
        assert len(labelled) >= 2 or scale.end - scale.start < 2 * grain, (scale, grain)
        edges = [(round(t.left, 6), round(t.right, 6)) for t in labelled]
        assert all(left >= LABEL_LEFT and right <= WIDTH for left, right in edges), (scale, ticks)
        assert all(b.left - a.right >= LABEL_GAP for a, b in pairwise(labelled))
        assert [t.at for t in ticks] == sorted(t.at for t in ticks)
        assert all(scale.start <= t.at <= scale.end for t in ticks)
        assert labels_fit(ticks)


def test_a_label_is_estimated_no_narrower_than_dejavu_sans_draws_it() -> None:
    """DejaVu Sans' advance widths (em): digits 0.636, ':' 0.337, '-' 0.361, ' ' 0.318."""
    for text, em in (
        ("23:59", 4 * 0.636 + 0.337),
        ("12-31 23:59", 8 * 0.636 + 0.337 + 0.361 + 0.318),
    ):
        assert label_width(text) >= em * FONT_SIZE


def test_the_finest_step_that_fits_is_taken() -> None:
    """At each coarser step than the one taken, the labels would crowd: the steps between one
    minute and the step taken are all too fine for their labels."""
    scale = TimeScale(at("2026-11-26 00:00"), at("2026-11-26 06:00"))
    ticks = time_ticks(scale, MINUTE)
    taken = ticks[1].at - ticks[0].at
    finer = [s for s in TIME_STEPS if MINUTE <= s.duration < taken]
    assert taken == timedelta(hours=1) and len(finer) == 6
    for step in finer:
        room = scale.x(scale.start + step.duration) - scale.x(scale.start)
        assert label_width("00:00") + LABEL_GAP > room, step


def test_a_line_breaks_where_a_window_is_missing_or_has_no_figure() -> None:
    start = at("2026-11-26 09:00")
    values = {0: 1.0, 1: 2.0, 2: None, 3: 3.0, 4: 3.0, 7: 1.0, 8: 2.0, 10: 5.0}
    points = [Point(start + MINUTE * m, value) for m, value in values.items()]
    svg = line_chart({"treatment": points}, title="t", grain=MINUTE)
    lines = re.findall(r'<polyline class="line series-treatment" points="([^"]+)"', svg)
    assert [len(line.split()) for line in lines] == [2, 2, 2]  # 0-1, 3-4, 7-8
    assert len(re.findall(r'<circle class="dot series-treatment"', svg)) == 1  # minute 10


def test_a_series_has_one_class_for_its_colour_and_lines_are_marked_as_lines() -> None:
    svg = line_chart(
        {"treatment": [Point(at("2026-11-26 09:00"), 1.0), Point(at("2026-11-26 09:01"), 2.0)]},
        title="t",
        grain=MINUTE,
    )
    assert re.findall(r'<(\w+) class="([^"]*series-treatment[^"]*)"', svg) == [
        ("polyline", "line series-treatment"),
        ("line", "swatch series-treatment"),
        ("text", "legend series-treatment"),
    ]


INTERVALS = [(4.25, (-1.5, 10.0)), (312.5, (-120.25, 745.5)), (-0.5, (-0.75, -0.25)),
             (1200.0, (1100.0, 1300.0)), (0.0, (0.0, 0.0)), (2.0, (1.0, 3.0)),
             (-2.0, (-3.0, -1.0)), (0.3, (0.02, 0.6)), (20.0, (19.0, 21.0)),
             (-1200.0, (-1300.0, -1100.0)), (0.001, (0.0005, 0.002))]  # fmt: skip
"""Intervals across 0, clear of it on either side, narrow, wide and near 0."""


def _interval_labels(svg: str) -> list[tuple[float, float, str]]:
    """Each end label's left and right edge (by ``label_width``) and its text."""
    found = re.findall(r'<text class="axis" x="([-\d.]+)" [^>]*text-anchor="(\w+)">([^<]+)<', svg)
    edges = []
    for x, anchor, text in found:
        left = float(x) - (label_width(text) if anchor == "end" else 0.0)
        edges.append((left, left + label_width(text), text))
    return edges


@pytest.mark.parametrize(("difference", "ci"), INTERVALS)
def test_an_intervals_end_labels_stay_whole(difference: float, ci: tuple[float, float]) -> None:
    svg = str(interval_chart(difference, ci, title="t", unit=" ms"))
    for left, right, text in _interval_labels(svg):
        assert left >= 0 and right <= WIDTH, (left, right, text)


@pytest.mark.parametrize(("difference", "ci"), INTERVALS)
def test_the_zero_line_runs_through_no_label(difference: float, ci: tuple[float, float]) -> None:
    svg = str(interval_chart(difference, ci, title="t", unit=" pp"))
    zero = float(re.search(r'<line class="zero" x1="([-\d.]+)"', svg).group(1))
    for left, right, text in _interval_labels(svg):
        assert not left - 2 < zero < right + 2, (zero, left, right, text)
