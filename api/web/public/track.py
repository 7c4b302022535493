"""``POST /v1/track`` (contract 13): what users did, for the metrics release health compares.

Order of checks, as feedback's: the key (401), the environment's insights switch (403), the
client's ``Flagsight-Source`` header (400), the body (415, 413, 400). The request is validated
whole: one bad event refuses it all, naming every bad index. A 204 means every event is in the
event log; if the log cannot take them, 503. Tracked events are not evaluations: nothing is
metered.

A valid body is decoded straight into its type (``TrackBody``: msgspec checks every field in C,
and reads ``at`` as RFC 3339); only a body that does not fit it is read again as plain JSON and
checked field by field, in the same rules, to name what is wrong. An event's ``at`` is kept to
the 24 hours before its arrival (and 5 minutes after it, for a sender's clock that runs ahead):
the pipeline counts an event against exposures it has seen, and an event from far in the past
or the future is a client's bug, refused where it is made.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import falcon
import falcon.asgi
import msgspec
from flagsight_core.attribute_rules import finite_number
from flagsight_core.contract import (
    KEY_IN_WORDS,
    KEY_PATTERN,
    KEY_SPEC,
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
    MALFORMED,
    decode_json_overflowing,
    malformed,
    read_body,
    require_list,
    require_object,
)
from api.web.public.evaluate import key_environment
from api.web.public.feedback import items_refused

Instant = Annotated[datetime, msgspec.Meta(tz=True)]
"""An RFC 3339 time with its offset, as msgspec reads it (a space may stand for the ``T``;
digits past the microsecond are rounded; a leap second is refused)."""


class TrackEventBody(msgspec.Struct, gc=False):
    """One event of a ``POST /v1/track`` body; unknown fields are ignored."""

    name: Annotated[str, msgspec.Meta(pattern=f"^{KEY_SPEC}\\Z")]  # \Z: no final newline
    userIdentifier: Annotated[str, msgspec.Meta(min_length=1, max_length=USER_IDENTIFIER_MAX)]
    value: float | None = None
    at: Instant | None = None


class TrackBody(msgspec.Struct, gc=False):
    events: Annotated[list[TrackEventBody], msgspec.Meta(max_length=TRACK_MAX_EVENTS)]


_BODY = msgspec.json.Decoder(TrackBody)
_US = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)
_SOURCES = {None: TRACK_SOURCE_HTTP, **{source: source for source in TRACK_SOURCES}}
_SOURCE_WORDS = f"{TRACK_SOURCE_SDK}, {TRACK_SOURCE_PROVIDER} or {TRACK_SOURCE_HTTP}"
_WINDOW = (
    f"must be within the {TRACK_MAX_AGE_S // 3600} hours before now"
    f" (or at most {TRACK_MAX_AHEAD_S // 60} minutes after it)"
)


class TrackProblem(ValueError):
    """One event is invalid; the message names the field."""


def decode_events(raw: bytes) -> tuple[list[TrackEventBody | None], list[tuple[int, str]]]:
    """The body's events, and ``(index, message)`` for each that does not fit its type (None
    in its place); a 400 for a body that is not a list of at most 500 events."""
    try:
        return _BODY.decode(raw).events, []
    except msgspec.ValidationError as exc:
        refusal = BadRequest(f"Invalid body: {exc}")
    except MALFORMED as exc:
        raise malformed(exc) from None
    body = require_object(decode_json_overflowing(raw))  # 1e999 is read, to be named
    items = require_list(body, "events", max_items=TRACK_MAX_EVENTS)
    events: list[TrackEventBody | None] = []
    problems = []
    for index, item in enumerate(items):
        try:
            events.append(checked_event(item, f"events[{index}]."))
        except TrackProblem as exc:
            events.append(None)
            problems.append((index, str(exc)))
    if not problems:  # the type refused what the checks take: never, while they agree
        raise refusal
    return events, problems


def checked_event(item: Any, where: str) -> TrackEventBody:
    """One event of plain JSON checked by ``TrackEventBody``'s rules, or ``TrackProblem``
    naming its field."""
    if not isinstance(item, dict):
        raise TrackProblem(f"'{where[:-1]}' must be a JSON object")
    name = item.get("name")
    if not isinstance(name, str) or KEY_PATTERN.fullmatch(name) is None:
        raise TrackProblem(
            f"Field '{where}name' is required and must be a string of {KEY_IN_WORDS}"
        )
    user = item.get("userIdentifier")
    if not isinstance(user, str) or not 0 < len(user) <= USER_IDENTIFIER_MAX:
        raise TrackProblem(
            f"Field '{where}userIdentifier' is required and must be a string of 1 to "
            f"{USER_IDENTIFIER_MAX} characters"
        )
    value = item.get("value")
    if value is not None and not finite_number(value):
        raise TrackProblem(f"Field '{where}value' must be a finite number or null")
    at = item.get("at")
    try:
        instant = None if at is None else msgspec.convert(at, Instant)
    except msgspec.ValidationError:
        raise TrackProblem(
            f"Field '{where}at' must be an RFC 3339 time with its offset, "
            "e.g. 2026-01-31T09:00:00Z, or null"
        ) from None
    return TrackEventBody(name, user, None if value is None else float(value), instant)


def occurred_at_us(at: datetime | None, received_at_us: int) -> int | None:
    """Microseconds UTC of an event's ``at`` (its arrival without one); None outside the
    window."""
    if at is None:
        return received_at_us
    try:
        occurred = (at - _EPOCH) // _ONE_US
    except OverflowError:  # before year 1 in UTC
        return None
    ahead = occurred - received_at_us
    return occurred if -TRACK_MAX_AGE_S * _US <= ahead <= TRACK_MAX_AHEAD_S * _US else None


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
        items, problems = decode_events(await read_body(req, self._limit))
        events = self._events(items, key, source, problems)
        if problems:
            raise items_refused(sorted(problems))
        if events:
            try:
                self._services.event_log.append_track(events)
            except EventLogUnavailable:
                raise ServiceUnavailable(
                    "The event log cannot take writes now; the events were not stored. Retry later."
                ) from None
        resp.status = falcon.HTTP_204

    def _events(
        self,
        items: list[TrackEventBody | None],
        key: KeyContext,
        source: str,
        problems: list[tuple[int, str]],
    ) -> list[TrackEvent]:
        """The events to store, the window checked; an event out of it adds to ``problems``."""
        received_at_us = int(self._services.clock() * _US)
        organization_id, environment_id, key_id = (
            key.organization_id,
            key.environment_id,
            key.key_id,
        )
        events = []
        for index, item in enumerate(items):
            if item is None:
                continue
            occurred = occurred_at_us(item.at, received_at_us)
            if occurred is None:
                problems.append((index, f"Field 'events[{index}].at' {_WINDOW}"))
                continue
            events.append(
                TrackEvent(
                    occurred,
                    received_at_us,
                    organization_id,
                    environment_id,
                    item.name,
                    item.userIdentifier,
                    item.value,
                    source,
                    key_id,
                )
            )
        return events
