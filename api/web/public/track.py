"""``POST /v1/track`` (contract 13): what users did, for the metrics release health compares.

Order of checks, as feedback's: the key (401), the environment's insights switch (403), the
client's ``Flagsight-Source`` header (400), the body (415, 413, 400). The request is validated
whole: one bad event refuses it all, naming every bad index. A 204 means every event is in the
event log; if the log cannot take them, 503. Tracked events are not evaluations: nothing is
metered.

An event's ``at`` is kept to the 24 hours before its arrival (and 5 minutes after it, for a
sender's clock that runs ahead): the pipeline counts an event against exposures it has seen,
and an event from far in the past or the future is a client's bug, refused where it is made.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import falcon
import falcon.asgi
from flagsight_core.contract import (
    KEY_IN_WORDS,
    KEY_PATTERN,
    TRACK_MAX_AGE_S,
    TRACK_MAX_AHEAD_S,
    TRACK_MAX_EVENTS,
    TRACK_SOURCE_HEADER,
    USER_IDENTIFIER_MAX,
)

from api.controlplane.model import KeyContext
from api.eventlog import EventLogUnavailable
from api.eventlog.schema import (
    TRACK_SOURCE_HTTP,
    TRACK_SOURCE_PROVIDER,
    TRACK_SOURCE_SDK,
    TRACK_SOURCES,
    TrackEvent,
)
from api.serving.services import Services
from api.web.auth import authenticate_api_key
from api.web.errors import INSIGHTS_DISABLED_MESSAGE, BadRequest, Forbidden, ServiceUnavailable
from api.web.jsonio import (
    decode_json_overflowing,
    finite_number,
    read_body,
    require_list,
    require_object,
)
from api.web.public.evaluate import key_environment
from api.web.public.feedback import items_refused

_US = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)
_RFC3339 = re.compile(
    r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(?:\.\d+)?(?:[Zz]|[+-]\d\d:\d\d)", re.ASCII
)
"""An RFC 3339 time with its offset (section 5.6's ``date-time``); ``datetime`` checks the
ranges. A leap second (``:60``) is refused: Python's times have none."""
_NAME_WORDS = f"a string of {KEY_IN_WORDS}"
_USER_WORDS = f"a string of 1 to {USER_IDENTIFIER_MAX} characters"
_SOURCES = {
    None: TRACK_SOURCE_HTTP,
    **{source: source for source in TRACK_SOURCES},
}
_SOURCE_WORDS = f"{TRACK_SOURCE_SDK}, {TRACK_SOURCE_PROVIDER} or {TRACK_SOURCE_HTTP}"


class TrackProblem(ValueError):
    """One event is invalid; the message names the field."""


def parse_event(
    item: Any, key: KeyContext, source: str, received_at_us: int, where: str
) -> TrackEvent:
    """One TrackEvent from its JSON, or ``TrackProblem`` naming what is wrong."""
    if not isinstance(item, dict):
        raise TrackProblem(f"'{where[:-1]}' must be a JSON object")
    name = item.get("name")
    if not isinstance(name, str) or KEY_PATTERN.fullmatch(name) is None:
        raise TrackProblem(f"Field '{where}name' is required and must be {_NAME_WORDS}")
    user = item.get("userIdentifier")
    if not isinstance(user, str) or not 0 < len(user) <= USER_IDENTIFIER_MAX:
        raise TrackProblem(f"Field '{where}userIdentifier' is required and must be {_USER_WORDS}")
    value = item.get("value")
    if value is not None:
        if not finite_number(value):
            raise TrackProblem(f"Field '{where}value' must be a finite number or null")
        value = float(value)
    at = item.get("at")
    occurred_at_us = received_at_us if at is None else _occurred_at_us(at, received_at_us, where)
    return TrackEvent(
        occurred_at_us,
        received_at_us,
        key.organization_id,
        key.environment_id,
        name,
        user,
        value,
        source,
        key.key_id,
    )


def _occurred_at_us(at: Any, received_at_us: int, where: str) -> int:
    """Microseconds UTC of an event's ``at``, checked to be an RFC 3339 time in the window."""
    try:
        if not isinstance(at, str) or _RFC3339.fullmatch(at) is None:
            raise ValueError(at)
        occurred_at_us = (datetime.fromisoformat(at.upper()) - _EPOCH) // _ONE_US
    except (ValueError, OverflowError):
        raise TrackProblem(
            f"Field '{where}at' must be an RFC 3339 time with its offset, "
            "e.g. 2026-01-31T09:00:00Z, or null"
        ) from None
    if not -TRACK_MAX_AGE_S * _US <= occurred_at_us - received_at_us <= TRACK_MAX_AHEAD_S * _US:
        raise TrackProblem(
            f"Field '{where}at' must be within the {TRACK_MAX_AGE_S // 3600} hours before now"
            f" (or at most {TRACK_MAX_AHEAD_S // 60} minutes after it)"
        )
    return occurred_at_us


class TrackResource:
    def __init__(self, services: Services):
        self._services = services
        self._limit = services.settings.body_limits.bulk_feedback

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        key = authenticate_api_key(req, self._services.config)
        if not key_environment(self._services, key).insights_enabled:
            raise Forbidden(INSIGHTS_DISABLED_MESSAGE)
        source = _SOURCES.get(req.get_header(TRACK_SOURCE_HEADER))
        if source is None:
            raise BadRequest(f"Header '{TRACK_SOURCE_HEADER}' must be {_SOURCE_WORDS}")
        body = decode_json_overflowing(await read_body(req, self._limit))  # 1e999 is named
        items = require_list(require_object(body), "events", max_items=TRACK_MAX_EVENTS)
        received_at_us = int(self._services.clock() * _US)
        events: list[TrackEvent] = []
        problems: list[tuple[int, str]] = []
        for index, item in enumerate(items):
            try:
                events.append(parse_event(item, key, source, received_at_us, f"events[{index}]."))
            except TrackProblem as exc:
                problems.append((index, str(exc)))
        if problems:
            raise items_refused(problems)
        if events:
            try:
                self._services.event_log.append_track(events)
            except EventLogUnavailable:
                raise ServiceUnavailable(
                    "The event log cannot take writes now; the events were not stored. Retry later."
                ) from None
        resp.status = falcon.HTTP_204
