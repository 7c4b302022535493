"""Flags of an environment: the list (enabled and archived state, evaluations over the last
30 days and the last one, lifecycle stage, toggle, create) and the editor of a flag's state,
ordered rules and lifecycle fields (kind, owner, expiry), with its stage and the reasons.

Toggling sends the wanted state, not "flip", so a double submission cannot undo itself. The
editor validates every rule before writing anything and shows each problem next to its field.
The list's evaluation figures come from the warehouse (``activity``), so a stale flag can be
seen. A flag whose guarded rollout is running says so in the list and in its editor, and the
editor does not save a change of the rollout's split (the first percentage rule's percentage)
until the person confirms it: the guardian would wait, the health being computed at a
percentage the rollout did not set. The editor's page also sets the metrics the flag follows
(``flag_metrics``), in a form of their own.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import falcon
import falcon.asgi
from flagsight_core import RULE_TYPES
from flagsight_core.contract import KEY_IN_WORDS, KEY_PATTERN

from api.controlplane.changes import ScheduleState
from api.controlplane.errors import InvalidError, NotFoundError
from api.controlplane.model import Environment, FlagRecord, Organization
from api.web.admin.error_messages import message
from api.web.admin.explain import explained
from api.web.dashboard.activity import ACTIVITY_DAYS, read_activity
from api.web.dashboard.base import PREFIX, Page, environment_crumbs, signed_in
from api.web.dashboard.flag_meta_form import MetaDraft, checked
from api.web.dashboard.flag_metrics import FIELD as METRIC_FIELD
from api.web.dashboard.flag_metrics import choices
from api.web.dashboard.lifecycle_view import read_lifecycles, window
from api.web.dashboard.rollout_view import SplitChange, running, split_change
from api.web.dashboard.rule_editor import (
    RuleRow,
    apply_op,
    columns,
    parse_rows,
    rows_from_form,
    rows_from_rules,
)
from api.web.dashboard.try_user import KINDS as TRY_KINDS
from api.web.dashboard.try_user import Trial, TryDraft, shown
from api.web.errors import BadRequest
from warehouse.lifecycle import thresholds_from


def flags_path(environment_id: str) -> str:
    return f"{PREFIX}/environments/{environment_id}/flags"


def flag_path(environment_id: str, flag_key: str) -> str:
    return f"{flags_path(environment_id)}/{flag_key}"


@falcon.before(signed_in)
class FlagsPage(Page):
    """``/dashboard/environments/{env_id}/flags``; ``POST`` creates a flag, off and without
    rules, and opens its editor."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        await self._show(req, resp, env_id)

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        await self.environment(env_id)
        key = (await self.form(req)).get("key").strip()
        error = None
        if not KEY_PATTERN.fullmatch(key):
            error = f"Use {KEY_IN_WORDS} (keys are case-sensitive)."
        elif await self.read(self.store.get_flag, env_id, key) is not None:
            error = f"This environment already has a flag '{key}'."
        if error is None:
            await self.write(self.store.put_flag, env_id, key, False, False, [])
            raise falcon.HTTPSeeOther(flag_path(env_id, key))
        await self._show(req, resp, env_id, status=400, errors={"key": error}, key=key)

    async def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        env_id: str,
        *,
        status: int = 200,
        errors: dict[str, str] | None = None,
        key: str = "",
    ) -> None:
        environment, organization = await self.environment(env_id)
        flags = await self.read(self.store.list_flags, env_id)
        today = datetime.fromtimestamp(self.services.clock(), UTC).date()
        warehouse = self.services.settings.warehouse_path
        activity = await self.read(read_activity, warehouse, env_id, today)
        uses = {flag.key: activity.of(flag.key) for flag in flags}
        rollouts = await self.read(self.store.running_rollouts, env_id)
        lifecycles = await self.read(read_lifecycles, self.services, env_id, flags)
        self.render(
            req, resp, "flags.html", status=status, environment=environment,
            organization=organization, flags=flags, errors=errors or {}, new_key=key,
            activity=activity, uses=uses, activity_days=ACTIVITY_DAYS, lifecycles=lifecycles,
            rollouts={r.flag_key: r for r in rollouts},
            stale=sum(1 for shown in lifecycles.values() if shown.stage == "stale"),
            section="flags", crumbs=[*environment_crumbs(environment, organization),
                                     ("Flags", flags_path(env_id))],
        )  # fmt: skip


CONFIRM_SPLIT_CHANGE = "confirm_percentage_change"
"""The editor's field that saves a change of a running rollout's split anyway."""


class FlagPage(Page):
    """Shared by the flag's pages: load the flag or answer 404."""

    async def flag(
        self, env_id: str, flag_key: str
    ) -> tuple[FlagRecord, Environment, Organization]:
        environment, organization = await self.environment(env_id)
        flag = await self.read(self.store.get_flag, env_id, flag_key)
        if flag is None:
            raise self.not_found(f"Flag '{flag_key}' in environment '{environment.key}'")
        return flag, environment, organization


@falcon.before(signed_in)
class FlagToggleAction(FlagPage):
    """``POST .../flags/{flag_key}/toggle`` with ``enabled=true|false``."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        flag, _environment, _organization = await self.flag(env_id, flag_key)
        enabled = (await self.form(req)).get("enabled") == "true"
        await self.write(
            self.store.put_flag, env_id, flag_key, enabled, flag.archived, list(flag.rules)
        )
        raise falcon.HTTPSeeOther(f"{flags_path(env_id)}#flag-{flag_key}")


@falcon.before(signed_in)
class FlagEditorPage(FlagPage):
    """``/dashboard/environments/{env_id}/flags/{flag_key}``: state, ordered rules and the
    lifecycle fields.

    ``POST`` carries the whole draft and an ``op``; see ``rule_editor``. The lifecycle fields
    are saved with the rest (``flag_meta_form``); a form without them keeps the flag's.
    """

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        flag, _environment, _organization = await self.flag(env_id, flag_key)
        await self._show(
            req, resp, env_id, flag_key, enabled=flag.enabled, archived=flag.archived,
            rows=rows_from_rules(flag.rules), meta=MetaDraft.of(flag.meta),
            saved=req.get_param("saved") == "1",
            metrics_saved=req.get_param("metrics_saved") == "1",
        )  # fmt: skip

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        flag, environment, _organization = await self.flag(env_id, flag_key)
        form = await self.form(req)
        enabled, archived = form.get("enabled") == "on", form.get("archived") == "on"
        rows, op = rows_from_form(form), form.get("op", "save")
        draft_meta = MetaDraft.from_form(form, MetaDraft.of(flag.meta))
        state = {"enabled": enabled, "archived": archived, "rows": rows, "meta": draft_meta}
        if op != "save":
            draft = apply_op(rows, op)
            state["rows"] = rows if draft is None else draft
            await self._show(req, resp, env_id, flag_key, **state, draft=True)
            return
        segments = await self.read(self.store.list_segments, environment.organization_id)
        rules = parse_rows(rows, {segment.key for segment in segments})
        meta, meta_errors = checked(draft_meta)
        problem = None
        if rules is not None and meta is not None and form.get(CONFIRM_SPLIT_CHANGE) != "yes":
            rollout = running(await self.read(self.store.get_rollout, env_id, flag_key))
            change = split_change(flag.rules, rules) if rollout else None
            if change is not None:
                await self._show(req, resp, env_id, flag_key, **state, status=409, draft=True,
                                 split_change=change)  # fmt: skip
                return
        if rules is not None and meta is not None:
            try:
                await self.write(
                    self.store.put_flag, env_id, flag.key, enabled, archived, rules, meta=meta
                )
            except InvalidError as exc:
                problem = message(exc)
            else:
                raise falcon.HTTPSeeOther(f"{flag_path(env_id, flag_key)}?saved=1")
        await self._show(req, resp, env_id, flag_key, **state, status=400, draft=True,
                         problem=problem, meta_errors=meta_errors)  # fmt: skip

    async def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        env_id: str,
        flag_key: str,
        *,
        enabled: bool,
        archived: bool,
        rows: list[RuleRow],
        meta: MetaDraft,
        meta_errors: dict[str, str] | None = None,
        status: int = 200,
        saved: bool = False,
        draft: bool = False,
        problem: str | None = None,
        split_change: SplitChange | None = None,
        trial: Trial | None = None,
        metrics_saved: bool = False,
        metrics_problem: str | None = None,
        followed: list[str] | None = None,
    ) -> None:
        """The editor; ``split_change`` when a save was held back because it moves a running
        rollout's split (the page then asks to confirm); ``trial``, the try-a-user form's
        state; ``followed``, the metrics ticked when their form was refused (else the flag's,
        ``flag_metrics``)."""
        flag, environment, organization = await self.flag(env_id, flag_key)
        segments = await self.read(self.store.list_segments, organization.id)
        schedules = await self.read(self.store.list_schedules, env_id, flag_key)
        pending = sum(1 for s in schedules if s.state == ScheduleState.PENDING)
        rollout = running(await self.read(self.store.get_rollout, env_id, flag_key))
        lifecycle = (await self.read(read_lifecycles, self.services, env_id, [flag]))[flag.key]
        metrics = await self.read(self.store.list_metrics, organization.id)
        if followed is None:
            followed = await self.read(self.store.flag_metrics, env_id, flag_key)
        has_errors = any(row.errors for row in rows) or bool(meta_errors)
        self.render(
            req, resp, "flag_editor.html", status=status, flag=flag, environment=environment,
            organization=organization, enabled=enabled, archived=archived, rows=rows,
            meta=meta, meta_errors=meta_errors or {}, lifecycle=lifecycle,
            window=window(thresholds_from(self.services.settings)),
            pending_schedules=pending, rollout=rollout, split_change=split_change,
            confirm_field=CONFIRM_SPLIT_CHANGE, trial=trial or Trial(), kinds=TRY_KINDS,
            rule_types=RULE_TYPES, columns=columns(), segments=segments, saved=saved, draft=draft,
            problem=problem, has_errors=has_errors, section="flags",
            metric_choices=choices(metrics, followed, rollout), metric_field=METRIC_FIELD,
            metrics_saved=metrics_saved, metrics_problem=metrics_problem,
            crumbs=[*environment_crumbs(environment, organization),
                    ("Flags", flags_path(env_id)), (flag.key, flag_path(env_id, flag.key))],
        )  # fmt: skip


class FlagPageForm(FlagEditorPage):
    """A form of the flag page besides the editor's: it answers on the flag page, showing the
    flag as saved; a ``GET`` of its address goes to the flag page."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        raise falcon.HTTPSeeOther(flag_path(env_id, flag_key))

    async def show_saved(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        flag: FlagRecord,
        **shown: Any,
    ) -> None:
        """The flag page with the flag as saved, and ``shown`` (this form's state)."""
        await self._show(
            req, resp, flag.environment_id, flag.key, enabled=flag.enabled,
            archived=flag.archived, rows=rows_from_rules(flag.rules), meta=MetaDraft.of(flag.meta),
            **shown,
        )  # fmt: skip


@falcon.before(signed_in)
class FlagTryUserAction(FlagPageForm):
    """``POST .../flags/{flag_key}/explain``: the flag page's "try a user" form
    (``try_user``). The page shows the flag as saved, with the answer for that user, or the
    problem with the input in the admin API's words (400).
    """

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        flag, _environment, _organization = await self.flag(env_id, flag_key)
        trial = Trial(TryDraft.from_form(await self.form(req)))
        try:
            request = trial.draft.request()
        except BadRequest as refused:
            trial.problem = str(refused.description)
        else:
            found = explained(self.services, env_id, flag_key, request)
            trial.shown = shown(request.userIdentifier, found)
        await self.show_saved(req, resp, flag, trial=trial, status=400 if trial.problem else 200)


@falcon.before(signed_in)
class FlagMetricsAction(FlagPageForm):
    """``POST .../flags/{flag_key}/metrics``: the metrics the flag follows (``flag_metrics``);
    a refusal shows the flag page again with the store's words and the boxes as ticked."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        flag, _environment, _organization = await self.flag(env_id, flag_key)
        keys = (await self.form(req)).getall(METRIC_FIELD)
        try:
            await self.write(self.store.set_flag_metrics, env_id, flag_key, keys)
        except (InvalidError, NotFoundError) as exc:
            await self.show_saved(
                req, resp, flag, status=400, metrics_problem=message(exc), followed=keys
            )
            return
        raise falcon.HTTPSeeOther(f"{flag_path(env_id, flag_key)}?metrics_saved=1#metrics")
