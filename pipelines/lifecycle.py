"""The flag lifecycle's evidence and stages (contract section 14, docs/lifecycle.md): what
the ``flag_lifecycle`` asset computes, from the control plane (every flag, its last change of
``enabled`` or rules, a completed guarded rollout) and the working database (its evaluations),
with the stage decided by ``warehouse.lifecycle.lifecycle_stage``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

import duckdb

from api.controlplane.changes import AuditRecord, Rollout, RolloutAction, RolloutState
from api.controlplane.store import ControlPlaneStore
from api.eventlog.schema import EVALUATION
from pipelines.watermarks import latest_batch, set_watermark, watermark
from warehouse.lifecycle import (
    R_ONE_VALUE,
    R_ROLLOUT_COMPLETED,
    STALE,
    LifecycleEvidence,
    LifecycleThresholds,
    lifecycle_document,
    lifecycle_stage,
    parse_time,
)
from warehouse.sql import run_script, transaction

AUDIT_RECORDS_READ = 20_000
"""Per organization, the newest audit records read for the flags' last changes. A flag whose
last change of ``enabled`` or rules is older takes its ``updated_at`` (never earlier than that
change, so its ``launched_at`` can only come later), and a completed rollout whose completion
is older is not seen (the flag's one-value run still counts)."""

COMPLETION_ACTION = f"rollout.{RolloutAction.COMPLETED}"
"""The audit action of the flag change a guarded rollout's completion makes (its split to
100 %): the launch itself, not a change that starts the launch over."""

_FOLDED = "lifecycle_folded"
"""``fold_state``'s watermark: the last load batch folded into ``flag_sdk_daily``."""

FlagKey = tuple[str, str]
"""``(environment id, flag key)``."""


@dataclass(frozen=True)
class LifecycleFlag:
    """A flag as the lifecycle reads it from the control plane (times in unix seconds)."""

    environment_id: str
    flag_key: str
    kind: str
    archived: bool
    expires_at: str | None
    changed_at: float
    """Its last change of ``enabled`` or rules (a completion's own included), from the audit
    log; its ``updated_at`` when the records read hold none."""
    completed_at: float | None = None
    """When a guarded rollout of it completed at 100 %, if nothing else changed its
    ``enabled`` or rules since; else None."""


@dataclass(frozen=True)
class LifecycleRun:
    """What one computation found: every flag's stage, the ``lifecycle`` document of each flag
    stale now (what ``flag.stale`` says of it), and the load batches it folded."""

    current: dict[FlagKey, str]
    stale: dict[FlagKey, dict[str, Any]]
    folded_batches: tuple[int, int]


def _differs(record: AuditRecord) -> bool:
    """Whether a flag's audit record changes its ``enabled`` or rules (a creation does)."""
    before, after = record.before, record.after
    if after is None:
        return False  # a deletion: a flag there now was created again later
    if before is None:
        return True
    return before.get("enabled") != after.get("enabled") or before.get("rules") != after.get(
        "rules"
    )


@dataclass
class _Changes:
    last: float | None = None
    """The newest change of enabled or rules."""
    last_other: float | None = None
    """The newest such change that is not a rollout's completion."""
    completed: bool = False
    """A completion is among the records."""


def flag_changes(records: Iterable[AuditRecord]) -> dict[str, _Changes]:
    """Per audit target (``flag:<environment id>/<key>``), the changes that matter, from an
    organization's records newest first (``store.list_audit``)."""
    changes: dict[str, _Changes] = {}
    for record in records:
        if not record.target.startswith("flag:") or not _differs(record):
            continue
        found = changes.setdefault(record.target, _Changes())
        at = parse_time(record.at)
        if found.last is None:
            found.last = at
        if record.action == COMPLETION_ACTION:
            found.completed = True
        elif found.last_other is None:
            found.last_other = at
    return changes


def completion_time(rollout: Rollout | None) -> float | None:
    """When ``rollout`` completed at 100 %; None unless it is completed there."""
    if rollout is None or rollout.state is not RolloutState.COMPLETED:
        return None
    if rollout.percentage != 100.0:
        return None
    completions = [d for d in rollout.decisions if d.action is RolloutAction.COMPLETED]
    return parse_time(completions[-1].at) if completions else None


def read_flags(store: ControlPlaneStore) -> list[LifecycleFlag]:
    """Every flag of every environment, with its last change and completed rollout. One audit
    read per organization and one flag list per environment; a rollout is read only for the
    flags whose records show a completion."""
    flags = []
    for organization in store.list_organizations():
        changes = flag_changes(store.list_audit(organization.id, AUDIT_RECORDS_READ))
        for environment in store.list_environments(organization.id):
            for flag in store.list_flags(environment.id):
                found = changes.get(f"flag:{environment.id}/{flag.key}", _Changes())
                updated = parse_time(flag.updated_at)
                completed_at = None
                if found.completed:
                    completed_at = completion_time(store.get_rollout(environment.id, flag.key))
                    if completed_at is not None and (found.last_other or 0.0) > completed_at:
                        completed_at = None  # changed again since it completed
                flags.append(
                    LifecycleFlag(
                        environment_id=environment.id,
                        flag_key=flag.key,
                        kind=str(flag.kind),
                        archived=flag.archived,
                        expires_at=flag.expires_at,
                        changed_at=found.last if found.last is not None else updated,
                        completed_at=completed_at,
                    )
                )
    return flags


def launched(
    one_value_since: date | None, changed_at: float, completed_at: float | None
) -> tuple[float | None, str | None]:
    """``launched_at`` and what gave it: the trailing one-value run's first day (UTC midnight),
    never earlier than the last change; or the rollout's completion; the earlier of the two."""
    candidates = []
    if one_value_since is not None:
        start = datetime.combine(one_value_since, time(), UTC).timestamp()
        candidates.append((max(start, changed_at), R_ONE_VALUE))
    if completed_at is not None:
        candidates.append((completed_at, R_ROLLOUT_COMPLETED))
    if not candidates:
        return None, None
    return min(candidates)


def window_start(now: float, thresholds: LifecycleThresholds) -> date:
    """The first UTC date of the evidence's window: that of ``now - stale_days``."""
    return datetime.fromtimestamp(now - thresholds.stale_s, UTC).date()


def compute_lifecycle(
    con: duckdb.DuckDBPyConnection,
    flags: Sequence[LifecycleFlag],
    now: float,
    thresholds: LifecycleThresholds,
) -> LifecycleRun:
    """Fold the new evaluations into ``flag_sdk_daily``, read every flag's evidence in one
    query, decide each stage and replace ``flag_lifecycle``'s rows, in one transaction."""
    with transaction(con):
        lo = watermark(con, _FOLDED)
        hi = max(lo, latest_batch(con, EVALUATION))
        run_script(con, "flag_sdk_daily", {"lo": lo, "hi": hi})
        set_watermark(con, _FOLDED, hi)
        by_key = {(f.environment_id, f.flag_key): f for f in flags}
        con.execute(
            "CREATE OR REPLACE TEMP TABLE lifecycle_flags AS SELECT "
            "unnest($environments::VARCHAR[]) AS environment_id, "
            "unnest($keys::VARCHAR[]) AS flag_key",
            {"environments": [k[0] for k in by_key], "keys": [k[1] for k in by_key]},
        )
        run_script(con, "flag_lifecycle_evidence", {"window_start": window_start(now, thresholds)})
        rows = []
        current = {}
        stale = {}
        for env, key, last_us, evaluations, percent, since, applications in con.execute(
            "SELECT environment_id, flag_key, last_evaluated_us, evaluations_30d, "
            "served_true_percent_30d, one_value_since, applications FROM lifecycle_evidence "
            "ORDER BY environment_id, flag_key"
        ).fetchall():
            flag = by_key[(env, key)]
            last = None if last_us is None else last_us / 1e6
            launched_at, launched_by = launched(since, flag.changed_at, flag.completed_at)
            evidence = LifecycleEvidence(
                last_evaluated_at=last,
                evaluations_30d=int(evaluations),
                served_true_percent_30d=percent,
                launched_at=launched_at,
                applications=tuple(applications),
                archived_but_evaluated=flag.archived
                and last is not None
                and now - last <= thresholds.archived_evaluated_s,
                launched_by=launched_by,
            )
            stage, reasons = lifecycle_stage(
                kind=flag.kind,
                archived=flag.archived,
                expires_at=flag.expires_at,
                evidence=evidence,
                now=now,
                thresholds=thresholds,
            )
            current[(env, key)] = stage
            if stage == STALE:
                stale[(env, key)] = lifecycle_document(stage, reasons, evidence)
            rows.append(_row(env, key, stage, reasons, evidence))
        _replace_rows(con, rows, now)
    return LifecycleRun(current, stale, (lo, hi))


def _row(
    env: str, key: str, stage: str, reasons: tuple[str, ...], evidence: LifecycleEvidence
) -> dict:
    return {
        "environment_id": env,
        "flag_key": key,
        "stage": stage,
        "reasons": list(reasons),
        "last_evaluated_at": evidence.last_evaluated_at,
        "evaluations_30d": evidence.evaluations_30d,
        "served_true_percent_30d": evidence.served_true_percent_30d,
        "launched_at": evidence.launched_at,
        "launched_by": evidence.launched_by,
        "applications": list(evidence.applications),
        "archived_but_evaluated": evidence.archived_but_evaluated,
    }


_COLUMN_TYPES = {
    "environment_id": "VARCHAR[]",
    "flag_key": "VARCHAR[]",
    "stage": "VARCHAR[]",
    "reasons": "VARCHAR[][]",
    "last_evaluated_at": "DOUBLE[]",
    "evaluations_30d": "BIGINT[]",
    "served_true_percent_30d": "DOUBLE[]",
    "launched_at": "DOUBLE[]",
    "launched_by": "VARCHAR[]",
    "applications": "VARCHAR[][]",
    "archived_but_evaluated": "BOOLEAN[]",
}
"""The rows go in as one list per column, unnested side by side: one statement whatever
their number, and neither pyarrow nor pandas in the run (each cost 0.3-1 s to import)."""


def _replace_rows(con: duckdb.DuckDBPyConnection, rows: list[dict], now: float) -> None:
    con.execute("DELETE FROM flag_lifecycle")
    if not rows:
        return
    columns = {name: [row[name] for row in rows] for name in _COLUMN_TYPES}
    unnested = ", ".join(
        f"unnest(${name}::{kind}) AS {name}" for name, kind in _COLUMN_TYPES.items()
    )
    con.execute(
        "INSERT INTO flag_lifecycle SELECT environment_id, flag_key, stage, reasons, "
        "to_timestamp(last_evaluated_at), evaluations_30d, served_true_percent_30d, "
        "to_timestamp(launched_at), launched_by, applications, archived_but_evaluated, "
        f"to_timestamp($now) FROM (SELECT {unnested})",
        {**columns, "now": now},
    )
