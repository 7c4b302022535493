"""Local evaluation's routes: ``POST /v1/local/quota``, ``POST /v1/local/quota/return`` and
``POST /v1/local/report`` (``api.serving.local`` says what each does; ``docs/api.md``).

Each takes the key as every public route does (401 first). A report is validated whole, like a
bulk feedback: one evaluation that cannot be taken refuses the batch, naming it, and nothing
is stored; a 200 means every evaluation is in the event log (503 when it cannot take them).
"""

from __future__ import annotations

import logging
from typing import Annotated, TypeVar

import falcon
import falcon.asgi
import msgspec
from flagsight_core.contract import LOCAL_GRANT_MAX, LOCAL_REPORT_MAX, SDK_MAX

from api.controlplane.cache import Caller
from api.eventlog import EventLogUnavailable
from api.serving.local import (
    LocalEvaluation,
    NotRecorded,
    ReportProblem,
    grant,
    note_reported,
    refund,
    report_of,
)
from api.serving.services import Services
from api.web.auth import authenticate_caller
from api.web.errors import BadRequest, ServiceUnavailable, Unauthorized
from api.web.jsonio import MALFORMED, malformed, read_body, write_json

log = logging.getLogger("flagsight.local")
T = TypeVar("T")


class QuotaRequest(msgspec.Struct):
    want: Annotated[float, msgspec.Meta(ge=1, le=LOCAL_GRANT_MAX)]
    """A count; a number, so that ``202.0`` is one, as JSON Schema says (``_count``)."""


class QuotaReturn(msgspec.Struct):
    idPrefix: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]  # noqa: N815
    unused: Annotated[float, msgspec.Meta(ge=0, le=LOCAL_GRANT_MAX)]


def _count(value: float, name: str) -> int:
    """A whole number of evaluations (``12.0`` is twelve, ``12.5`` is refused)."""
    if not float(value).is_integer():
        raise BadRequest(f"Field '{name}' must be an integer")
    return int(value)


class Report(msgspec.Struct):
    evaluations: Annotated[list[LocalEvaluation], msgspec.Meta(max_length=LOCAL_REPORT_MAX)]
    sdk: Annotated[str, msgspec.Meta(max_length=SDK_MAX)] | None = None


def _decode(raw: bytes, kind: type[T]) -> T:
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"Invalid body: {exc}") from None
    except MALFORMED as exc:
        raise malformed(exc) from None


class _LocalBase:
    def __init__(self, services: Services, limit: int):
        self._services = services
        self._limit = limit

    async def _caller_and_body(self, req: falcon.asgi.Request) -> tuple[Caller, bytes]:
        caller = authenticate_caller(req, self._services.config)
        if caller.environment is None or caller.organization is None:
            raise Unauthorized()
        return caller, await read_body(req, self._limit)


class QuotaResource(_LocalBase):
    """``POST /v1/local/quota`` ``{"want": n}`` -> ``{"granted": g, "idPrefix": p | null}``."""

    def __init__(self, services: Services):
        super().__init__(services, services.settings.body_limits.single)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        caller, raw = await self._caller_and_body(req)
        wanted = _count(_decode(raw, QuotaRequest).want, "want")
        granted = grant(self._services, caller, wanted)
        write_json(resp, {"granted": granted.granted, "idPrefix": granted.id_prefix})


class QuotaReturnResource(_LocalBase):
    """``POST /v1/local/quota/return`` ``{"idPrefix": p, "unused": k}`` -> ``{"returned": k}``."""

    def __init__(self, services: Services):
        super().__init__(services, services.settings.body_limits.single)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        caller, raw = await self._caller_and_body(req)
        body = _decode(raw, QuotaReturn)
        try:
            returned = refund(self._services, caller, body.idPrefix, _count(body.unused, "unused"))
        except ReportProblem as exc:
            raise BadRequest(f"Field 'idPrefix': {exc}") from None
        except NotRecorded as exc:
            log.error("local give-back refused: not recordable now", extra={"reason": str(exc)})
            raise ServiceUnavailable(
                "The give-back cannot be recorded now; nothing was given back. Retry later."
            ) from None
        write_json(resp, {"returned": returned})


class ReportResource(_LocalBase):
    """``POST /v1/local/report`` ``{"evaluations": [[…], …], "sdk": …}`` -> ``{"accepted": n}``."""

    def __init__(self, services: Services):
        super().__init__(services, services.settings.body_limits.bulk_evaluate)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        caller, raw = await self._caller_and_body(req)
        body = _decode(raw, Report)
        try:
            checked = report_of(self._services, caller, body.evaluations, body.sdk)
            report = checked.report
            count = len(report.rows)
            if count:
                note_reported(self._services, checked)
        except ReportProblem as exc:
            raise BadRequest(f"Nothing was stored: {exc}") from None
        except NotRecorded as exc:
            log.error("local report refused: grant ledger unavailable", extra={"reason": str(exc)})
            raise ServiceUnavailable(
                "The report cannot be recorded now; nothing was stored. Retry later."
            ) from None
        if count:
            try:
                self._services.event_log.append_local_report(report)
            except EventLogUnavailable as exc:
                log.error("local report refused: event log unavailable", extra={"reason": str(exc)})
                raise ServiceUnavailable(
                    "The event log cannot take writes now; the report was not stored. Retry later."
                ) from None
            self._services.metrics.local_reported.inc(count)
        write_json(resp, {"accepted": count})


def add_local_routes(app: falcon.asgi.App, services: Services) -> None:
    app.add_route("/v1/local/quota", QuotaResource(services))
    app.add_route("/v1/local/quota/return", QuotaReturnResource(services))
    app.add_route("/v1/local/report", ReportResource(services))
