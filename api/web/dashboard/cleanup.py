"""The cleanup view of an environment (contract section 14): its stale flags and its archived
flags still evaluated, each with its evidence (last evaluation, applications, what was served,
launch, owner, expiry, the reasons in words) and its code references by file; a stale flag is
archived from here in one click.

The stage is ``api.web.flag_lifecycle``'s, decided with each flag as it is now, so a flag
archived here leaves the stale list at once, before the pipeline's next run. Archiving writes
through the store as the dashboard, keeping the flag's state, rules and lifecycle fields: the
audit log shows the change and offers its restore.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import groupby

import falcon
import falcon.asgi

from api.controlplane.changes import RolloutState
from api.controlplane.errors import ConflictError, InvalidError
from api.controlplane.model import FlagRecord
from api.controlplane.resources.code_references import CodeScan, LocatedReference
from api.serving.services import Services
from api.web.admin.error_messages import message
from api.web.dashboard.activity import read_activity
from api.web.dashboard.base import PREFIX, environment_crumbs, signed_in
from api.web.dashboard.flags import FlagPage
from api.web.dashboard.lifecycle_view import (
    ShownLifecycle,
    in_days,
    in_hours,
    read_lifecycles,
    stale_rule,
    window,
)
from warehouse.lifecycle import STALE, LifecycleThresholds, thresholds_from


def cleanup_path(environment_id: str) -> str:
    return f"{PREFIX}/environments/{environment_id}/cleanup"


@dataclass(frozen=True)
class Repository:
    """A repository's references to one flag, from its latest upload."""

    name: str
    revision: str | None
    scanned_at: str
    places: tuple[str, ...]
    """``path:line`` each, by path and line."""


@dataclass(frozen=True)
class CleanupFlag:
    """A flag of the cleanup view with its evidence."""

    flag: FlagRecord
    lifecycle: ShownLifecycle
    repositories: tuple[Repository, ...]
    rollout_completed: bool


def by_repository(references: Sequence[LocatedReference]) -> tuple[Repository, ...]:
    """``store.code_references`` grouped by repository, each file's lines in order."""
    ordered = sorted(references, key=lambda r: (r.repository, r.path, r.line))
    return tuple(
        Repository(
            name, refs[0].revision, refs[0].scanned_at, tuple(f"{r.path}:{r.line}" for r in refs)
        )
        for name, group in groupby(ordered, key=lambda r: r.repository)
        for refs in [list(group)]
    )


@dataclass(frozen=True)
class Cleanup:
    """What the view lists, by flag key."""

    stale: list[CleanupFlag]
    forgotten: list[CleanupFlag]
    """Archived, yet evaluated within the archived hours."""
    scans: list[CodeScan]
    """Every repository's latest scan of the environment (a flag found in none says so)."""


def read_cleanup(services: Services, environment_id: str) -> Cleanup:
    """The environment's stale flags and its archived flags still evaluated, with their
    references and rollouts (blocking: call it off the event loop)."""
    store = services.store
    flags = store.list_flags(environment_id)
    lifecycles = read_lifecycles(services, environment_id, flags)

    def shown(flag: FlagRecord) -> CleanupFlag:
        rollout = store.get_rollout(environment_id, flag.key)
        return CleanupFlag(
            flag, lifecycles[flag.key],
            by_repository(store.code_references(environment_id, flag.key)),
            rollout is not None and rollout.state is RolloutState.COMPLETED,
        )  # fmt: skip

    return Cleanup(
        stale=[shown(f) for f in flags if lifecycles[f.key].stage == STALE],
        forgotten=[shown(f) for f in flags if lifecycles[f.key].archived_but_evaluated],
        scans=store.code_scans(environment_id),
    )


def thresholds_in_words(thresholds: LifecycleThresholds) -> list[tuple[str, str, str]]:
    """The settings that decide the stages: variable, value, what it decides."""
    return [
        ("FLAGSIGHT_LIFECYCLE_STALE_DAYS", in_days(thresholds.stale_days),
         "stale after this long unevaluated or launched; also the evidence's window"),
        ("FLAGSIGHT_LIFECYCLE_LAUNCHED_DAYS", in_days(thresholds.launched_days),
         "launched after this long serving one value (or since a completed guarded rollout)"),
        ("FLAGSIGHT_LIFECYCLE_ARCHIVED_EVALUATED_HOURS",
         in_hours(thresholds.archived_evaluated_hours),
         "an archived flag evaluated this recently is still in some code"),
    ]  # fmt: skip


class CleanupView(FlagPage):
    """What renders the view: the page itself and an archive that shows it with its error."""

    async def show(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str,
        *, error: str | None = None, status: int = 200,
    ) -> None:  # fmt: skip
        environment, organization = await self.environment(env_id)
        cleanup = await self.read(read_cleanup, self.services, env_id)
        today = datetime.fromtimestamp(self.services.clock(), UTC).date()
        warehouse = self.services.settings.warehouse_path
        activity = await self.read(read_activity, warehouse, env_id, today)
        thresholds = thresholds_from(self.services.settings)
        self.render(
            req, resp, "cleanup.html", status=status, environment=environment,
            organization=organization, stale=cleanup.stale, forgotten=cleanup.forgotten,
            scans=cleanup.scans, activity=activity,
            window=window(thresholds), stale_rule=stale_rule(thresholds),
            thresholds=thresholds_in_words(thresholds), archived=req.get_param("archived"),
            error=error, section="cleanup",
            crumbs=[*environment_crumbs(environment, organization), ("Cleanup", req.path)],
        )  # fmt: skip


@falcon.before(signed_in)
class CleanupPage(CleanupView):
    """``/dashboard/environments/{env_id}/cleanup``: what can be removed, and the proof."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        await self.show(req, resp, env_id)


@falcon.before(signed_in)
class ArchiveFlagAction(CleanupView):
    """``POST .../flags/{flag_key}/archive``: archive the flag as it is (state, rules and
    lifecycle fields kept) and go back to the cleanup view; an archived flag is left alone."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        flag, _environment, _organization = await self.flag(env_id, flag_key)
        if not flag.archived:
            try:
                await self.write(
                    self.store.put_flag, env_id, flag.key, flag.enabled, True, list(flag.rules)
                )  # meta None: the flag's kind, owner and expiry stay as they are
            except (ConflictError, InvalidError) as exc:
                await self.show(req, resp, env_id, error=message(exc), status=409)
                return
        raise falcon.HTTPSeeOther(f"{cleanup_path(env_id)}?archived={flag.key}")
