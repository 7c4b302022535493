"""Flags of an environment: put (create or replace), read, list, delete, and their metrics."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import falcon
import falcon.asgi
import msgspec
from flagsight_core import Rule, RuleError, rule_from_json
from flagsight_core.contract import KEY_SCHEMA_PATTERN, MAX_RULES
from msgspec import Meta

from api.controlplane import documents
from api.controlplane.changes import FlagBody
from api.controlplane.documents import iso_time
from api.controlplane.model import OWNER_MAX, FlagKind, FlagMeta, FlagRecord
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Place, Timestamp, convert, one_of, words
from api.web.admin.environments import existing_environment
from api.web.admin.slices import Answer, Operation, Parameter, Route, Slice, key_param, ref
from api.web.admin.warehouse_rows import WarehouseRowResource, camel_row
from api.web.errors import BadRequest, NotFound
from api.web.flag_lifecycle import environment_lifecycle
from api.web.jsonio import write_json
from warehouse.lifecycle import REASONS, STAGES

MAX_MOMENT = 253_402_300_800  # 10000-01-01T00:00:00Z
MAX_TIME_LENGTH = 64

Rules = Annotated[
    list[Any],
    Meta(max_length=MAX_RULES, extra_json_schema={"items": ref("Rule")},
         description="Ordered; the first matching rule decides. A SEGMENT rule must name a"
                     " segment of the organization."),
]  # fmt: skip
"""Each rule is checked by the rule registry (``flagsight_core.rule_from_json``), whose
schemas the document carries (``Rule``)."""
Kind = Annotated[
    one_of(FlagKind),
    Meta(description="Whether the flag is meant to be removed one day; never changes"
                     " evaluation. A PUT without it makes the flag temporary."),
]  # fmt: skip
EXPIRES_AT = ("When the flag should be gone (RFC 3339, with its offset); a temporary flag past"
              " it is stale. Answered in UTC.")  # fmt: skip
Time = Annotated[
    str,
    Meta(min_length=1, max_length=MAX_TIME_LENGTH,
         extra_json_schema={"format": "date-time", "pattern": "^(19[7-9][0-9]|[2-9][0-9]{3})-"}),
]  # fmt: skip
"""A time a body gives, with its offset from UTC, from 1970 to 9999 (``moment`` reads it: the
pattern and the format only describe what it checks)."""


def moment(text: str, label: str) -> float:
    """An ISO-8601 time with its offset (``Z`` or ``+hh:mm``), as unix seconds; 400 naming
    ``label`` unless it is one, from 1970 to 9999."""
    try:
        parsed = datetime.fromisoformat(text)
        seconds = parsed.timestamp()
    except (ValueError, OverflowError):
        raise BadRequest(
            f"Field '{label}' must be an ISO-8601 time, e.g. 2026-01-31T09:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        raise BadRequest(f"Field '{label}' must give its offset from UTC (e.g. a final Z)")
    if not 0 <= seconds < MAX_MOMENT:
        raise BadRequest(f"Field '{label}' must be between 1970 and 9999")
    return seconds


def parsed_rules(rules: Sequence[Any], label: str) -> tuple[Rule, ...]:
    """The rules through the registry; 400 naming the rule's field (``rules[1].percentage``)."""
    try:
        return tuple(rule_from_json(rule, f"{label}[{index}]") for index, rule in enumerate(rules))
    except RuleError as exc:
        field_name, _, problem = str(exc).partition(" ")
        raise BadRequest(f"Field '{field_name}' {problem}") from None


def _check_rules(rules: list[Any], place: Place) -> None:
    parsed_rules(rules, place.label("rules"))


class ScheduledFlag(Body, kw_only=True):
    """A flag as a schedule applies it: its switch, archived state and rules (a schedule
    keeps the flag's kind, owner and expiry as they are)."""

    enabled: bool
    archived: bool | None = False
    rules: Rules

    checks = {"rules": _check_rules}

    def flag_body(self) -> FlagBody:
        return FlagBody(self.enabled, bool(self.archived), parsed_rules(self.rules, "rules"))


Owner = (
    Annotated[str, Meta(max_length=OWNER_MAX,
                        extra=words(type="Field '{label}' must be a string or null"))]
    | None
)  # fmt: skip
ExpiresAt = Annotated[Time, Meta(description=EXPIRES_AT)] | None


def _check_expires_at(text: str | None, place: Place) -> None:
    if text is not None:
        moment(text, place.label("expiresAt"))


def _meta(kind: str, owner: str | None, expires_at: str | None) -> FlagMeta:
    """``expiresAt`` kept in UTC."""
    expires = None if expires_at is None else iso_time(moment(expires_at, "expiresAt"))
    return FlagMeta(FlagKind(kind), owner, expires)


class FlagPut(ScheduledFlag, kw_only=True):
    """Kind, owner and expiry left out each take their default: the PUT replaces the flag
    whole."""

    kind: Kind = FlagKind.TEMPORARY.value
    owner: Owner = None
    expiresAt: ExpiresAt = None

    checks = {**ScheduledFlag.checks, "expiresAt": _check_expires_at}

    def flag_meta(self) -> FlagMeta:
        return _meta(self.kind, self.owner, self.expiresAt)


class FlagMetaFields(Body, kw_only=True):
    """A flag's lifecycle fields alone, as ``FlagPut`` takes them (the dashboard's editor
    checks them apart from the rules)."""

    kind: Kind = FlagKind.TEMPORARY.value
    owner: Owner = None
    expiresAt: ExpiresAt = None

    checks = {"expiresAt": _check_expires_at}


def flag_meta(body: Any) -> FlagMeta:
    """A flag's kind, owner and expiry from plain JSON values (each absent one at its
    default): 400 in the API's words, naming the field."""
    fields = convert(FlagMetaFields, body)
    return _meta(fields.kind, fields.owner, fields.expiresAt)


class CodeReferences(msgspec.Struct):
    """From ``flagsight code-refs --upload``: references in every repository's latest scan,
    and the newest scan (zero and nulls before the first upload)."""

    count: Annotated[int, Meta(ge=0)]
    scannedAt: Timestamp | None
    repository: str | None


class Lifecycle(msgspec.Struct):
    """Contract 14 (docs/lifecycle.md): the stage decided with the flag as it is now, on the
    evidence of the pipeline's last run (before it: stage ``new``, empty evidence)."""

    stage: one_of(STAGES)
    reasons: list[one_of(REASONS)]
    lastEvaluatedAt: Timestamp | None
    evaluations30d: Annotated[int, Meta(ge=0)]
    servedTruePercent30d: Annotated[float, Meta(ge=0, le=100)] | None
    launchedAt: Timestamp | None
    applications: Annotated[list[str], Meta(description="sdk values seen in the window")]
    codeReferences: CodeReferences
    archivedButEvaluated: bool


class Flag(msgspec.Struct):
    key: Annotated[str, Meta(pattern=KEY_SCHEMA_PATTERN)]
    enabled: bool
    archived: bool
    rules: Annotated[list[Any], Meta(extra_json_schema={"items": ref("Rule")})]
    updatedAt: Timestamp
    kind: Kind
    owner: Annotated[str, Meta(max_length=OWNER_MAX)] | None
    expiresAt: Annotated[Timestamp, Meta(description=EXPIRES_AT)] | None
    lifecycle: Lifecycle


class FlagsQuery(Body):
    lifecycle: (
        Annotated[one_of(STAGES), Meta(description="Only the flags at this lifecycle stage")] | None
    ) = None


class FlagList(msgspec.Struct):
    items: list[Flag]


class FlagMetrics(msgspec.Struct):
    """The warehouse's flag_environment_metrics row, camelCase. Rates are percentages 0..100;
    a rate with a zero denominator is null."""

    organizationId: str
    environmentId: str
    environmentKey: str
    flagKey: str
    evaluations: Annotated[int, Meta(ge=0)]
    feedbackCount: Annotated[int, Meta(ge=0)]
    feedbackCoverage: float | None
    successCount: Annotated[int, Meta(ge=0)]
    failureCount: Annotated[int, Meta(ge=0)]
    successRate: float | None
    failureRate: float | None
    avgLatencyMs: float | None
    computedAt: Timestamp


def flag(record: FlagRecord, lifecycle: dict[str, Any]) -> Flag:
    """A flag's answer: its document, as the audit log keeps it too, and its lifecycle."""
    return Flag(**documents.flag(record), lifecycle=msgspec.convert(lifecycle, Lifecycle))


async def answered(resource: AdminResource, env_id: str, records: list[FlagRecord]) -> list[Flag]:
    """``records`` with their lifecycles (``api/web/flag_lifecycle.py``)."""
    lifecycles = await resource.read(environment_lifecycle, resource.services, env_id, records)
    return [flag(record, lifecycles[record.key]) for record in records]


@falcon.before(require_admin)
class FlagsResource(AdminResource):
    """``/admin/v1/environments/{env_id}/flags``: every flag, by key;
    ``?lifecycle=stale`` only those at that stage."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        query = self.query(req, FlagsQuery)
        await existing_environment(self, env_id)
        flags = await answered(self, env_id, await self.read(self.store.list_flags, env_id))
        if query.lifecycle is not None:
            flags = [shown for shown in flags if shown.lifecycle.stage == query.lifecycle]
        write_json(resp, FlagList(flags))


@falcon.before(require_admin)
class FlagResource(AdminResource):
    """``/admin/v1/environments/{env_id}/flags/{flag_key}``; PUT answers 201 when created."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await existing_environment(self, env_id)
        record = await self.read(self.store.get_flag, env_id, flag_key)
        if record is None:
            raise NotFound(f"Flag '{flag_key}' does not exist in environment '{env_id}'")
        [shown] = await answered(self, env_id, [record])
        write_json(resp, shown)

    async def on_put(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        key_param(flag_key, "flagKey")
        put = await self.body(req, FlagPut)
        body = put.flag_body()
        record, created = await self.write(
            self.store.put_flag, env_id, flag_key, body.enabled, body.archived, body.rules,
            meta=put.flag_meta(),
        )  # fmt: skip
        [shown] = await answered(self, env_id, [record])
        write_json(resp, shown, status=201 if created else 200)

    async def on_delete(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await self.write(self.store.delete_flag, env_id, flag_key)
        resp.status = falcon.HTTP_204


def read_flag_metrics(warehouse_path: Path, environment_id: str, flag_key: str) -> Any:
    """The warehouse row, or None when there is none or no warehouse module/file yet."""
    try:
        from warehouse.read import flag_metrics
    except ModuleNotFoundError as exc:
        if exc.name not in ("warehouse", "warehouse.read"):
            raise
        return None
    return flag_metrics(warehouse_path, environment_id, flag_key)


@falcon.before(require_admin)
class FlagMetricsResource(WarehouseRowResource):
    """``.../flags/{flag_key}/metrics``: the latest aggregation; 404 before the first one."""

    what = "metrics"

    def read_row(self, warehouse_path: Path, environment_id: str, flag_key: str) -> Any:
        return read_flag_metrics(warehouse_path, environment_id, flag_key)

    def answer(self, row: Any) -> Any:
        return FlagMetrics(**camel_row(row))


EVALUATED_FLAG_KEY = Parameter("flagKey", "Flag key as evaluated (1 to 128 characters)")
"""The flag key of a warehouse row: any key an application asked for, not only a valid one."""
NOT_AGGREGATED = "No such environment, or not aggregated yet"

SLICE = Slice(  # .../flags/{flag_key}/metrics is metrics.SLICE's (GET here, PUT there)
    Route("/environments/{env_id}/flags", FlagsResource, {
        "get": Operation("List an environment's flags", {200: Answer("Flags", FlagList)},
                         query=FlagsQuery),
    }),
    Route("/environments/{env_id}/flags/{flag_key}", FlagResource, {
        "get": Operation("Read a flag", {200: Answer("The flag", Flag)}),
        "put": Operation("Create or replace a flag",
                         {200: Answer("Replaced", Flag), 201: Answer("Created", Flag)},
                         body=FlagPut),
        "delete": Operation("Delete a flag", {204: Answer("Done; no body")}),
    }),
)  # fmt: skip
