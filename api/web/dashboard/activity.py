"""How much and how recently each flag of an environment was evaluated, for the flags list:
evaluations over the last 30 UTC dates and the day of the latest, from the warehouse
(``warehouse.read.flag_activity``), so a flag nobody evaluates can be seen.

The figures are the pipeline's last publication, at the granularity of a day. Without a
warehouse (no pipeline run yet) or with a file that cannot be read, the list still works and
says why the figures are missing: reading them never raises for the file.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Literal

from warehouse.read import WarehouseUnreadable, flag_activity

log = logging.getLogger("flagsight.dashboard")

ACTIVITY_DAYS = 30
"""The flags list counts evaluations of the last this many UTC dates, today included."""


@dataclass(frozen=True)
class FlagUse:
    """How much and how recently one flag was evaluated, as the list shows it."""

    evaluations: int
    last_date: str | None  # YYYY-MM-DD, None when never evaluated
    last_text: str

    @property
    def quiet(self) -> bool:
        """No evaluation in the list's window (its "last evaluated" is shown as a warning;
        whether the flag is stale is its lifecycle's to say)."""
        return self.evaluations == 0


@dataclass(frozen=True)
class Activity:
    """The warehouse's figures for an environment's flags: ``state`` is ``ready``,
    ``missing`` (no pipeline run yet) or ``unavailable`` (the file could not be read)."""

    state: Literal["ready", "missing", "unavailable"]
    published_at: str | None = None
    flags: dict[str, dict[str, Any]] = field(default_factory=dict)
    today: date = date(1970, 1, 1)

    def of(self, flag_key: str) -> FlagUse | None:
        """The flag's figures; None when the warehouse has none to give."""
        if self.state != "ready":
            return None
        seen = self.flags.get(flag_key)
        if seen is None:
            return FlagUse(0, None, "never")
        last = seen["last_evaluation_date"]
        return FlagUse(
            seen["evaluations_since"], last, days_ago(date.fromisoformat(last), self.today)
        )


def days_ago(day: date, today: date) -> str:
    """``today``, ``yesterday``, ``12 days ago``; a date ahead of ``today`` as itself."""
    days = (today - day).days
    if days < 0:
        return day.isoformat()
    return {0: "today", 1: "yesterday"}.get(days, f"{days} days ago")


def read_activity(warehouse_path: Path, environment_id: str, today: date) -> Activity:
    """``flag_activity`` over the last ``ACTIVITY_DAYS`` dates; never raises for the file."""
    try:
        found = flag_activity(warehouse_path, environment_id, today - timedelta(ACTIVITY_DAYS - 1))
    except WarehouseUnreadable:
        log.warning("warehouse unreadable for the flags list", exc_info=True,
                    extra={"path": str(warehouse_path)})  # fmt: skip
        return Activity("unavailable", today=today)
    if found is None:
        return Activity("missing", today=today)
    return Activity("ready", found["published_at"], found["flags"], today)
