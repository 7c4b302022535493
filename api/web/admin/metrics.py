"""Metrics of an organization and the metrics a flag follows (contract 13).

A metric is what release health makes of each exposed user's tracked events named ``event``
from its first exposure to ``windowHours`` after it: whether it has one (``conversion``), how
many (``count``), the sum of their values (``sum``) or that sum over their count (``mean``);
``better`` says which direction of a difference is an improvement. A flag follows metrics
(``PUT .../flags/{flagKey}/metrics``), and a guarded rollout may guard on one
(``"metric:<metricKey>"``, ``rollouts.py``); a metric a running or held rollout guards on is
not deleted (409).

``GET .../flags/{flagKey}/metrics`` is the warehouse row it has always been (contract 5): what
the flag follows is read at ``.../flags/{flagKey}/followed-metrics``.
"""

from __future__ import annotations

from typing import Annotated

import falcon
import falcon.asgi
import msgspec
from flagsight_core.contract import KEY_SCHEMA_PATTERN, KEY_SPEC
from msgspec import Meta

from api.controlplane import model
from api.controlplane.resources.metrics import MAX_WINDOW_HOURS, MetricCode, metric_document
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Key, Name, Place, Timestamp, one_of
from api.web.admin.environments import existing_environment
from api.web.admin.flags import EVALUATED_FLAG_KEY, NOT_AGGREGATED, FlagMetrics
from api.web.admin.flags import FlagMetricsResource as WarehouseFlagMetrics
from api.web.admin.organizations import existing_organization
from api.web.admin.slices import Answer, Operation, Parameter, Route, Slice, key_param
from api.web.errors import BadRequest, NotFound
from api.web.jsonio import write_json

MAX_FOLLOWED = 50
"""Metrics one flag may follow: each is a comparison per aggregation."""

METRIC_KEY = Parameter("metricKey", "Metric key (case-sensitive)", KEY_SCHEMA_PATTERN)

KindName = one_of(model.MetricKind)
BetterName = one_of(model.Better)
WindowHours = Annotated[
    int,
    Meta(ge=1, le=MAX_WINDOW_HOURS,
         description="How long after a user's first exposure its events count, in hours (at"
                     f" most {MAX_WINDOW_HOURS}, 30 days)"),
]  # fmt: skip


class MetricPut(Body):
    """The whole metric: every field is required."""

    name: Annotated[Name, Meta(description="How people read the metric")]
    event: Annotated[Key, Meta(description="The tracked events' name (POST /v1/track)")]
    kind: Annotated[
        KindName,  # type: ignore[valid-type]
        Meta(description="Per exposed user: whether it has one such event (conversion), how"
                         " many (count), the sum of their values (sum), or that sum over"
                         " their count (mean)"),
    ]  # fmt: skip
    windowHours: WindowHours
    better: Annotated[
        BetterName,  # type: ignore[valid-type]
        Meta(description="Which direction of treatment minus control is an improvement"),
    ]


class Metric(msgspec.Struct):
    key: Annotated[str, Meta(pattern=KEY_SCHEMA_PATTERN)]
    name: str
    event: str
    kind: KindName  # type: ignore[valid-type]
    windowHours: WindowHours
    better: BetterName  # type: ignore[valid-type]
    createdAt: Timestamp
    updatedAt: Timestamp


class MetricList(msgspec.Struct):
    items: list[Metric]


def metric(record: model.Metric) -> Metric:
    return Metric(**metric_document(record))


def _check_distinct(keys: list[str], place: Place) -> None:
    if len(set(keys)) != len(keys):
        raise BadRequest(f"Field '{place.label('metrics')}' names a metric twice")


class FollowedMetrics(Body):
    """The metrics a flag follows, by key: metrics of the environment's organization."""

    metrics: Annotated[
        list[Key],
        Meta(max_length=MAX_FOLLOWED, extra_json_schema={"uniqueItems": True},
             description="Metric keys, in the order shown"),
    ]  # fmt: skip

    checks = {"metrics": _check_distinct}


@falcon.before(require_admin)
class MetricsResource(AdminResource):
    """``/admin/v1/organizations/{org_id}/metrics``: every metric, by key."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await existing_organization(self, org_id)
        found = await self.read(self.store.list_metrics, org_id)
        write_json(resp, MetricList([metric(m) for m in found]))


@falcon.before(require_admin)
class MetricResource(AdminResource):
    """``/admin/v1/organizations/{org_id}/metrics/{metric_key}``; PUT answers 201 when it
    created the metric (judged by a read just before the write: two creations racing may
    both say 201)."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, metric_key: str
    ) -> None:
        await existing_organization(self, org_id)
        found = await self.read(self.store.get_metric, org_id, metric_key)
        if found is None:
            raise NotFound(f"Metric '{metric_key}' does not exist in organization '{org_id}'")
        write_json(resp, metric(found))

    async def on_put(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, metric_key: str
    ) -> None:
        key_param(metric_key, "metricKey")
        body = await self.body(req, MetricPut)
        existed = await self.read(self.store.get_metric, org_id, metric_key)
        stored = await self.write(
            self.store.put_metric, org_id, metric_key, name=body.name, event=body.event,
            kind=model.MetricKind(body.kind), window_hours=body.windowHours,
            better=model.Better(body.better),
        )  # fmt: skip
        write_json(resp, metric(stored), status=200 if existed else 201)

    async def on_delete(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, metric_key: str
    ) -> None:
        await self.write(self.store.delete_metric, org_id, metric_key)
        resp.status = falcon.HTTP_204


class FlagMetricsResource(WarehouseFlagMetrics):
    """``.../flags/{flag_key}/metrics``: GET the warehouse row (``flags.FlagMetricsResource``,
    contract 5), PUT the metrics the flag follows (contract 13)."""

    @falcon.before(require_admin)
    async def on_put(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        # the path's flagKey is any evaluated key (the GET's warehouse row): one that is no
        # valid key names no flag, a 404 as for any flag that does not exist
        body = await self.body(req, FollowedMetrics)
        kept = await self.write(self.store.set_flag_metrics, env_id, flag_key, body.metrics)
        write_json(resp, FollowedMetrics(metrics=kept))


@falcon.before(require_admin)
class FollowedMetricsResource(AdminResource):
    """``.../flags/{flag_key}/followed-metrics``: what the flag follows."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await existing_environment(self, env_id)
        if await self.read(self.store.get_flag, env_id, flag_key) is None:
            raise NotFound(f"Flag '{flag_key}' does not exist in environment '{env_id}'")
        keys = await self.read(self.store.flag_metrics, env_id, flag_key)
        write_json(resp, FollowedMetrics(metrics=keys))


_WORDS = {
    MetricCode.METRIC_NOT_FOUND: lambda d: (
        f"Metric '{d['identifier']}' does not exist in this organization"
    ),
    MetricCode.METRIC_IN_USE: lambda d: (
        f"Metric '{d['metric']}' is guarded on by the rollout of flag '{d['flag']}' in"
        f" environment '{d['environment']}'; stop that rollout first"
    ),
    MetricCode.METRIC_KIND_IN_USE: lambda d: (
        f"Metric '{d['metric']}' cannot become a {d['kind']} metric while the rollout of flag"
        f" '{d['flag']}' in environment '{d['environment']}' guards on it (its tolerance is in"
        " the metric's unit); stop that rollout first"
    ),
    MetricCode.METRIC_STILL_ABSENT: lambda d: (
        f"Metric '{d['metric']}' did not exist before that change and does not now"
    ),
    MetricCode.METRIC_GONE: lambda d: (
        f"Audit record '{d['audit_id']}' ({d['action']} of {d['target']}) cannot be restored:"
        f" metric '{d['metric']}' has been deleted since"
    ),
    MetricCode.METRIC_KIND_CHANGED: lambda d: (
        f"Audit record '{d['audit_id']}' ({d['action']} of {d['target']}) cannot be restored:"
        f" metric '{d['metric']}' was a {d['was']} metric then and is a {d['kind']} one now (the"
        " rollout's tolerance for it is in the old kind's unit); start a new rollout instead"
    ),
    MetricCode.METRIC_KEY_MALFORMED: lambda d: f"Metric key must match {KEY_SPEC}",
    MetricCode.METRIC_EVENT_MALFORMED: lambda d: f"Field 'event' must match {KEY_SPEC}",
    MetricCode.METRIC_WINDOW_OUT_OF_RANGE: lambda d: (
        f"Field 'windowHours' must be an integer from 1 to {d['maximum']}"
    ),
    MetricCode.UNKNOWN_METRIC: lambda d: (
        f"Field 'metrics[{d['index']}]' names metric '{d['metric']}', which does not exist in"
        " this organization"
    ),
    MetricCode.UNKNOWN_METRIC_GUARDRAIL: lambda d: (
        f"Field 'guardrails[{d['index']}]' guards on metric '{d['metric']}', which does not"
        " exist in this organization"
    ),
    MetricCode.METRIC_TOLERANCE_REQUIRED: lambda d: (
        f"Field 'tolerances' must give {d['guardrail']} a tolerance: a {d['kind']} metric's"
        " difference is in its events' own unit, which has no default"
    ),
    MetricCode.METRIC_TOLERANCE_OUT_OF_RANGE: lambda d: (
        f"Field 'tolerances' must give {d['guardrail']} a number above 0 and at most"
        f" {d['maximum']:g} (pp)"
    ),
}

SLICE = Slice(
    Route("/organizations/{org_id}/metrics", MetricsResource, {
        "get": Operation("List an organization's metrics", {200: Answer("Metrics", MetricList)}),
    }),
    Route("/organizations/{org_id}/metrics/{metric_key}", MetricResource, {
        "get": Operation("Read a metric", {200: Answer("The metric", Metric)}),
        "put": Operation("Create or replace a metric",
                         {200: Answer("Replaced", Metric), 201: Answer("Created", Metric)},
                         body=MetricPut,
                         errors={409: "A rollout guards on the metric, whose kind cannot change"}),
        "delete": Operation("Delete a metric and every flag's follow of it",
                            {204: Answer("Done; no body")},
                            errors={409: "A running or held rollout guards on the metric"}),
    }, parameters={"metric_key": METRIC_KEY}),
    Route("/environments/{env_id}/flags/{flag_key}/metrics", FlagMetricsResource, {
        "get": Operation("The flag environment's latest aggregated metrics",
                         {200: Answer("The warehouse row", FlagMetrics)},
                         errors={400: None, 404: NOT_AGGREGATED}),
        "put": Operation("Set the metrics the flag follows (release health compares them)",
                         {200: Answer("Followed", FollowedMetrics)}, body=FollowedMetrics),
    }, parameters={"flag_key": EVALUATED_FLAG_KEY}),
    Route("/environments/{env_id}/flags/{flag_key}/followed-metrics", FollowedMetricsResource, {
        "get": Operation("The metrics the flag follows",
                         {200: Answer("Followed", FollowedMetrics)}),
    }),
    words=_WORDS,
)  # fmt: skip
