"""``POST /v1/feedback/report`` and ``POST /v1/feedback/bulk`` (spec 4.3, 4.4; contract 3).

Order of checks: the key (401), the environment's insights switch (403), the body (415, 413,
400). A bulk request is validated whole: one bad item refuses it all, naming every bad index.
A 204 means every event is in the event log; if the log cannot take them, 503.
"""

from __future__ import annotations

import logging
from typing import Any

import falcon
import falcon.asgi
from flagsight_core.attribute_rules import finite_number
from flagsight_core.contract import BULK_MAX_FEEDBACKS, ERROR_TYPE_MAX
from flagsight_core.ids import EvaluationIdIssuer, InvalidEvaluationId

from api.controlplane.model import KeyContext
from api.eventlog import EventLogUnavailable
from api.eventlog.schema import FeedbackEvent
from api.serving.services import Services
from api.web.auth import authenticate_api_key
from api.web.errors import INSIGHTS_DISABLED_MESSAGE, BadRequest, Forbidden, ServiceUnavailable
from api.web.jsonio import read_json, require_list, require_object
from api.web.public.evaluate import key_environment

log = logging.getLogger("flagsight.feedback")


class FeedbackProblem(ValueError):
    """One item is invalid; the message names the field."""


def parse_feedback(
    item: Any, key: KeyContext, ids: EvaluationIdIssuer, received_at_us: int, where: str = ""
) -> FeedbackEvent:
    """One FeedbackEvent from its JSON, or ``FeedbackProblem`` naming what is wrong."""
    if not isinstance(item, dict):
        raise FeedbackProblem(f"'{where or 'body'}' must be a JSON object")
    evaluation_id = item.get("evaluationId")
    if not isinstance(evaluation_id, str) or not evaluation_id:
        raise FeedbackProblem(f"Field '{where}evaluationId' is required and must be a string")
    try:
        environment_id = ids.verify(evaluation_id).environment_id
    except InvalidEvaluationId:
        raise FeedbackProblem(
            f"Field '{where}evaluationId' was not issued by this service"
        ) from None
    if environment_id != key.environment_id:
        raise FeedbackProblem(
            f"Field '{where}evaluationId' was issued for another environment than this API key's"
        )
    result = item.get("result")
    if not isinstance(result, bool):
        raise FeedbackProblem(f"Field '{where}result' is required and must be a boolean")
    latency = item.get("latencyMs")
    if latency is not None and (not finite_number(latency) or latency < 0):
        raise FeedbackProblem(f"Field '{where}latencyMs' must be a finite number >= 0 or null")
    error_type = item.get("errorType")
    if error_type is not None and (
        not isinstance(error_type, str) or len(error_type) > ERROR_TYPE_MAX
    ):
        raise FeedbackProblem(
            f"Field '{where}errorType' must be a string of at most {ERROR_TYPE_MAX} characters or null"
        )
    return FeedbackEvent(
        evaluation_id,
        received_at_us,
        key.organization_id,
        environment_id,
        result,
        None if latency is None else float(latency),
        error_type,
        key.key_id,
    )


class _FeedbackBase:
    def __init__(self, services: Services, limit: int):
        self._services = services
        self._limit = limit

    async def _authorized_body(self, req: falcon.asgi.Request) -> tuple[KeyContext, Any]:
        key = authenticate_api_key(req, self._services.config)
        if not key_environment(self._services, key).insights_enabled:
            raise Forbidden(INSIGHTS_DISABLED_MESSAGE)
        return key, await read_json(req, self._limit)

    def _store(self, events: list[FeedbackEvent], resp: falcon.asgi.Response) -> None:
        metrics = self._services.metrics
        if events:
            try:
                self._services.event_log.append_feedback(events)
            except EventLogUnavailable as exc:
                log.error("feedback refused: event log unavailable", extra={"reason": str(exc)})
                raise ServiceUnavailable(
                    "The event log cannot take writes now; the feedback was not stored. Retry later."
                ) from None
            metrics.feedback_events.inc(len(events))
        resp.status = falcon.HTTP_204

    def _now_us(self) -> int:
        return int(self._services.clock() * 1_000_000)


class FeedbackResource(_FeedbackBase):
    def __init__(self, services: Services):
        super().__init__(services, services.settings.body_limits.single)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        key, body = await self._authorized_body(req)
        try:
            event = parse_feedback(body, key, self._services.ids, self._now_us())
        except FeedbackProblem as exc:
            raise BadRequest(str(exc)) from None
        self._store([event], resp)


class BulkFeedbackResource(_FeedbackBase):
    def __init__(self, services: Services):
        super().__init__(services, services.settings.body_limits.bulk_feedback)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        key, body = await self._authorized_body(req)
        items = require_list(require_object(body), "feedbacks", max_items=BULK_MAX_FEEDBACKS)
        now_us = self._now_us()
        events: list[FeedbackEvent] = []
        problems: list[tuple[int, str]] = []
        for index, item in enumerate(items):
            try:
                events.append(
                    parse_feedback(item, key, self._services.ids, now_us, f"feedbacks[{index}].")
                )
            except FeedbackProblem as exc:
                problems.append((index, str(exc)))
        if problems:
            raise items_refused(problems)
        self._store(events, resp)


def items_refused(problems: list[tuple[int, str]]) -> BadRequest:
    """The 400 refusing a whole bulk request for its bad items, ``(index, message)`` in order:
    every bad index, and the messages of the first 20."""
    indexes = ", ".join(str(index) for index, _ in problems)
    details = "; ".join(message for _, message in problems[:20])
    more = f"; and {len(problems) - 20} more" if len(problems) > 20 else ""
    return BadRequest(f"Invalid items at indexes {indexes}; nothing was stored: {details}{more}")
