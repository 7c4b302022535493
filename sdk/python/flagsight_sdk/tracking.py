"""Tracked events (``POST /v1/track``, contract 13): what users did, for the metrics release
health compares between a flag's arms.

``FlagsightClient.track`` queues them and a ``TrackBatcher`` sends them, 500 a request, as
feedback is sent. Each event carries the SDK's clock as its ``at``, so an event delayed by
batching or retries keeps the time it happened. The service refuses an ``at`` more than five
minutes ahead of its own clock, with the whole batch: so the batcher reads the service's clock
from each answer's ``Date`` and, while the two differ by a minute or more, sends each ``at``
moved by the difference (``clock_skew``, ``shifted``); a batch refused before the difference
was known is sent once more, moved. An event the service would refuse would refuse
its whole batch, so ``track_item`` checks it here first: a bad name or user is logged and not
queued; a value that is not a finite number is logged and sent as none.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

log = logging.getLogger("flagsight_sdk")

EVENT_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
"""``flagsight_core.contract.KEY_PATTERN``, written again: the remote client imports without
the core (``tests/sdk/test_contract_copies.py`` holds them equal)."""
USER_IDENTIFIER_MAX = 1024
TRACK_SOURCE_HEADER = "Flagsight-Source"
"""The header that tells the service who sends the events (their ``source`` in the lake)."""
SOURCE_SDK = "sdk"
SOURCE_PROVIDER = "provider"


def track_item(name: object, user: object, value: object) -> dict[str, object] | None:
    """The TrackEvent to send, timed now; None (logged) when the service would refuse it."""
    if not isinstance(name, str) or EVENT_NAME.fullmatch(name) is None:
        log.warning(
            "flagsight: track(%r) not sent: the name must be 1 to 128 letters, digits, "
            "'.', '_' or '-'",
            name,
        )
        return None
    if not isinstance(user, str) or not 0 < len(user) <= USER_IDENTIFIER_MAX:
        log.warning(
            "flagsight: track(%r) not sent: the user must be a string of 1 to %d characters",
            name,
            USER_IDENTIFIER_MAX,
        )
        return None
    if value is not None and not _finite(value):
        log.warning(
            "flagsight: track(%r): value %r is not a finite number; sent as none", name, value
        )
        value = None
    at = _iso(datetime.fromtimestamp(wall_clock(), UTC))
    item: dict[str, object] = {"name": name, "userIdentifier": user, "at": at}
    if value is not None:
        item["value"] = float(value)  # type: ignore[arg-type]
    return item


wall_clock = time.time
"""This process's clock, in Unix seconds: an event's ``at``, and what ``clock_skew`` compares
the service's with (one function, so a test can move both)."""

CLOCK_TOLERANCE_S = 60.0
"""A difference between the two clocks below this is left alone: ``Date`` has whole seconds,
and the service takes an ``at`` up to five minutes ahead."""


def clock_skew(headers: Mapping[str, str]) -> float | None:
    """The service's clock minus this process's, in seconds, from an answer's ``Date``; None
    without one (or one that is not a date)."""
    date = next((value for key, value in headers.items() if key.lower() == "date"), None)
    if date is None:
        return None
    try:
        return parsedate_to_datetime(date).timestamp() - wall_clock()
    except (TypeError, ValueError, IndexError):
        return None


def shifted(item: dict[str, object], skew_s: float) -> dict[str, object]:
    """The event with its ``at`` moved by ``skew_s`` seconds (to the service's clock)."""
    at = datetime.fromisoformat(str(item["at"]).replace("Z", "+00:00"))
    return {**item, "at": _iso(at + timedelta(seconds=skew_s))}


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _finite(value: object) -> bool:
    """A number the service takes: not a bool (an int to Python), finite as a double."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a double
        return False
