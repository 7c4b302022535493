"""Metering: evaluations per organization per UTC month, never past the hard threshold."""

from __future__ import annotations

import time
from typing import Protocol


def month_of(timestamp: float) -> int:
    """The UTC calendar month of a Unix time, as ``YYYYMM``."""
    tm = time.gmtime(timestamp)
    return tm.tm_year * 100 + tm.tm_mon


def previous_month(month: int) -> int:
    """The ``YYYYMM`` before ``month``."""
    year, number = divmod(month, 100)
    return month - 1 if number > 1 else (year - 1) * 100 + 12


def month_label(month: int) -> str:
    """``YYYYMM`` as the admin API's ``"YYYY-MM"``."""
    return f"{month // 100:04d}-{month % 100:02d}"


def seconds_until_next_month(timestamp: float) -> int:
    """Whole seconds (rounded up) until the next UTC month starts: OFREP's Retry-After."""
    tm = time.gmtime(timestamp)
    year, month = (tm.tm_year + 1, 1) if tm.tm_mon == 12 else (tm.tm_year, tm.tm_mon + 1)
    import calendar

    start = calendar.timegm((year, month, 1, 0, 0, 0))
    return max(1, int(-(-(start - timestamp) // 1)))


class MeterUnavailable(RuntimeError):
    """The meter cannot record a change now (its database is unreachable): nothing changed."""


class Meter(Protocol):
    """A shared counter per (organization, month), exact across every worker."""

    def consume(self, organization_id: str, month: int, requested: int, hard_limit: int) -> int:
        """Count up to ``requested`` evaluations, never passing ``hard_limit``; return how many
        were granted (``0`` means the organization is blocked)."""

    def refund(self, organization_id: str, month: int, count: int) -> None:
        """Take back ``count`` evaluations granted and never served (a local SDK's unspent
        grant); the count never goes below zero. Raises ``MeterUnavailable`` when it cannot
        be recorded now, so the caller can refuse the give-back rather than drop it."""

    def usage(self, organization_id: str, month: int, *, exact: bool = False) -> int:
        """Evaluations counted so far in ``month``. While the count cannot be read (its
        database unreachable) a meter may answer the last figure it saw; with ``exact`` it
        raises ``MeterUnavailable`` instead: a usage read must not pass an old figure off as
        the count (the quota headers of an evaluate answer may)."""

    def close(self) -> None: ...
