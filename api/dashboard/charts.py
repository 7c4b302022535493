"""Small server-rendered SVG charts: daily series as columns, with an optional guide line.

Server-rendered so pages need no JavaScript and no charting library; the markup uses
presentation attributes and CSS classes only (no inline ``style``), which the dashboard's CSP
allows. Each chart has a ``<title>``/``<desc>`` for assistive technology, and the page shows
the same figures in a table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

WIDTH = 640
HEIGHT = 200
MARGIN_LEFT = 84
MARGIN_RIGHT = 12
MARGIN_TOP = 28
MARGIN_BOTTOM = 40


@dataclass(frozen=True)
class Point:
    """One day: its label (``YYYY-MM-DD``) and value (None: no figure that day)."""

    label: str
    value: float | None


def _nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1) if value >= 1 else 1
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def _tick(value: float, unit: str) -> str:
    text = f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"
    return f"{text}{unit}"


def column_chart(
    points: Sequence[Point],
    *,
    title: str,
    unit: str = "",
    y_max: float | None = None,
    guide: float | None = None,
    guide_label: str = "",
) -> Markup:
    """An SVG column chart of ``points``; ``guide`` draws a dashed horizontal line (e.g. 80 %)."""
    values = [p.value for p in points if p.value is not None]
    top = y_max if y_max is not None else _nice_ceiling(max(values, default=0.0))
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def y_of(value: float) -> float:
        return MARGIN_TOP + plot_h - (min(value, top) / top) * plot_h

    parts = _frame(title, _describe(points, unit), top, unit)
    slot = plot_w / max(len(points), 1)
    bar_w = max(min(slot * 0.7, 48.0), 2.0)
    label_every = max(1, len(points) // 5)
    for index, point in enumerate(points):
        x = MARGIN_LEFT + slot * index + (slot - bar_w) / 2
        if point.value is not None:
            y = y_of(point.value)
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" '
                f'height="{MARGIN_TOP + plot_h - y:.1f}"><title>{escape(point.label)}: '
                f"{escape(_tick(point.value, unit))}</title></rect>"
            )
        if index % label_every == 0:
            parts.append(
                f'<text class="axis" x="{x + bar_w / 2:.1f}" y="{HEIGHT - MARGIN_BOTTOM + 26}" '
                f'text-anchor="middle">{escape(point.label[5:] or point.label)}</text>'
            )
    if guide is not None and guide <= top:
        y = y_of(guide)
        parts.append(
            f'<line class="guide" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" '
            f'y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="guide-label" x="{WIDTH - MARGIN_RIGHT}" y="{y - 4:.1f}" '
            f'text-anchor="end">{escape(guide_label)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _frame(title: str, description: str, top: float, unit: str) -> list[str]:
    """The opening of a chart's SVG: its title, description and the grid lines at 0, half
    and ``top`` with their ticks."""
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="{_id(title)}-t {_id(title)}-d" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{_id(title)}-t">{escape(title)}</title>',
        f'<desc id="{_id(title)}-d">{escape(description)}</desc>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = MARGIN_TOP + plot_h - fraction * plot_h
        parts.append(
            f'<line class="grid" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" '
            f'y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(_tick(top * fraction, unit))}</text>"
        )
    return parts


def _id(title: str) -> str:
    return "chart-" + "".join(c if c.isalnum() else "-" for c in title.lower())


def _describe(points: Sequence[Point], unit: str) -> str:
    if not points:
        return "No data."
    days = ", ".join(
        f"{p.label}: {'no figure' if p.value is None else _tick(p.value, unit)}" for p in points
    )
    return f"{len(points)} days. {days}."


ARM_CLASSES = {"treatment": "series-treatment", "control": "series-control"}


def line_chart(
    series: dict[str, Sequence[Point]],
    *,
    title: str,
    unit: str = "",
    y_max: float | None = None,
    markers: dict[str, str] | None = None,
) -> Markup:
    """An SVG chart of several series over the same labels (e.g. treatment and control per
    minute), one polyline and a legend entry each; a missing figure breaks the line.
    ``markers`` draws a dashed vertical line at each label it names, titled with its text
    (a change of the flag)."""
    labels = sorted({p.label for points in series.values() for p in points})
    position = {label: index for index, label in enumerate(labels)}
    values = [p.value for points in series.values() for p in points if p.value is not None]
    top = y_max if y_max is not None else _nice_ceiling(max(values, default=0.0))
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    step = plot_w / max(len(labels) - 1, 1)

    def xy(point: Point) -> str:
        x = MARGIN_LEFT + step * position[point.label]
        y = MARGIN_TOP + plot_h - (min(point.value or 0.0, top) / top) * plot_h
        return f"{x:.1f},{y:.1f}"

    described = "; ".join(f"{name}: {_describe(points, unit)}" for name, points in series.items())
    parts = _frame(title, described, top, unit)
    for index, (name, points) in enumerate(series.items()):
        css = ARM_CLASSES.get(name, "series")
        run: list[str] = []
        for point in [*sorted(points, key=lambda p: position[p.label]), Point("", None)]:
            if point.value is None:
                if len(run) > 1:
                    parts.append(f'<polyline class="line {css}" points="{" ".join(run)}"/>')
                elif run:
                    x, y = run[0].split(",")
                    parts.append(f'<circle class="dot {css}" cx="{x}" cy="{y}" r="3"/>')
                run = []
            else:
                run.append(xy(point))
        parts.append(
            f'<text class="legend {css}" x="{MARGIN_LEFT + 8 + index * 150}" y="18">'
            f"{escape(name)}</text>"
        )
    for label, text in (markers or {}).items():
        if label in position:
            x = MARGIN_LEFT + step * position[label]
            parts.append(
                f'<line class="marker" x1="{x:.1f}" x2="{x:.1f}" y1="{MARGIN_TOP}" '
                f'y2="{HEIGHT - MARGIN_BOTTOM}"><title>{escape(label)}: {escape(text)}</title>'
                "</line>"
            )
    label_every = max(1, len(labels) // 4)
    for index, label in enumerate(labels):
        if index % label_every == 0:
            # The first label starts at its point and the last ends there: centred, a
            # "YYYY-MM-DD HH:MM" at either edge of the plot ran out of the picture.
            anchor = "start" if index == 0 else "end" if index == len(labels) - 1 else "middle"
            parts.append(
                f'<text class="axis" x="{MARGIN_LEFT + step * index:.1f}" '
                f'y="{HEIGHT - MARGIN_BOTTOM + 26}" text-anchor="{anchor}">{escape(label)}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


INTERVAL_HEIGHT = 70


def interval_chart(
    difference: float | None, ci: Sequence[float] | None, *, title: str, unit: str
) -> Markup:
    """The confidence interval of a difference as a bar around its estimate, with 0 marked:
    an interval clear of 0 is a decision, one across 0 is not (yet)."""
    if difference is None or ci is None:
        return Markup("")
    low, high = ci
    reach = max(abs(low), abs(high), abs(difference)) * 1.6 or 1.0  # room for the labels
    plot_w = WIDTH - 2 * MARGIN_RIGHT

    def x_of(value: float) -> float:
        return MARGIN_RIGHT + (value + reach) / (2 * reach) * plot_w

    mid = INTERVAL_HEIGHT / 2
    side = "above" if low > 0 else "below" if high < 0 else "across"
    desc = f"Difference {_signed(difference, unit)}, interval {_signed(low, unit)} to {_signed(high, unit)}."
    return Markup(
        f'<svg class="chart interval interval-{side}" viewBox="0 0 {WIDTH} {INTERVAL_HEIGHT}" '
        f'role="img" aria-labelledby="{_id(title)}-t {_id(title)}-d" '
        'xmlns="http://www.w3.org/2000/svg">'
        f'<title id="{_id(title)}-t">{escape(title)}</title>'
        f'<desc id="{_id(title)}-d">{escape(desc)}</desc>'
        f'<line class="zero" x1="{x_of(0):.1f}" x2="{x_of(0):.1f}" y1="6" y2="{INTERVAL_HEIGHT - 6}"/>'
        f'<line class="ci" x1="{x_of(low):.1f}" x2="{x_of(high):.1f}" y1="{mid}" y2="{mid}"/>'
        f'<circle class="estimate" cx="{x_of(difference):.1f}" cy="{mid}" r="7"/>'
        f'<text class="axis" x="{x_of(low) - 10:.1f}" y="{mid + 7}" text-anchor="end">'
        f"{escape(_signed(low, unit))}</text>"
        f'<text class="axis" x="{x_of(high) + 10:.1f}" y="{mid + 7}" text-anchor="start">'
        f"{escape(_signed(high, unit))}</text>"
        "</svg>"
    )


def _signed(value: float, unit: str) -> str:
    return f"{value:+.2f}{unit}"
