"""Template filters: how figures read on a page (a missing figure is an em dash, not 0)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flagsight_core.words import counted

from api.controlplane.changes import step_of
from api.controlplane.webhook_targets import shown_url

MISSING = "—"


def number(value: Any) -> str:
    """``12345`` → ``12,345``."""
    if value is None:
        return MISSING
    return f"{int(value):,}"


def percent(value: Any, digits: int = 1) -> str:
    """A 0..100 rate with one decimal: ``83.3 %``."""
    if value is None:
        return MISSING
    return f"{float(value):.{digits}f} %"


def milliseconds(value: Any) -> str:
    if value is None:
        return MISSING
    return f"{float(value):,.1f} ms"


def utc_time(value: Any) -> str:
    """An ISO 8601 time (or unix seconds) as ``2024-05-01 12:00:03 UTC``; unparseable text is
    shown as given."""
    if not value:
        return MISSING
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return str(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


FILTERS = {
    "number": number,
    "counted": counted,  # {{ n | counted("user") }}: 1 user, 2 users
    "percent": percent,
    "ms": milliseconds,
    "utc": utc_time,
    "step_of": step_of,  # step {{ rollout.step | step_of(steps) }}: step 1 of 4 (10 %)
    "webhook_url": shown_url,  # user information masked (a webhook stored before the rule)
}
