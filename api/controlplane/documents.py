"""Control-plane records as JSON documents: what the audit log keeps as ``before``/``after``,
what webhook events carry, and what the admin API answers for the same records.

One shape per record, written once: the audit log must show (and a restore put back) exactly
what ``GET`` showed, byte for byte, so the admin API's views use these functions too.

A webhook's URL is the one thing shown otherwise than stored: through
``webhook_targets.shown_url``, which masks user information, here and in ``shown_audit``
(audit records written before that rule hold it as it was stored).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import msgspec
from flagsight_core import rule_from_json, rule_to_json

from api.controlplane.changes import (
    AuditRecord,
    Rollout,
    RolloutAction,
    RolloutDecision,
    RolloutPlan,
    RolloutState,
    RolloutWait,
    Schedule,
    Webhook,
)
from api.controlplane.model import (
    ApiKey,
    Environment,
    FlagKind,
    FlagMeta,
    FlagRecord,
    Organization,
    Segment,
)
from api.controlplane.webhook_targets import shown_url

Document = dict[str, Any]


def organization(org: Organization) -> Document:
    return {
        "id": org.id,
        "name": org.name,
        "plan": org.plan.value,
        "monthlyEvaluationLimit": org.monthly_evaluation_limit,
    }


def environment(env: Environment) -> Document:
    return {"id": env.id, "key": env.key, "name": env.name, "insightsEnabled": env.insights_enabled}


def api_key(key: ApiKey) -> Document:
    return {"id": key.id, "name": key.name, "createdAt": key.created_at, "revoked": key.revoked}


def segment(seg: Segment) -> Document:
    return {
        "key": seg.key,
        "size": seg.size,
        "excludedSize": seg.excluded_size,
        "conditions": [condition.to_json() for condition in seg.conditions],
        "updatedAt": seg.updated_at,
    }


def flag(record: FlagRecord) -> Document:
    return {
        "key": record.key,
        "enabled": record.enabled,
        "archived": record.archived,
        "rules": [rule_to_json(rule) for rule in record.rules],
        "updatedAt": record.updated_at,
        "kind": str(record.meta.kind),
        "owner": record.meta.owner,
        "expiresAt": record.meta.expires_at,
    }


def flag_record(environment_id: str, document: Document) -> FlagRecord:
    """The record a flag document describes (a restore's way back)."""
    return FlagRecord(
        environment_id,
        document["key"],
        document["enabled"],
        document["archived"],
        tuple(rule_from_json(rule) for rule in document["rules"]),
        document["updatedAt"],
        # audit records written before migration 7 have no lifecycle metadata
        FlagMeta(
            FlagKind(document.get("kind", FlagKind.TEMPORARY)),
            document.get("owner"),
            document.get("expiresAt"),
        ),
    )


def decision(made: RolloutDecision) -> Document:
    return {
        "at": made.at,
        "step": made.step,
        "percentage": made.percentage,
        "action": str(made.action),
        "reason": made.reason,
        "statistics": made.statistics,
    }


def rollout(made: Rollout) -> Document:
    return {
        "state": str(made.state),
        "step": made.step,
        "percentage": made.percentage,
        "steps": list(made.plan.steps),
        "stepMinutes": made.plan.step_minutes,
        "guardrails": list(made.plan.guardrails),
        "tolerances": made.plan.tolerances,
        "stepStartedAt": iso_time(made.step_started_at),
        "decisions": [decision(d) for d in made.decisions],
        "waiting": None
        if made.waiting is None
        else {"since": iso_time(made.waiting.since), "reason": made.waiting.reason},
        "guard": made.guard,
    }


def rollout_record(
    environment_id: str, flag_key: str, document: Document, created_at: str
) -> Rollout:
    """The rollout a rollout document describes (a restore's way back); the document does not
    show when the rollout was made, so the caller says."""
    plan = RolloutPlan(
        tuple(document["steps"]),
        document["stepMinutes"],
        tuple(document["guardrails"]),
        # Absent from documents written before tolerances existed: every one at its default.
        tuple(sorted(document.get("tolerances", {}).items())),
    )
    decisions = tuple(
        RolloutDecision(d["at"], d["step"], d["percentage"], RolloutAction(d["action"]),
                        d["reason"], d["statistics"])
        for d in document["decisions"]
    )  # fmt: skip
    waiting = document.get("waiting")  # absent from documents written before it existed
    return Rollout(
        environment_id, flag_key, plan, RolloutState(document["state"]), document["step"],
        from_iso_time(document["stepStartedAt"]), created_at, decisions,
        None if waiting is None else RolloutWait(from_iso_time(waiting["since"]),
                                                 waiting["reason"]),
        document.get("guard"),
    )  # fmt: skip


def schedule(made: Schedule) -> Document:
    """``error`` as the store keeps it (``{"code": ..., "details": ...}``); the admin API words
    it. Only pending and cancelled schedules change state, so a failed one's document is never
    in the audit log."""
    return {
        "id": made.id,
        "flagKey": made.flag_key,
        "at": iso_time(made.at),
        "flag": {
            "enabled": made.flag.enabled,
            "archived": made.flag.archived,
            "rules": [rule_to_json(rule) for rule in made.flag.rules],
        },
        "state": str(made.state),
        "createdAt": made.created_at,
        "appliedAt": made.applied_at,
        "error": msgspec.to_builtins(made.error),
    }


def webhook(hook: Webhook) -> Document:
    """``url`` as ``shown_url`` shows it: a webhook stored before user information was refused
    has it masked, in the admin API and in the audit records written from now on. (Nothing
    reads a URL back from an audit record: a webhook's deletion has no restore.)"""
    return {
        "id": hook.id,
        "url": shown_url(hook.url),
        "events": list(hook.events),
        "createdAt": hook.created_at,
    }


def shown_audit(record: AuditRecord) -> AuditRecord:
    """The record as the admin API and the dashboard show it. A webhook's ``before`` and
    ``after`` get their ``url`` through ``shown_url``: the records of webhooks created before
    user information was refused still hold it, and the audit log is never rewritten (its
    rows are immutable), so it is masked where it is shown, as ``webhook`` masks it in ``GET``.
    Every other record is shown as stored."""
    if record.target.partition(":")[0] != "webhook":
        return record
    return replace(record, before=_shown_webhook(record.before),
                   after=_shown_webhook(record.after))  # fmt: skip


def _shown_webhook(document: Document | None) -> Document | None:
    if document is None or not isinstance(document.get("url"), str):
        return document
    return {**document, "url": shown_url(document["url"])}


def iso_time(unix_seconds: float) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ``, the one timestamp format of the control plane."""
    moment = datetime.fromtimestamp(unix_seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def from_iso_time(text: str) -> float:
    """The unix seconds of an ``iso_time``."""
    return datetime.fromisoformat(text).timestamp()
