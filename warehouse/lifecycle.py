"""A flag's lifecycle stage (contract section 14): the pure decision, its evidence and the
document the admin API shows. No I/O: the pipeline (``pipelines/lifecycle.py``) computes the
evidence and stores each flag's stage in ``flag_lifecycle``; the admin API reads the row
(``warehouse.read.flag_lifecycle``) and can decide the stage again with the flag as it is now.

Stages, first match wins (``docs/lifecycle.md``):

1. ``archived``: the flag is archived.
2. ``permanent``: its kind is permanent, whatever its expiry.
3. ``stale``: temporary, and past its ``expiresAt``, or evaluated before but not for
   ``stale_days``, or launched for ``stale_days``.
4. ``new``: never evaluated.
5. ``launched``: launched (``launched_at``) at least ``launched_days`` ago.
6. ``active``: everything else.

Each stage comes with its reasons, short machine-readable strings (``REASONS``). Their names
say the contract's default thresholds (30 and 14 days); they mean the thresholds configured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from api.settings import Settings

DAY_S = 86_400.0
HOUR_S = 3_600.0

TEMPORARY = "temporary"
PERMANENT = "permanent"
KINDS = (TEMPORARY, PERMANENT)

NEW = "new"
ACTIVE = "active"
LAUNCHED = "launched"
STALE = "stale"
ARCHIVED = "archived"
STAGES = (NEW, ACTIVE, LAUNCHED, STALE, PERMANENT, ARCHIVED)
"""Every stage (``permanent`` is both a kind and a stage)."""

# Reasons.
R_ARCHIVED = "archived"
"""archived: the flag is archived."""
R_ARCHIVED_BUT_EVALUATED = "archived-but-evaluated"
"""archived: and evaluated within ``archived_evaluated_hours`` (still in some code)."""
R_KIND_PERMANENT = "kind-permanent"
"""permanent: the flag's kind is permanent."""
R_EXPIRED = "expired"
"""stale: past its ``expiresAt``."""
R_NOT_EVALUATED = "not-evaluated-30d"
"""stale: evaluated before, but not for ``stale_days``."""
R_LAUNCHED_LONG = "launched-30d"
"""stale: launched at least ``stale_days`` ago."""
R_NEVER_EVALUATED = "never-evaluated"
"""new: no evaluation ever."""
R_ONE_VALUE = "one-value-14d"
"""launched: every evaluation served one value since ``launched_at``, at least
``launched_days`` ago (and no change of ``enabled`` or rules since)."""
R_ROLLOUT_COMPLETED = "rollout-completed"
"""launched: a guarded rollout of the flag completed at 100 % at ``launched_at``, at least
``launched_days`` ago (and no change of ``enabled`` or rules since)."""
R_EVALUATED = "evaluated-30d"
"""active: evaluated within ``stale_days``, and not launched."""

REASONS = (
    R_ARCHIVED,
    R_ARCHIVED_BUT_EVALUATED,
    R_KIND_PERMANENT,
    R_EXPIRED,
    R_NOT_EVALUATED,
    R_LAUNCHED_LONG,
    R_NEVER_EVALUATED,
    R_ONE_VALUE,
    R_ROLLOUT_COMPLETED,
    R_EVALUATED,
)

LAUNCH_SOURCES = (R_ONE_VALUE, R_ROLLOUT_COMPLETED)
"""What ``LifecycleEvidence.launched_by`` may say: the reason a launched flag is given."""

NO_CODE_REFERENCES: Mapping[str, Any] = {"count": 0, "scannedAt": None, "repository": None}


@dataclass(frozen=True)
class LifecycleThresholds:
    """The settings ``FLAGSIGHT_LIFECYCLE_LAUNCHED_DAYS``, ``_STALE_DAYS`` and
    ``_ARCHIVED_EVALUATED_HOURS``: fractions allowed (tests use seconds' worth)."""

    launched_days: float = 14.0
    stale_days: float = 30.0
    archived_evaluated_hours: float = 24.0

    def __post_init__(self) -> None:
        for name in ("launched_days", "stale_days", "archived_evaluated_hours"):
            value = getattr(self, name)
            if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number, not {value!r}")

    @property
    def launched_s(self) -> float:
        return self.launched_days * DAY_S

    @property
    def stale_s(self) -> float:
        """Also the evidence's window: ``evaluations30d``, ``servedTruePercent30d`` and
        ``applications`` count the UTC days from that of ``now - stale_days`` to today."""
        return self.stale_days * DAY_S

    @property
    def archived_evaluated_s(self) -> float:
        return self.archived_evaluated_hours * HOUR_S


DEFAULT_THRESHOLDS = LifecycleThresholds()
"""The contract's: launched after 14 days, stale after 30, archived flags watched 24 hours."""


def thresholds_from(settings: Settings) -> LifecycleThresholds:
    """The thresholds ``settings`` configure."""
    return LifecycleThresholds(
        launched_days=settings.lifecycle_launched_days,
        stale_days=settings.lifecycle_stale_days,
        archived_evaluated_hours=settings.lifecycle_archived_evaluated_hours,
    )


@dataclass(frozen=True)
class LifecycleEvidence:
    """What the pipeline knows of one flag in one environment. Times are unix seconds."""

    last_evaluated_at: float | None
    """Its latest evaluation ever; None: never evaluated."""
    evaluations_30d: int
    """Evaluations within the window (``LifecycleThresholds.stale_s``)."""
    served_true_percent_30d: float | None
    """Of those, the percentage that served true; None without any."""
    launched_at: float | None
    """Since when it is launched: the start (UTC midnight) of the trailing run of days in which
    every evaluation served one value, never earlier than its last change of ``enabled`` or
    rules; or when a guarded rollout of it completed at 100 % with no such change since;
    the earlier of the two. None: neither."""
    applications: tuple[str, ...]
    """The ``sdk`` values of its evaluations within the window, distinct, sorted."""
    archived_but_evaluated: bool
    """Archived and evaluated within ``archived_evaluated_hours`` (False for a flag that is
    not archived)."""
    launched_by: str | None = None
    """Which evidence gave ``launched_at``: ``R_ONE_VALUE`` or ``R_ROLLOUT_COMPLETED``."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> LifecycleEvidence:
        """The evidence of a ``warehouse.read.flag_lifecycle`` row."""
        return cls(
            last_evaluated_at=row["last_evaluated_at"],
            evaluations_30d=int(row["evaluations_30d"]),
            served_true_percent_30d=row["served_true_percent_30d"],
            launched_at=row["launched_at"],
            applications=tuple(row["applications"] or ()),
            archived_but_evaluated=bool(row["archived_but_evaluated"]),
            launched_by=row.get("launched_by"),
        )


EMPTY_EVIDENCE = LifecycleEvidence(
    last_evaluated_at=None,
    evaluations_30d=0,
    served_true_percent_30d=None,
    launched_at=None,
    applications=(),
    archived_but_evaluated=False,
)
"""A flag's evidence before the pipeline's first aggregation of it (its stage: ``new``, or
whatever its kind, archive and expiry decide)."""


def parse_time(value: str | float | None) -> float | None:
    """Unix seconds of an RFC 3339 time (``2026-12-01T00:00:00Z``; one without an offset is
    UTC), or of a number (already unix seconds); None stays None."""
    if value is None or isinstance(value, int | float):
        return None if value is None else float(value)
    moment = datetime.fromisoformat(value.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def format_time(unix_seconds: float | None) -> str | None:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` (the control plane's format), or None."""
    if unix_seconds is None:
        return None
    moment = datetime.fromtimestamp(unix_seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def lifecycle_stage(
    *,
    kind: str,
    archived: bool,
    expires_at: str | float | None,
    evidence: LifecycleEvidence,
    now: float,
    thresholds: LifecycleThresholds = DEFAULT_THRESHOLDS,
) -> tuple[str, tuple[str, ...]]:
    """The flag's stage and its reasons. ``kind`` is ``temporary`` or ``permanent``,
    ``expires_at`` RFC 3339 (or unix seconds) or None, ``now`` unix seconds."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    if archived:
        return ARCHIVED, (R_ARCHIVED,) + (
            (R_ARCHIVED_BUT_EVALUATED,) if evidence.archived_but_evaluated else ()
        )
    if kind == PERMANENT:
        return PERMANENT, (R_KIND_PERMANENT,)
    stale: list[str] = []
    expiry = parse_time(expires_at)
    if expiry is not None and now >= expiry:
        stale.append(R_EXPIRED)
    last = evidence.last_evaluated_at
    if last is not None and now - last >= thresholds.stale_s:
        stale.append(R_NOT_EVALUATED)
    launched_at = evidence.launched_at
    if launched_at is not None and now - launched_at >= thresholds.stale_s:
        stale.append(R_LAUNCHED_LONG)
    if stale:
        return STALE, tuple(stale)
    if last is None:
        return NEW, (R_NEVER_EVALUATED,)
    if launched_at is not None and now - launched_at >= thresholds.launched_s:
        return LAUNCHED, (evidence.launched_by or R_ONE_VALUE,)
    return ACTIVE, (R_EVALUATED,)


def lifecycle_document(
    stage: str,
    reasons: tuple[str, ...] | list[str],
    evidence: LifecycleEvidence,
    code_references: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The flag's ``lifecycle`` as the contract shows it (section 14). ``code_references`` is
    ``{"count", "scannedAt", "repository"}`` of the latest upload (none: count 0, nulls)."""
    references = NO_CODE_REFERENCES if code_references is None else code_references
    return {
        "stage": stage,
        "reasons": list(reasons),
        "lastEvaluatedAt": format_time(evidence.last_evaluated_at),
        "evaluations30d": int(evidence.evaluations_30d),
        "servedTruePercent30d": evidence.served_true_percent_30d,
        "launchedAt": format_time(evidence.launched_at),
        "applications": list(evidence.applications),
        "codeReferences": {
            "count": int(references.get("count", 0)),
            "scannedAt": references.get("scannedAt"),
            "repository": references.get("repository"),
        },
        "archivedButEvaluated": bool(evidence.archived_but_evaluated),
    }
