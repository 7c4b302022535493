"""A flag's ``lifecycle`` (contract section 14) as the admin API, the dashboard's flags list and
its cleanup view show it: one shape, decided in one place.

The evidence is the pipeline's (``flag_lifecycle`` in the published warehouse); the stage is
decided again here with the flag as it is now (``warehouse.lifecycle.lifecycle_stage``), so a
flag archived, made permanent or given an expiry since the last aggregation is shown as it is,
not as it was. A flag the pipeline has not seen yet has the empty evidence (stage ``new``,
unless its kind, archive or expiry say otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from api.controlplane.model import FlagRecord
from api.serving.services import Services
from warehouse.lifecycle import (
    EMPTY_EVIDENCE,
    LifecycleEvidence,
    LifecycleThresholds,
    lifecycle_document,
    lifecycle_stage,
    thresholds_from,
)
from warehouse.read import WarehouseUnreadable, environment_lifecycles

Document = dict[str, Any]


def lifecycle_of(
    flag: FlagRecord,
    row: Mapping[str, Any] | None,
    code_references: Mapping[str, Any] | None,
    thresholds: LifecycleThresholds,
    now: float,
) -> Document:
    """The ``lifecycle`` object of ``flag`` from its warehouse row (None: not aggregated yet)."""
    evidence = EMPTY_EVIDENCE if row is None else LifecycleEvidence.from_row(row)
    last = evidence.last_evaluated_at
    # archived now, not when the pipeline ran: a flag archived or restored since is judged so
    still_evaluated = last is not None and now - last <= thresholds.archived_evaluated_s
    evidence = replace(evidence, archived_but_evaluated=flag.archived and still_evaluated)
    stage, reasons = lifecycle_stage(
        kind=str(flag.kind),
        archived=flag.archived,
        expires_at=flag.expires_at,
        evidence=evidence,
        now=now,
        thresholds=thresholds,
    )
    return lifecycle_document(stage, reasons, evidence, code_references)


def environment_lifecycle(
    services: Services, environment_id: str, flags: Iterable[FlagRecord]
) -> dict[str, Document]:
    """Flag key -> its ``lifecycle``, for ``flags`` of one environment: one warehouse read and
    one store read for all of them (blocking: call it off the event loop)."""
    try:
        rows = environment_lifecycles(services.settings.warehouse_path, environment_id)
    except WarehouseUnreadable:
        rows = {}
    references = services.store.code_reference_summaries(environment_id)
    scans = services.store.code_scans(environment_id)
    # a flag no scan found still says which scan looked for it: the newest
    nowhere = (
        {"count": 0, "scannedAt": scans[0].scanned_at, "repository": scans[0].repository}
        if scans
        else None
    )
    thresholds = thresholds_from(services.settings)
    now = services.clock()
    return {
        flag.key: lifecycle_of(
            flag, rows.get(flag.key), references.get(flag.key, nowhere), thresholds, now
        )
        for flag in flags
    }
