"""The rollout guardian: every running guarded rollout judged on the release health just
computed (contract section 10; the rules are in ``pipelines/guardian.py``)."""

import time

import dagster as dg
import duckdb

from api.controlplane.catalogue import measures
from api.controlplane.changes import Rollout, RolloutAction
from api.controlplane.resources.rollouts import split_percentage
from api.controlplane.store import ControlPlaneStore
from pipelines.constants import FLAG_HEALTH, GROUP, METRIC_USERS, ROLLOUT_DECISIONS
from pipelines.guard_evidence import rollout_evidence
from pipelines.guardian import Judgement, judge
from pipelines.resources import ControlPlaneResource, WarehouseResource
from warehouse.read import health_row


# Kinds: where the decisions are written, sqlite here or postgres (definitions.py).
@dg.asset(
    name=ROLLOUT_DECISIONS, group_name=GROUP, kinds={"sqlite"}, deps=[FLAG_HEALTH, METRIC_USERS]
)
def rollout_decisions(
    context: dg.AssetExecutionContext,
    control_plane: ControlPlaneResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    """The rollout guardian (contract section 10). Every running guarded rollout is judged on
    its guard's evidence, one one-sided sequence per guardrail over all its steps so far: a
    sample-ratio mismatch holds it, a regression shown on a watched guardrail rolls the flag's
    first percentage rule back to 0, and a step whose time has passed advances once every
    watched guardrail is shown within its tolerance (until then it waits at the step, saying
    what each guardrail still needs, and is held if still waiting four weeks on). Each
    decision is written through the control-plane store (audited, announced to webhooks, served
    by every worker within a second) with the statistics behind it. A decision is written only
    to the rollout that was read (the same step, started at the same time) and only moves the
    split from where the rollout set it. One rollout that cannot be judged is logged as an
    error and listed (metadata `not_judged`); the others are still judged, and what depends on
    this asset (the lifecycle, the published warehouse) still runs. This materialization's
    metadata lists every rollout judged and why (docs/rollouts.md)."""
    decisions, failed = [], []
    with control_plane.store() as store:
        rollouts = store.running_rollouts() if store is not None else []
        follows = store.metric_follows() if rollouts else []
        with warehouse.connect() as con:
            for rollout in rollouts:
                try:
                    judgement, applied = _judge_one(con, store, rollout, follows)
                except Exception as exc:  # noqa: BLE001 - one rollout's failure stops no other
                    context.log.error(
                        f"{rollout.flag_key} in {rollout.environment_id} not judged: {exc!r}"
                    )
                    failed.append(f"{rollout.flag_key} in {rollout.environment_id}: {exc}")
                    continue
                decisions.append(
                    {"environment_id": rollout.environment_id, "flag_key": rollout.flag_key,
                     "step": rollout.step, "percentage": rollout.percentage,
                     "action": str(judgement.action), "reason": judgement.reason,
                     "applied": applied is not None, "waiting": judgement.waiting,
                     "statistics": judgement.statistics}
                )  # fmt: skip
                context.log.info(
                    f"{rollout.flag_key} in {rollout.environment_id} at {rollout.percentage:g} %:"
                    f" {judgement.action} ({judgement.reason})"
                )
    return dg.MaterializeResult(
        metadata={
            "running_rollouts": len(rollouts),
            "not_judged": dg.MetadataValue.json(failed),
            "decisions": dg.MetadataValue.json(decisions),
            "summary": dg.MetadataValue.md(_table(decisions)),
            **{
                action.name.lower(): sum(d["action"] == action for d in decisions)
                for action in RolloutAction
            },
        }
    )


def _judge_one(
    con: duckdb.DuckDBPyConnection, store: ControlPlaneStore, rollout: Rollout, follows: list
) -> tuple[Judgement, Rollout | None]:
    """Judge one rollout and write what the judgement says; the rollout after a decision."""
    health = health_row(con, rollout.environment_id, rollout.flag_key)
    catalogue = measures(
        f.metric for f in follows
        if (f.environment_id, f.flag_key) == (rollout.environment_id, rollout.flag_key)
    )  # fmt: skip
    evidence = rollout_evidence(con, rollout, catalogue)
    flag = store.get_flag(rollout.environment_id, rollout.flag_key)
    split = split_percentage(flag) if flag is not None else ...
    judgement = judge(rollout, health, evidence, time.time(), catalogue, split)
    if judgement.action is RolloutAction.WAIT:
        store.note_rollout(
            rollout.environment_id, rollout.flag_key, rollout.step, judgement.guard,
            judgement.reason if judgement.waiting else None,
            step_started_at=rollout.step_started_at, restart_step=judgement.paused,
        )  # fmt: skip
        return judgement, None
    applied = store.decide_rollout(
        rollout.environment_id, rollout.flag_key, rollout.step, judgement.action,
        judgement.reason, judgement.statistics, guard=judgement.guard,
        step_started_at=rollout.step_started_at,
    )  # fmt: skip
    return judgement, applied


def _table(decisions: list[dict]) -> str:
    lines = ["| flag | environment | at | decision | why |", "|---|---|---|---|---|"]
    for d in decisions:
        lines.append(
            f"| {d['flag_key']} | {d['environment_id']} | {d['percentage']:g} % | {d['action']}"
            f" | {d['reason']} |"
        )
    return "\n".join(lines) if decisions else "No running rollout."
