"""Tracked events (``POST /v1/track``, contract 13): what users did, for the metrics release
health compares between a flag's arms.

``FlagsightClient.track`` queues them and a ``TrackBatcher`` sends them, 500 a request, as
feedback is sent. Each event carries the SDK's clock as its ``at``, so an event delayed by
batching or retries keeps the time it happened. An event the service would refuse would refuse
its whole batch, so ``track_item`` checks it here first: a bad name or user is logged and not
queued; a value that is not a finite number is logged and sent as none.
"""

from __future__ import annotations

import logging
import math
import re
from datetime import UTC, datetime

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
    at = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    item: dict[str, object] = {"name": name, "userIdentifier": user, "at": at}
    if value is not None:
        item["value"] = float(value)  # type: ignore[arg-type]
    return item


def _finite(value: object) -> bool:
    """A number the service takes: not a bool (an int to Python), finite as a double."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a double
        return False
