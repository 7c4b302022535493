"""A flag's lifecycle (contract section 14) as the dashboard shows it: its stage as a badge, its
reasons in words with the thresholds configured, and what "stale" means.

The stage, its reasons and the evidence are ``api.web.flag_lifecycle``'s (decided again with
the flag as it is now); here they only become words. Reasons are machine-readable names whose
numbers are the contract's defaults (``not-evaluated-30d``); the words say the thresholds the
settings configure (``FLAGSIGHT_LIFECYCLE_*``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flagsight_core.words import counted

from api.controlplane.model import FlagRecord
from api.serving.services import Services
from api.web.dashboard.activity import days_ago
from api.web.flag_lifecycle import environment_lifecycle
from warehouse.lifecycle import (
    ACTIVE,
    ARCHIVED,
    LAUNCHED,
    NEW,
    PERMANENT,
    R_ARCHIVED,
    R_ARCHIVED_BUT_EVALUATED,
    R_EVALUATED,
    R_EXPIRED,
    R_KIND_PERMANENT,
    R_LAUNCHED_LONG,
    R_NEVER_EVALUATED,
    R_NOT_EVALUATED,
    R_ONE_VALUE,
    R_ROLLOUT_COMPLETED,
    STALE,
    LifecycleThresholds,
    thresholds_from,
)

STAGE_LABELS = {
    NEW: "New",
    ACTIVE: "Active",
    LAUNCHED: "Launched",
    STALE: "Stale",
    PERMANENT: "Permanent",
    ARCHIVED: "Archived",
}
"""Each stage as its badge reads."""


def in_days(days: float) -> str:
    """``30 days``, ``1 day``, ``0.5 days`` (a threshold may be a fraction)."""
    return counted(int(days), "day") if float(days).is_integer() else f"{days:g} days"


def in_hours(hours: float) -> str:
    return counted(int(hours), "hour") if float(hours).is_integer() else f"{hours:g} hours"


def reason_words(reason: str, thresholds: LifecycleThresholds) -> str:
    """One reason of ``warehouse.lifecycle.REASONS`` as a sentence; an unknown one as itself."""
    stale, launched = in_days(thresholds.stale_days), in_days(thresholds.launched_days)
    return {
        R_ARCHIVED: "Archived: evaluation answers FLAG_ARCHIVED.",
        R_ARCHIVED_BUT_EVALUATED: (
            f"Yet evaluated within the last {in_hours(thresholds.archived_evaluated_hours)}:"
            " some code still asks for it."
        ),
        R_KIND_PERMANENT: "Its kind is permanent: it never becomes stale.",
        R_EXPIRED: "Past its expiry date.",
        R_NOT_EVALUATED: f"Not evaluated for {stale} or more.",
        R_LAUNCHED_LONG: (
            f"Launched {stale} ago or more: every evaluation has served one value (or its"
            " guarded rollout completed) since, with no change of its state or rules."
        ),
        R_NEVER_EVALUATED: "Never evaluated.",
        R_ONE_VALUE: (
            f"Every evaluation has served one value for {launched} or more, with no change of"
            " its state or rules."
        ),
        R_ROLLOUT_COMPLETED: (
            f"Its guarded rollout completed at 100 % {launched} ago or more, with no change"
            " of its state or rules since."
        ),
        R_EVALUATED: f"Evaluated within the last {stale}, and not launched.",
    }.get(reason, reason)


def window(thresholds: LifecycleThresholds) -> str:
    """The evidence's window in words (``evaluations30d`` counts the stale days)."""
    return in_days(thresholds.stale_days)


def stale_rule(thresholds: LifecycleThresholds) -> str:
    """What makes a flag stale, with the thresholds configured."""
    stale = in_days(thresholds.stale_days)
    return (
        "A temporary flag is stale when it is past its expiry date, when it was evaluated"
        f" before but not for {stale}, or when it has been launched (every evaluation serving"
        f" one value, or its guarded rollout completed) for {stale}. A permanent flag never is."
    )


@dataclass(frozen=True)
class ShownLifecycle:
    """One flag's ``lifecycle`` document and what the page says of it."""

    document: Mapping[str, Any]
    words: tuple[str, ...]
    last_seen: str | None
    """How long ago its last evaluation was (``today``, ``45 days ago``); None: never."""

    @property
    def stage(self) -> str:
        return str(self.document["stage"])

    @property
    def label(self) -> str:
        return STAGE_LABELS.get(self.stage, self.stage)

    @property
    def archived_but_evaluated(self) -> bool:
        """Archived now, and evaluated within the archived hours as of the pipeline's last run
        (a flag restored since is not, whatever that run saw)."""
        return self.stage == ARCHIVED and bool(self.document["archivedButEvaluated"])

    @property
    def in_cleanup(self) -> bool:
        """Whether the cleanup view lists the flag: stale, or archived but evaluated."""
        return self.stage == STALE or self.archived_but_evaluated


def shown(
    document: Mapping[str, Any], thresholds: LifecycleThresholds, now: float
) -> ShownLifecycle:
    last = document["lastEvaluatedAt"]
    today = datetime.fromtimestamp(now, UTC).date()
    last_day = datetime.fromisoformat(last.replace("Z", "+00:00")).date() if last else None
    return ShownLifecycle(
        document,
        tuple(reason_words(reason, thresholds) for reason in document["reasons"]),
        days_ago(last_day, today) if last_day else None,
    )


def read_lifecycles(
    services: Services, environment_id: str, flags: Iterable[FlagRecord]
) -> dict[str, ShownLifecycle]:
    """Flag key -> its lifecycle as shown (blocking: call it off the event loop)."""
    thresholds, now = thresholds_from(services.settings), services.clock()
    documents = environment_lifecycle(services, environment_id, flags)
    return {key: shown(document, thresholds, now) for key, document in documents.items()}
