"""Small server-rendered SVG charts: daily columns, series over time as lines, intervals.

Why drawn here rather than by a charting library: every dashboard page works without
JavaScript, shows a table of the same figures beside each chart, and is served under a CSP that
allows styles and scripts only from our own static files (``rendering.py``). The client-side
libraries would make the charts JavaScript-only (uPlot draws on a canvas; Observable Plot needs
JavaScript and d3), and the Python SVG libraries write what that CSP blocks (matplotlib a
``<style>`` element and a ``style`` attribute on every path; pygal a ``<style>`` element and,
by default, scripts from its CDN). What is drawn here is small enough to prove instead:
``tests/dashboard/test_charts.py`` checks the axis arithmetic, ``test_chart_browser.py`` the
drawing in Chromium at 1366 and 390 px (lines unfilled, no two labels overlapping).

The markup uses presentation attributes and CSS classes only (no inline ``style``). A series'
class sets only its colour (``--series`` in ``dashboard.css``); each mark says how it uses it,
so a line is never filled. Each chart has a ``<title>``/``<desc>`` for assistive technology.

Geometry: a fixed viewBox of ``WIDTH`` × ``HEIGHT`` user units that the page scales to its
width. Text is sized in user units too (``FONT_SIZE``, the size ``dashboard.css`` gives chart
text), so it scales with the chart and labels that fit the viewBox fit at every width. Time is
linear across the plot (a missing window leaves a gap) and labelled at round times:
``time_ticks`` takes the finest step of ``TIME_STEPS`` whose labels, at a generous estimate of
their width (``label_width``), fit side by side. Labels are as short as the span allows
(``HH:MM`` within a day); the full date and time is in the titles, the description and the
page's tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape
from itertools import pairwise

from markupsafe import Markup

WIDTH = 640
HEIGHT = 200
MARGIN_LEFT = 84
MARGIN_RIGHT = 12
MARGIN_TOP = 32
MARGIN_BOTTOM = 40
PLOT_LEFT, PLOT_RIGHT = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
PLOT_TOP, PLOT_BOTTOM = MARGIN_TOP, HEIGHT - MARGIN_BOTTOM

FONT_SIZE = 22
"""User units; ``dashboard.css`` sets chart text to this size."""
CHAR_WIDTH = 0.64 * FONT_SIZE
"""A generous width of a label's digit or lower-case letter: a digit of DejaVu Sans (Debian's
default sans serif, wider than most) is 0.636 em."""
EM_WIDTHS = {
    **{c: 0.4 for c in " :-.,"},  # DejaVu Sans: 0.32 to 0.36 em
    **{c: 1.0 for c in "mwMW%"},  # up to 0.97 em
    **{c: 0.8 for c in "ABCDEFGHIJKLNOPQRSTUVXYZ"},  # up to 0.79 em
}
"""Characters much narrower or wider than ``CHAR_WIDTH``, in em."""
LABEL_GAP = FONT_SIZE / 2
"""The least space between two labels of an axis."""
LABEL_LEFT = MARGIN_LEFT - 2
"""Time labels start right of this: the value axis' labels end at ``MARGIN_LEFT - 6``."""
LABEL_Y = PLOT_BOTTOM + 26
TICK_LENGTH = 6


@dataclass(frozen=True)
class Point:
    """One window of a series: when it starts (UTC) and its value (None: no figure)."""

    at: datetime
    value: float | None


@dataclass(frozen=True)
class Step:
    """A time axis' step: a fixed duration (ticks at its multiples since a Monday, 00:00 UTC)
    or a number of calendar months (ticks on the first of a month)."""

    duration: timedelta = timedelta(0)
    months: int = 0


TIME_STEPS = (
    *(Step(timedelta(minutes=m)) for m in (1, 2, 5, 10, 15, 30)),
    *(Step(timedelta(hours=h)) for h in (1, 2, 3, 6, 12)),
    *(Step(timedelta(days=d)) for d in (1, 2, 7, 14)),
    *(Step(months=m) for m in (1, 2, 3, 6, 12, 24, 60, 120)),
)
"""The steps a time axis may take, finest first."""
_MONDAY = datetime(1970, 1, 5, tzinfo=UTC)


@dataclass(frozen=True)
class TimeScale:
    """Times from ``start`` to ``end`` (UTC) across the plot, left to right."""

    start: datetime
    end: datetime

    def x(self, at: datetime) -> float:
        return PLOT_LEFT + (at - self.start) / (self.end - self.start) * (PLOT_RIGHT - PLOT_LEFT)


@dataclass(frozen=True)
class Tick:
    """A time marked on an axis: its place, its label (none: ``""``) and the label's centre,
    moved inward at the chart's edges so that the label stays whole."""

    at: datetime
    x: float
    text: str
    label_x: float

    @property
    def left(self) -> float:
        return self.label_x - label_width(self.text) / 2

    @property
    def right(self) -> float:
        return self.label_x + label_width(self.text) / 2


def label_width(text: str) -> float:
    """A generous estimate of a label's width in user units."""
    return sum(EM_WIDTHS[c] * FONT_SIZE if c in EM_WIDTHS else CHAR_WIDTH for c in text)


def step_times(step: Step, start: datetime, end: datetime) -> list[datetime]:
    """The times from ``start`` to ``end`` (both included) that fall on ``step``."""
    if step.months:
        month = start.year * 12 + start.month - 1
        if datetime(month // 12, month % 12 + 1, 1, tzinfo=UTC) < start:
            month += 1
        month += -month % step.months
        times = []
        while (at := datetime(month // 12, month % 12 + 1, 1, tzinfo=UTC)) <= end:
            times.append(at)
            month += step.months
        return times
    first = _MONDAY - ((_MONDAY - start) // step.duration) * step.duration
    count = (end - first) // step.duration + 1 if first <= end else 0
    return [first + n * step.duration for n in range(count)]


def label_format(step: Step, start: datetime, end: datetime) -> str:
    """The ``strftime`` format of a time axis' labels: as short as the span allows."""
    if step.months:
        return "%Y-%m"
    if step.duration < timedelta(days=1):
        return "%H:%M" if start.date() == end.date() else "%m-%d %H:%M"
    return "%m-%d" if start.year == end.year else "%Y-%m-%d"


def time_ticks(scale: TimeScale, grain: timedelta, offset: timedelta = timedelta(0)) -> list[Tick]:
    """The ticks of a time axis: those of the finest step in ``TIME_STEPS``, no finer than the
    series' ``grain``, whose labels fit between the chart's edges side by side. ``offset``
    places each tick that far after its time (a day's at its column's middle). When no step
    fits (a span of centuries), only the first tick."""
    coarsest: list[Tick] = []
    for step in TIME_STEPS:
        if not step.months and step.duration < grain:
            continue
        fmt = label_format(step, scale.start, scale.end)
        ticks = [
            _tick(at, scale.x(at + offset), at.strftime(fmt))
            for at in step_times(step, scale.start, scale.end)
            if at + offset <= scale.end
        ]
        coarsest = ticks[:1] or coarsest
        ticks = _clear_ends(ticks)
        if any(t.text for t in ticks) and labels_fit(ticks):
            return ticks
    return coarsest


def _tick(at: datetime, x: float, text: str) -> Tick:
    half = label_width(text) / 2
    return Tick(at, x, text, min(max(x, LABEL_LEFT + half), WIDTH - half))


def _clear_ends(ticks: list[Tick]) -> list[Tick]:
    """The ticks without the label of an end tick that, moved inward to stay whole, would
    come too close to its neighbour's (the step may suit the rest)."""
    if len(ticks) > 1 and ticks[0].label_x != ticks[0].x and _too_close(ticks[0], ticks[1]):
        ticks[0] = Tick(ticks[0].at, ticks[0].x, "", ticks[0].x)
    if len(ticks) > 1 and ticks[-1].label_x != ticks[-1].x and _too_close(ticks[-2], ticks[-1]):
        ticks[-1] = Tick(ticks[-1].at, ticks[-1].x, "", ticks[-1].x)
    return ticks


def _too_close(a: Tick, b: Tick) -> bool:
    return bool(a.text and b.text) and b.left - a.right < LABEL_GAP


_EPSILON = 1e-6
"""Rounding: a label moved inward to the edge ends there, give or take this."""


def labels_fit(ticks: Sequence[Tick]) -> bool:
    """Whether the labels lie within the chart, at least ``LABEL_GAP`` apart."""
    labelled = [t for t in ticks if t.text]
    inside = all(t.left >= LABEL_LEFT - _EPSILON and t.right <= WIDTH + _EPSILON for t in labelled)
    return inside and all(b.left - a.right >= LABEL_GAP for a, b in pairwise(labelled))


def full_time(at: datetime, grain: timedelta) -> str:
    """A time as titles, descriptions and tables show it: the date, and within a day the
    minute."""
    return at.strftime("%Y-%m-%d" if grain >= timedelta(days=1) else "%Y-%m-%d %H:%M")


def _nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1) if value >= 1 else 1
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def _figure(value: float, unit: str) -> str:
    """A value as titles and descriptions show it."""
    text = f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"
    return f"{text}{unit}"


def _axis_value(value: float, unit: str) -> str:
    """A value axis' label, short enough for the margin: 250k, 2.5M."""
    for least, size, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if value >= least:
            return f"{value / size:g}{suffix}{unit}"
    return _figure(value, unit)


def column_chart(
    points: Sequence[Point],
    *,
    title: str,
    unit: str = "",
    y_max: float | None = None,
    guide: float | None = None,
    guide_label: str = "",
) -> Markup:
    """An SVG column chart of daily ``points`` (each at its day's 00:00 UTC), a column a day
    with room for the days without a figure; ``guide`` draws a dashed horizontal line
    (e.g. 80 %)."""
    day = timedelta(days=1)
    values = [p.value for p in points if p.value is not None]
    top = y_max if y_max is not None else _nice_ceiling(max(values, default=0.0))
    first = min((p.at for p in points), default=datetime(1970, 1, 1, tzinfo=UTC))
    last = max((p.at for p in points), default=first)
    scale = TimeScale(first, last + day)
    slot = scale.x(first + day) - scale.x(first)
    bar_w = max(min(slot * 0.7, 48.0), 1.0)
    parts = _frame(title, _describe(points, unit, day), top, unit)
    for point in points:
        if point.value is not None:
            x, y = scale.x(point.at) + (slot - bar_w) / 2, _y(point.value, top)
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" '
                f'height="{PLOT_BOTTOM - y:.1f}"><title>{full_time(point.at, day)}: '
                f"{escape(_figure(point.value, unit))}</title></rect>"
            )
    parts += _time_axis(time_ticks(scale, day, day / 2))
    if guide is not None and guide <= top:
        y = _y(guide, top)
        parts.append(
            f'<line class="guide" x1="{PLOT_LEFT}" x2="{PLOT_RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="guide-label" x="{PLOT_RIGHT}" y="{y - 4:.1f}" '
            f'text-anchor="end">{escape(guide_label)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _y(value: float, top: float) -> float:
    return PLOT_BOTTOM - (min(value, top) / top) * (PLOT_BOTTOM - PLOT_TOP)


def _frame(title: str, description: str, top: float, unit: str) -> list[str]:
    """The opening of a chart's SVG: its title, description and the grid lines at 0, half
    and ``top`` with their labels."""
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="{_id(title)}-t {_id(title)}-d" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{_id(title)}-t">{escape(title)}</title>',
        f'<desc id="{_id(title)}-d">{escape(description)}</desc>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = _y(top * fraction, top)
        parts.append(
            f'<line class="grid" x1="{PLOT_LEFT}" x2="{PLOT_RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(_axis_value(top * fraction, unit))}</text>"
        )
    return parts


def _time_axis(ticks: Sequence[Tick]) -> list[str]:
    """A tick mark under the plot at each tick, and its label."""
    parts = []
    for t in ticks:
        parts.append(
            f'<line class="tick" x1="{t.x:.1f}" x2="{t.x:.1f}" y1="{PLOT_BOTTOM}" '
            f'y2="{PLOT_BOTTOM + TICK_LENGTH}"/>'
        )
        if t.text:
            parts.append(
                f'<text class="axis" x="{t.label_x:.1f}" y="{LABEL_Y}" text-anchor="middle">'
                f"{escape(t.text)}</text>"
            )
    return parts


def _id(title: str) -> str:
    return "chart-" + "".join(c if c.isalnum() else "-" for c in title.lower())


GRAIN_NAMES = {timedelta(minutes=1): "minutes", timedelta(hours=1): "hours"}


def _describe(points: Sequence[Point], unit: str, grain: timedelta) -> str:
    if not points:
        return "No data."
    figures = ", ".join(
        f"{full_time(p.at, grain)}: {'no figure' if p.value is None else _figure(p.value, unit)}"
        for p in points
    )
    return f"{len(points)} {GRAIN_NAMES.get(grain, 'days')}. {figures}."


ARM_CLASSES = {"treatment": "series-treatment", "control": "series-control"}
LEGEND_CHAR_WIDTH = 0.72 * FONT_SIZE
"""A generous width of one bold legend character."""


def line_chart(
    series: dict[str, Sequence[Point]],
    *,
    title: str,
    grain: timedelta,
    unit: str = "",
    y_max: float | None = None,
    markers: dict[datetime, str] | None = None,
) -> Markup:
    """An SVG chart of several series over time (e.g. treatment and control per minute), a
    line and a legend entry each. The line breaks where a window has no figure or is missing
    (windows more than ``grain`` apart); a window alone is a dot. ``markers`` draws a dashed
    vertical line at each time it names within the chart, titled with its text (a change of
    the flag)."""
    times = sorted({p.at for points in series.values() for p in points})
    first = times[0] if times else datetime(1970, 1, 1, tzinfo=UTC)
    last = times[-1] if times else first
    scale = TimeScale(first, last) if last > first else TimeScale(first - grain, first + grain)
    values = [p.value for points in series.values() for p in points if p.value is not None]
    top = y_max if y_max is not None else _nice_ceiling(max(values, default=0.0))
    described = "; ".join(
        f"{name}: {_describe(points, unit, grain)}" for name, points in series.items()
    )
    parts = _frame(title, described, top, unit)
    legend_x = PLOT_LEFT + 8.0
    for name, points in series.items():
        css = ARM_CLASSES.get(name, "series")
        for run in _runs(points, grain):
            xy = [f"{scale.x(p.at):.1f},{_y(p.value or 0.0, top):.1f}" for p in run]
            if len(xy) > 1:
                parts.append(f'<polyline class="line {css}" points="{" ".join(xy)}"/>')
            else:
                x, y = xy[0].split(",")
                parts.append(f'<circle class="dot {css}" cx="{x}" cy="{y}" r="4"/>')
        parts.append(
            f'<line class="swatch {css}" x1="{legend_x:.1f}" x2="{legend_x + 24:.1f}" '
            f'y1="15" y2="15"/><text class="legend {css}" x="{legend_x + 32:.1f}" y="23">'
            f"{escape(name)}</text>"
        )
        legend_x += 32 + len(name) * LEGEND_CHAR_WIDTH + 2 * FONT_SIZE
    for at, text in sorted((markers or {}).items()):
        if scale.start <= at <= scale.end:
            x = scale.x(at)
            parts.append(
                f'<line class="marker" x1="{x:.1f}" x2="{x:.1f}" y1="{PLOT_TOP}" '
                f'y2="{PLOT_BOTTOM}"><title>{full_time(at, grain)}: {escape(text)}</title>'
                "</line>"
            )
    parts += _time_axis(time_ticks(scale, grain))
    parts.append("</svg>")
    return Markup("".join(parts))


def _runs(points: Sequence[Point], grain: timedelta) -> list[list[Point]]:
    """The stretches of consecutive windows with a figure, in time order."""
    runs: list[list[Point]] = []
    previous: Point | None = None
    for point in sorted(points, key=lambda p: p.at):
        if point.value is not None:
            if previous and previous.value is not None and point.at - previous.at <= grain:
                runs[-1].append(point)
            else:
                runs.append([point])
        previous = point
    return runs


INTERVAL_HEIGHT = 70
INTERVAL_LABEL_PAD = 10
INTERVAL_MID = 35
"""Where the bar is drawn, and its end labels beside it."""
INTERVAL_MID_UNDER_LABEL = 44
"""Where the bar is drawn when a label stands above it (``INTERVAL_LABEL_ABOVE``)."""
INTERVAL_LABEL_ABOVE = 22
"""The baseline of an end label lifted above the bar: clear of the dot and of the labels
beside the bar lowered to ``INTERVAL_MID_UNDER_LABEL``."""


@dataclass(frozen=True)
class EndLabel:
    """An interval end's label: where it is anchored, which way it runs, and whether it
    stands above the bar rather than beside it."""

    x: float
    anchor: str
    text: str
    above: bool = False


def interval_chart(
    difference: float | None,
    ci: Sequence[float] | None,
    *,
    title: str,
    unit: str,
    decision: str | None = None,
) -> Markup:
    """The confidence interval of a difference as a bar around its estimate, with 0 marked:
    an interval clear of 0 is a decision, one across 0 is not (yet). The bar takes the colour
    of ``decision`` (a regression's, an improvement's), whichever side of 0 is worse for the
    metric: a coverage that falls is a regression below 0."""
    if difference is None or ci is None:
        return Markup("")
    low, high = ci
    low_text, high_text = _signed(low, unit), _signed(high, unit)
    half = WIDTH / 2 - MARGIN_RIGHT

    # The labels beside the interval's ends stay whole: |value| / reach * half, the end's
    # distance from the middle, leaves room for its label before the chart's edge (and one
    # user unit for rounding).
    def room(text: str) -> float:
        return WIDTH / 2 - INTERVAL_LABEL_PAD - label_width(text) - 1

    reach = (
        max(
            max(abs(low), abs(high), abs(difference)) * 1.6,
            max(high, 0.0) * half / room(high_text),
            max(-low, 0.0) * half / room(low_text),
        )
        or 1.0
    )

    def x_of(value: float) -> float:
        return WIDTH / 2 + value / reach * half

    labels = _end_labels(x_of(low), x_of(high), x_of(0), low_text, high_text)
    mid = INTERVAL_MID_UNDER_LABEL if any(label.above for label in labels) else INTERVAL_MID
    side = "above" if low > 0 else "below" if high < 0 else "across"
    verdict = f" interval-{decision}" if decision else ""
    desc = f"Difference {_signed(difference, unit)}, interval {_signed(low, unit)} to {_signed(high, unit)}."
    return Markup(
        f'<svg class="chart interval interval-{side}{verdict}" viewBox="0 0 {WIDTH} {INTERVAL_HEIGHT}" '
        f'role="img" aria-labelledby="{_id(title)}-t {_id(title)}-d" '
        'xmlns="http://www.w3.org/2000/svg">'
        f'<title id="{_id(title)}-t">{escape(title)}</title>'
        f'<desc id="{_id(title)}-d">{escape(desc)}</desc>'
        f'<line class="zero" x1="{x_of(0):.1f}" x2="{x_of(0):.1f}" y1="6" y2="{INTERVAL_HEIGHT - 6}"/>'
        f'<line class="ci" x1="{x_of(low):.1f}" x2="{x_of(high):.1f}" y1="{mid}" y2="{mid}"/>'
        f'<circle class="estimate" cx="{x_of(difference):.1f}" cy="{mid}" r="7"/>'
        + "".join(
            f'<text class="axis" x="{label.x:.1f}" '
            f'y="{INTERVAL_LABEL_ABOVE if label.above else mid + 7}" '
            f'text-anchor="{label.anchor}">{escape(label.text)}</text>'
            for label in labels
        )
        + "</svg>"
    )


def _end_labels(
    low: float, high: float, zero: float, low_text: str, high_text: str
) -> tuple[EndLabel, EndLabel]:
    """The labels of an interval drawn from ``low`` to ``high`` with 0 at ``zero`` (x in user
    units): each beside its end, outside the bar. An interval clear of 0 has one end facing
    the zero line; when its label does not fit between that end and the line, it stands above
    the bar, from its end inwards, so the line runs through no label."""
    pad = INTERVAL_LABEL_PAD
    low_label = EndLabel(low - pad, "end", low_text)
    high_label = EndLabel(high + pad, "start", high_text)
    if low > zero and low - pad - label_width(low_text) < zero + pad:
        low_label = EndLabel(max(low, zero + pad), "start", low_text, above=True)
    if high < zero and high + pad + label_width(high_text) > zero - pad:
        high_label = EndLabel(min(high, zero - pad), "end", high_text, above=True)
    return low_label, high_label


def _signed(value: float, unit: str) -> str:
    return f"{value:+.2f}{unit}"
