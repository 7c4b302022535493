"""Metrics of an organization (contract 13): what release health compares beyond failures,
coverage and latency, over the events the service's users track.

The metrics page lists them (name, key, event, kind, window, which direction is better, and
the flags that follow each, a guarded rollout's guardrail included) and creates one; a
metric's page edits it. Both forms are ``metric_form``'s, checked by the admin API's body type;
saving writes through the store as the admin API's ``PUT`` does (audited, restorable from the
audit log). Deleting asks first, and is refused with the store's words while a running or
held rollout guards on the metric. Metrics change no evaluation: no write here moves the
config version.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import falcon
import falcon.asgi

from api.controlplane.errors import ConflictError, InvalidError
from api.controlplane.model import Metric
from api.controlplane.store import ControlPlaneStore
from api.web.dashboard.base import PREFIX, Page, organization_crumbs, signed_in
from api.web.dashboard.metric_form import (
    BETTER_CHOICES,
    KEY,
    KIND_CHOICES,
    MetricChange,
    MetricDraft,
    checked,
    refusal,
)


def metrics_path(organization_id: str) -> str:
    return f"{PREFIX}/organizations/{organization_id}/metrics"


@dataclass(frozen=True)
class Follower:
    """A flag environment whose health compares a metric (it follows it, or its rollout
    guards on it)."""

    environment_id: str
    environment_key: str
    flag_key: str


def followers(store: ControlPlaneStore, organization_id: str) -> dict[str, list[Follower]]:
    """The organization's metrics' followers by metric key, read in one thread."""
    keys = {e.id: e.key for e in store.list_environments(organization_id)}
    found: dict[str, list[Follower]] = defaultdict(list)
    for follow in store.metric_follows():
        if follow.organization_id == organization_id and follow.environment_id in keys:
            found[follow.metric.key].append(
                Follower(follow.environment_id, keys[follow.environment_id], follow.flag_key)
            )
    return dict(found)


class MetricWriter(Page):
    """Saving a metric's form through the store, as the admin API's ``PUT``; the store's
    refusal comes back as the form's errors."""

    async def save(self, org_id: str, key: str, change: MetricChange) -> dict[str, str]:
        try:
            await self.write(self.store.put_metric, org_id, key, **change.arguments())
        except (InvalidError, ConflictError) as exc:
            return refusal(exc)
        return {}

    def form_context(self, draft: MetricDraft, errors: dict[str, str]) -> dict[str, object]:
        return {"draft": draft, "errors": errors, "kinds": KIND_CHOICES,
                "betters": BETTER_CHOICES}  # fmt: skip


class MetricsView(MetricWriter):
    """The metrics page, after a GET, a refused form or a refused deletion."""

    async def show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        org_id: str,
        *,
        status: int = 200,
        errors: dict[str, str] | None = None,
        draft: MetricDraft | None = None,
        problem: str | None = None,
    ) -> None:
        organization = await self.organization(org_id)
        metrics = await self.read(self.store.list_metrics, org_id)
        follows = await self.read(followers, self.store, org_id)
        self.render(
            req, resp, "metrics.html", status=status, organization=organization,
            metrics=metrics, follows=follows, saved=req.get_param("saved"),
            deleted=req.get_param("deleted"), problem=problem,
            **self.form_context(draft or MetricDraft(), errors or {}),
            crumbs=[*organization_crumbs(organization), ("Metrics", metrics_path(org_id))],
        )  # fmt: skip


@falcon.before(signed_in)
class MetricsPage(MetricsView):
    """``/dashboard/organizations/{org_id}/metrics``; ``POST`` creates a metric (a key the
    organization has is refused: its own page edits it)."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await self.show(req, resp, org_id)

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await self.organization(org_id)
        draft = MetricDraft.from_form(await self.form(req))
        change, errors = checked(draft)
        if not errors and await self.read(self.store.get_metric, org_id, draft.key):
            errors = {KEY: f"This organization already has a metric '{draft.key}': edit it."}
        if change is not None and not errors:
            errors = await self.save(org_id, draft.key, change)
        if errors:
            await self.show(req, resp, org_id, status=400, errors=errors, draft=draft)
            return
        raise falcon.HTTPSeeOther(f"{metrics_path(org_id)}?saved={draft.key}")


@falcon.before(signed_in)
class MetricPage(MetricWriter):
    """``/dashboard/organizations/{org_id}/metrics/{metric_key}``: the metric's edit form;
    ``POST`` saves it."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, metric_key: str
    ) -> None:
        metric = await self._metric(org_id, metric_key)
        await self._show(req, resp, metric, MetricDraft.of(metric))

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, metric_key: str
    ) -> None:
        metric = await self._metric(org_id, metric_key)
        draft = MetricDraft.from_form(await self.form(req), key=metric_key)
        change, errors = checked(draft)
        if change is not None:
            errors = await self.save(org_id, metric_key, change)
        if errors:
            await self._show(req, resp, metric, draft, status=400, errors=errors)
            return
        raise falcon.HTTPSeeOther(f"{metrics_path(org_id)}?saved={metric_key}")

    async def _metric(self, org_id: str, metric_key: str) -> Metric:
        await self.organization(org_id)
        metric = await self.read(self.store.get_metric, org_id, metric_key)
        if metric is None:
            raise self.not_found(f"Metric '{metric_key}'")
        return metric

    async def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        metric: Metric,
        draft: MetricDraft,
        *,
        status: int = 200,
        errors: dict[str, str] | None = None,
    ) -> None:
        organization = await self.organization(metric.organization_id)
        follows = await self.read(followers, self.store, organization.id)
        path = metrics_path(organization.id)
        self.render(
            req, resp, "metric.html", status=status, organization=organization, metric=metric,
            followers=follows.get(metric.key, []), **self.form_context(draft, errors or {}),
            crumbs=[*organization_crumbs(organization), ("Metrics", path),
                    (metric.name, f"{path}/{metric.key}")],
        )  # fmt: skip


@falcon.before(signed_in)
class DeleteMetricAction(MetricsView):
    """``POST .../metrics/{metric_key}/delete``; refused (409, the store's words) while a
    running or held rollout guards on the metric."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str, metric_key: str
    ) -> None:
        await self.organization(org_id)
        problem = await self.delete(self.store.delete_metric, org_id, metric_key)
        if problem is not None:
            await self.show(req, resp, org_id, status=409, problem=problem)
            return
        raise falcon.HTTPSeeOther(f"{metrics_path(org_id)}?deleted={metric_key}")
