"""The store's section-10 half on both backends: audit and restore, rollouts, schedules (applied
once when several stores race for them), webhooks and their outbox, usage thresholds."""

from __future__ import annotations

import threading
import time

import msgspec
import pytest
from flagsight_core import PercentageRule, RuleType, SegmentRule, StaticRule, evaluate

from api.controlplane import documents
from api.controlplane.cache import ConfigCache
from api.controlplane.changes import (
    Actor,
    FlagBody,
    Rollout,
    RolloutAction,
    RolloutPlan,
    RolloutState,
    ScheduleState,
)
from api.controlplane.errors import (
    ConflictError,
    ConflictReason,
    ControlPlaneError,
    NotFoundError,
    RecordedError,
    Resource,
)
from api.controlplane.resources.rollouts import NO_SPLIT_TO_MOVE
from api.controlplane.sql_store import sha256_hex
from api.controlplane.store import ErrorCode


def test_audit_is_newest_first_and_restore_puts_a_flag_back(store, organization, environment):
    first, _ = store.put_flag(environment.id, "f", True, False, [StaticRule()])
    store.put_flag(environment.id, "f", False, False, [], actor=Actor.ADMIN_API)
    change = store.list_audit(organization.id)[0]
    assert (change.action, change.actor, change.target) == (
        "flag.updated", "admin-api", f"flag:{environment.id}/f",
    )  # fmt: skip
    assert store.get_audit(change.id) == change
    restored = store.restore(change.id, actor=Actor.DASHBOARD)
    assert (restored.action, restored.restored_from) == ("restore", change.id)
    assert store.get_flag(environment.id, "f") == first
    assert store.list_audit(organization.id)[0] == restored
    key_record = store.list_audit(organization.id, limit=20)[-1]
    assert key_record.action == "organization.created"
    with pytest.raises(NotFoundError) as missing:
        store.restore("aud_0000000000000000")
    assert missing.value.resource is Resource.AUDIT_RECORD


def _restore_newest(store, organization, action: str):
    """Restore the newest record of ``action``; returns (that record, the restore's record)."""
    record = next(r for r in store.list_audit(organization.id) if r.action == action)
    return record, store.restore(record.id, actor=Actor.DASHBOARD)


def test_restoring_a_revocation_makes_the_key_authenticate_again(
    store, organization, environment
) -> None:
    created = store.create_api_key(environment.id, "ci")
    store.revoke_api_key(created.record.id)
    version = store.config_version()
    revocation, restored = _restore_newest(store, organization, "apiKey.revoked")
    assert (restored.action, restored.restored_from, restored.actor) == (
        "restore", revocation.id, "dashboard",
    )  # fmt: skip
    assert (restored.target, restored.before, restored.after) == (
        revocation.target, revocation.after, revocation.before,
    )  # fmt: skip
    assert store.list_api_keys(environment.id) == [created.record]
    config = store.read_config({})
    assert config.version > version  # every worker reloads, and serves the key again
    assert config.api_keys[sha256_hex(created.plaintext)].key_id == created.record.id
    assert store.list_audit(organization.id)[0] == restored
    with pytest.raises(ConflictError) as again:
        store.restore(revocation.id)
    assert again.value.reason is ConflictReason.NOTHING_TO_RESTORE


def test_restoring_a_key_creation_revokes_it(store, organization, environment) -> None:
    created = store.create_api_key(environment.id, "ci")
    creation, restored = _restore_newest(store, organization, "apiKey.created")
    assert (restored.action, restored.restored_from) == ("restore", creation.id)
    assert (restored.before["revoked"], restored.after["revoked"]) == (False, True)
    assert store.list_api_keys(environment.id) == []
    assert sha256_hex(created.plaintext) not in store.read_config({}).api_keys
    with pytest.raises(ConflictError) as again:
        store.restore(creation.id)
    assert again.value.reason is ConflictReason.NOTHING_TO_RESTORE
    assert (again.value.code, again.value.details) == (
        ErrorCode.API_KEY_ALREADY_REVOKED,
        {"api_key": created.record.id},
    )


def test_restore_refusals_judge_as_restore_does_and_write_nothing(
    store, organization, environment
) -> None:
    """A log of every kind, each target moved on since: what ``restore_refusals`` refuses
    (by the same code), ``restore`` refuses, and what it lets through, ``restore`` does."""
    store.put_segment(organization.id, "gone", ["bob"])
    store.put_flag(environment.id, "f", True, False, [SegmentRule("gone")])
    store.put_flag(environment.id, "f", True, False, [StaticRule()])
    store.delete_segment(organization.id, "gone")  # the flag's first version names it
    store.delete_flag(environment.id, "f")
    key = store.create_api_key(environment.id, "ci")
    store.revoke_api_key(key.record.id)
    hook = store.create_webhook(organization.id, "http://example.test/h", ["flag.changed"])
    store.delete_webhook(hook.record.id)
    store.put_segment(organization.id, "beta", ["alice"])
    store.put_flag(environment.id, "g", True, False, [SegmentRule("beta")])
    made = store.create_schedule(
        environment.id, "g", time.time() + 3_600, FlagBody(True, False, ())
    )
    store.cancel_schedule(environment.id, "g", made.id)
    log = store.list_audit(organization.id)
    version = store.config_version()

    refusals = store.restore_refusals(log)
    assert (store.config_version(), store.list_audit(organization.id)) == (version, log)
    creation = next(r for r in log if r.action == "apiKey.created")
    assert (refusals[creation.id].code, refusals[creation.id].details) == (
        ErrorCode.API_KEY_ALREADY_REVOKED, {"api_key": key.record.id},
    )  # fmt: skip
    assert next(r for r in log if r.action == "apiKey.revoked").id not in refusals
    for record in reversed(log):  # oldest first; each restore moves what the next is judged on
        judged = store.restore_refusals([record]).get(record.id)
        try:
            store.restore(record.id)
        except ControlPlaneError as refused:
            assert judged is not None and judged.code is refused.code, record.action
        else:
            assert judged is None, (record.action, judged)


def test_restoring_a_schedule_creation_cancels_it_and_its_cancellation_makes_it_pending(
    store, organization, environment
) -> None:
    body = FlagBody(True, False, ())
    made = store.create_schedule(environment.id, "f", time.time() + 3_600, body)
    creation, cancelled = _restore_newest(store, organization, "schedule.created")
    assert (cancelled.restored_from, cancelled.target) == (creation.id, f"schedule:{made.id}")
    assert (cancelled.before["state"], cancelled.after["state"]) == ("pending", "cancelled")
    assert store.list_schedules(environment.id, "f")[0].state is ScheduleState.CANCELLED
    with pytest.raises(ConflictError) as again:
        store.restore(creation.id)
    assert again.value.reason is ConflictReason.NOTHING_TO_RESTORE
    pending = store.restore(cancelled.id)  # the restore, restored: pending again
    assert (pending.before, pending.after) == (cancelled.after, cancelled.before)
    assert store.list_schedules(environment.id, "f") == [made]
    store.cancel_schedule(environment.id, "f", made.id)
    cancellation, restored = _restore_newest(store, organization, "schedule.cancelled")
    assert (restored.restored_from, restored.after) == (cancellation.id, cancellation.before)
    assert store.list_schedules(environment.id, "f")[0].state is ScheduleState.PENDING


def test_a_schedule_applied_or_due_cannot_be_restored(store, organization, environment) -> None:
    body = FlagBody(True, False, ())
    applied = store.create_schedule(environment.id, "f", 1_000.0, body)
    store.apply_due_schedules(1_000.0)
    with pytest.raises(ConflictError) as refused:
        _restore_newest(store, organization, "schedule.created")
    assert refused.value.reason is ConflictReason.NOT_RESTORABLE
    assert (refused.value.code, refused.value.details["schedule"]) == (
        ErrorCode.SCHEDULE_APPLIED,
        applied.id,
    )
    due = store.create_schedule(environment.id, "g", 2_000.0, body)
    store.cancel_schedule(environment.id, "g", due.id)
    with pytest.raises(ConflictError) as refused:
        _restore_newest(store, organization, "schedule.cancelled")
    assert refused.value.reason is ConflictReason.NOT_RESTORABLE
    assert (refused.value.code, refused.value.details) == (
        ErrorCode.SCHEDULE_DUE_TIME_PASSED,
        {"schedule": due.id, "due_at": 2_000.0},
    )
    assert store.list_schedules(environment.id, "g")[0].state is ScheduleState.CANCELLED


def test_restoring_a_webhook_creation_deletes_it_but_a_deletion_stays(
    store, organization, environment
) -> None:
    hook = store.create_webhook(organization.id, "http://example.test/h", ["flag.changed"])
    store.put_flag(environment.id, "f", True, False, [])
    creation, restored = _restore_newest(store, organization, "webhook.created")
    assert (restored.restored_from, restored.before, restored.after) == (
        creation.id, creation.after, None,
    )  # fmt: skip
    assert store.list_webhooks(organization.id) == []
    assert store.pending_deliveries() == 0  # what was queued for it is dropped
    with pytest.raises(ConflictError) as again:
        store.restore(creation.id)
    assert again.value.reason is ConflictReason.NOTHING_TO_RESTORE
    with pytest.raises(ConflictError) as refused:
        store.restore(restored.id)  # un-deleting it would need its secret
    assert refused.value.reason is ConflictReason.NOT_RESTORABLE
    assert refused.value.code is ErrorCode.WEBHOOK_SECRET_NOT_KEPT
    another = store.create_webhook(organization.id, hook.record.url, ["flag.changed"])
    store.delete_webhook(another.record.id)
    with pytest.raises(ConflictError) as refused:
        _restore_newest(store, organization, "webhook.deleted")
    assert refused.value.reason is ConflictReason.NOT_RESTORABLE


def _matched_rule(cache: ConfigCache, environment, user: str) -> RuleType | None:
    """What worker ``cache`` answers for ``user`` on flag ``f``: the rule type that matched."""
    config = cache.environment(environment.id)
    return evaluate(config.flags["f"], user, config.segments).matched_rule_type


def test_restoring_a_segment_put_brings_its_old_members_back_to_every_worker(
    store, organization, environment
) -> None:
    store.put_segment(organization.id, "beta", ["alice", "bob"])
    old = store.get_segment(organization.id, "beta")
    store.put_flag(environment.id, "f", True, False, [SegmentRule("beta")])
    worker = ConfigCache(store)
    store.put_segment(organization.id, "beta", ["bob", "carol"], actor=Actor.ADMIN_API)
    assert worker.refresh() and _matched_rule(worker, environment, "alice") is None
    overwrite, restored = _restore_newest(store, organization, "segment.put")
    assert (restored.action, restored.restored_from, restored.target) == (
        "restore", overwrite.id, f"segment:{organization.id}/beta",
    )  # fmt: skip
    assert (restored.before, restored.after) == (overwrite.after, overwrite.before)
    assert store.segment_members(organization.id, "beta") == ["alice", "bob"]
    assert store.get_segment(organization.id, "beta") == old
    assert worker.refresh()  # the version moved: every worker reloads the members
    assert _matched_rule(worker, environment, "alice") == RuleType.SEGMENT
    assert _matched_rule(worker, environment, "carol") is None
    again = store.restore(restored.id)  # the restore, restored: the new members again
    assert (again.restored_from, again.after) == (restored.id, restored.before)
    assert store.segment_members(organization.id, "beta") == ["bob", "carol"]
    assert store.list_audit(organization.id)[0] == again


def test_restoring_a_segment_deletion_brings_it_back_with_its_members(
    store, organization, environment
) -> None:
    store.put_segment(organization.id, "beta", ["alice", "bob"])
    old = store.get_segment(organization.id, "beta")
    store.delete_segment(organization.id, "beta")
    deletion, restored = _restore_newest(store, organization, "segment.deleted")
    assert (restored.restored_from, restored.before, restored.after) == (
        deletion.id, None, deletion.before,
    )  # fmt: skip
    assert store.get_segment(organization.id, "beta") == old
    assert store.segment_members(organization.id, "beta") == ["alice", "bob"]
    store.put_flag(environment.id, "f", True, False, [SegmentRule("beta")])
    assert _matched_rule(ConfigCache(store), environment, "bob") == RuleType.SEGMENT


def test_restoring_a_segment_creation_deletes_it_unless_a_rule_names_it(
    store, organization, environment
) -> None:
    store.put_segment(organization.id, "beta", ["alice"])
    store.put_flag(environment.id, "f", True, False, [SegmentRule("beta")])
    version = store.config_version()
    with pytest.raises(ConflictError) as in_use:
        _restore_newest(store, organization, "segment.put")
    assert in_use.value.reason is ConflictReason.SEGMENT_IN_USE
    assert (in_use.value.code, in_use.value.details) == (
        ErrorCode.SEGMENT_IN_USE,
        {"segment": "beta", "flag": "f", "environment": "production"},
    )
    assert (store.config_version(), store.segment_members(organization.id, "beta")) == (
        version, ["alice"],
    )  # fmt: skip
    store.put_flag(environment.id, "f", True, False, [])
    creation, restored = _restore_newest(store, organization, "segment.put")
    assert (restored.restored_from, restored.before, restored.after) == (
        creation.id, creation.after, None,
    )  # fmt: skip
    assert store.get_segment(organization.id, "beta") is None
    assert store.list_segments(organization.id) == []
    with pytest.raises(ConflictError) as again:
        store.restore(creation.id)
    assert again.value.reason is ConflictReason.NOTHING_TO_RESTORE
    assert (again.value.code, again.value.details) == (
        ErrorCode.SEGMENT_STILL_ABSENT,
        {"segment": "beta"},
    )
    store.restore(restored.id)  # the deletion, restored: the segment is back
    assert store.segment_members(organization.id, "beta") == ["alice"]


def test_a_segment_change_whose_members_were_not_kept_cannot_be_restored(
    store, organization
) -> None:
    store.put_segment(organization.id, "beta", ["alice"])
    store.put_segment(organization.id, "beta", ["bob"])
    change = store.list_audit(organization.id)[0]
    with store.backend.transaction(write=True) as conn:  # as recorded before version 3
        conn.execute("DELETE FROM segment_history WHERE audit_id = ?", (change.id,))
    version = store.config_version()
    with pytest.raises(ConflictError) as refused:
        store.restore(change.id)
    assert refused.value.reason is ConflictReason.NOT_RESTORABLE
    assert (refused.value.code, refused.value.details) == (
        ErrorCode.SEGMENT_MEMBERS_NOT_KEPT,
        {"audit_id": change.id, "action": "segment.put", "target": change.target},
    )
    assert store.config_version() == version
    assert store.segment_members(organization.id, "beta") == ["bob"]


@pytest.mark.parametrize(
    ("action", "why"),
    [
        ("organization.created", ErrorCode.ORGANIZATIONS_NEVER_DELETED),
        ("environment.created", ErrorCode.ENVIRONMENTS_NEVER_DELETED),
    ],
)
def test_what_cannot_be_restored_says_why(
    store, organization, environment, action: str, why: ErrorCode
) -> None:
    store.put_segment(organization.id, "beta", ["u1"])
    store.put_flag(environment.id, "f", True, False, [PercentageRule(10.0)])
    store.start_rollout(environment.id, "f", RolloutPlan((50.0, 100.0), 1, ()))
    store.stop_rollout(environment.id, "f")
    version = store.config_version()
    with pytest.raises(ConflictError) as refused:
        _restore_newest(store, organization, action)
    assert refused.value.reason is ConflictReason.NOT_RESTORABLE
    assert refused.value.code is why
    assert refused.value.details["action"] == action
    assert store.config_version() == version


def _but_its_start(rollout) -> dict:
    """The rollout as GET shows it, but when its step started."""
    return {k: v for k, v in documents.rollout(rollout).items() if k != "stepStartedAt"}


def test_restoring_a_hold_runs_the_rollout_again_and_a_stop_brings_it_back(
    store, organization, environment
) -> None:
    store.put_flag(environment.id, "f", True, False, [PercentageRule(0.0)])
    store.start_rollout(environment.id, "f", RolloutPlan((10.0, 50.0, 100.0), 5, ("failureRate",)))
    store.decide_rollout(environment.id, "f", 0, RolloutAction.ADVANCED, "fine", {"n": 1200})
    running = store.get_rollout(environment.id, "f")
    store.decide_rollout(environment.id, "f", 1, RolloutAction.HELD, "sample ratio", {"p": 1e-5})
    flag_then = store.get_flag(environment.id, "f")

    _, restore = _restore_newest(store, organization, "rollout.held")
    # What GET shows is what it showed before the hold: its step, its one decision; the step
    # starts again from the restore (else a step held for its wait would be held at once).
    resumed = store.get_rollout(environment.id, "f")
    assert _but_its_start(resumed) == _but_its_start(running)
    assert resumed.step_started_at > running.step_started_at
    assert (restore.before["state"], restore.after["state"]) == ("held", "running")
    assert store.get_flag(environment.id, "f") == flag_then  # the flag is the flag's records'

    store.stop_rollout(environment.id, "f")
    assert store.get_rollout(environment.id, "f") is None
    _, restore = _restore_newest(store, organization, "rollout.stopped")
    back = store.get_rollout(environment.id, "f")
    assert _but_its_start(back) == _but_its_start(running)
    assert (back.state, back.step) == (RolloutState.RUNNING, 1)
    assert (restore.before, restore.after["decisions"][0]["reason"]) == (None, "fine")
    assert store.running_rollouts() == [back]

    store.restore(restore.id)  # the restore undone: stopped again
    assert store.get_rollout(environment.id, "f") is None
    with pytest.raises(ConflictError) as refused:
        store.restore(restore.id)
    assert refused.value.reason is ConflictReason.NOTHING_TO_RESTORE

    store.put_flag(environment.id, "f", True, False, [StaticRule()])
    with pytest.raises(ConflictError) as refused:
        _restore_newest(store, organization, "rollout.stopped")
    assert refused.value.reason is ConflictReason.NO_PERCENTAGE_RULE
    assert store.get_rollout(environment.id, "f") is None


def test_a_decision_goes_only_to_the_rollout_read_and_from_the_split_it_set(
    store, environment
) -> None:
    """Read at step 0, then stopped and started again: the old read's decision is stale. A
    person moving the split: no decision moves it back. A person taking the percentage rule
    away: a decision to move holds the rollout instead (nothing to move), never raises."""
    store.put_flag(environment.id, "f", True, False, [PercentageRule(0.0)])
    plan = RolloutPlan((10.0, 50.0, 100.0), 10, ("failureRate",))
    read = store.start_rollout(environment.id, "f", plan)
    store.stop_rollout(environment.id, "f")
    again = store.start_rollout(environment.id, "f", RolloutPlan((1.0, 100.0), 60, ()))
    assert again.step_started_at != read.step_started_at

    def decide(started: float) -> Rollout | None:
        return store.decide_rollout(
            environment.id, "f", 0, RolloutAction.COMPLETED, "shown safe", None,
            step_started_at=started,
        )  # fmt: skip

    assert decide(read.step_started_at) is None
    assert store.get_flag(environment.id, "f").rules == (PercentageRule(1.0),)
    assert not store.note_rollout(
        environment.id, "f", 0, None, "old", step_started_at=read.step_started_at
    )

    store.put_flag(environment.id, "f", True, False, [PercentageRule(0.0)])  # a kill switch
    assert decide(again.step_started_at) is None
    assert store.get_flag(environment.id, "f").rules == (PercentageRule(0.0),)
    # The guardian's wait while a person holds the split: shown, and the step's time restarts;
    # once the split is back, a wait with no reason ends it.
    assert store.note_rollout(
        environment.id, "f", 0, None, "a person moved the flag's split",
        step_started_at=again.step_started_at, restart_step=True,
    )  # fmt: skip
    paused = store.get_rollout(environment.id, "f")
    assert paused.waiting is not None and paused.step_started_at > again.step_started_at
    assert store.note_rollout(environment.id, "f", 0, None, None)
    assert store.get_rollout(environment.id, "f").waiting is None
    again = paused

    store.put_flag(environment.id, "f", True, False, [StaticRule()])  # the rule taken away
    held = decide(again.step_started_at)
    assert held is not None and held.state is RolloutState.HELD
    assert held.decisions[-1].reason == NO_SPLIT_TO_MOVE
    assert store.get_flag(environment.id, "f").rules == (StaticRule(),)


def test_rollout_steps_and_a_stale_decision(store, environment) -> None:
    store.put_flag(environment.id, "f", True, False, [PercentageRule(0.0)])
    plan = RolloutPlan((1.0, 50.0, 100.0), 10, ("failureRate",))
    started = store.start_rollout(environment.id, "f", plan)
    assert (started.state, started.step, started.plan) == (RolloutState.RUNNING, 0, plan)
    assert store.get_flag(environment.id, "f").rules == (PercentageRule(1.0),)
    advanced = store.decide_rollout(environment.id, "f", 0, RolloutAction.ADVANCED, "ok", {"n": 1})
    assert (advanced.step, advanced.decisions[0].statistics) == (1, {"n": 1})
    assert store.decide_rollout(environment.id, "f", 0, RolloutAction.ADVANCED, "old", None) is None
    assert store.running_rollouts() == [advanced]
    assert store.running_rollouts(environment.id) == [advanced]
    assert store.running_rollouts("env-of-another-tenant") == []
    back = store.decide_rollout(environment.id, "f", 1, RolloutAction.ROLLED_BACK, "bad", None)
    assert back.state is RolloutState.ROLLED_BACK
    assert store.get_flag(environment.id, "f").rules == (PercentageRule(0.0),)
    store.stop_rollout(environment.id, "f")
    assert store.get_rollout(environment.id, "f") is None
    store.put_flag(environment.id, "g", True, False, [StaticRule()])
    with pytest.raises(ConflictError) as refused:
        store.start_rollout(environment.id, "g", plan)
    assert refused.value.reason is ConflictReason.NO_PERCENTAGE_RULE


def test_schedules_are_listed_cancelled_and_applied_when_due(store, environment) -> None:
    body = FlagBody(True, False, (StaticRule(False),))
    later = store.create_schedule(environment.id, "f", 2_000.0, body)
    due = store.create_schedule(environment.id, "f", 1_000.0, body)
    assert [s.id for s in store.list_schedules(environment.id, "f")] == [due.id, later.id]
    store.cancel_schedule(environment.id, "f", later.id)
    with pytest.raises(NotFoundError) as missing:
        store.cancel_schedule(environment.id, "f", later.id)
    assert (missing.value.resource, missing.value.identifier) == (Resource.SCHEDULE, later.id)
    assert store.apply_due_schedules(999.0) == []
    [applied] = store.apply_due_schedules(1_500.0)
    assert (applied.id, applied.state) == (due.id, ScheduleState.APPLIED)
    assert store.get_flag(environment.id, "f").rules == (StaticRule(False),)
    assert store.apply_due_schedules(3_000.0) == []


def test_a_schedule_that_cannot_be_applied_fails_and_keeps_why_by_code(
    store, organization, environment
) -> None:
    store.put_segment(organization.id, "beta", ["alice"])
    body = FlagBody(True, False, (StaticRule(), SegmentRule("beta")))
    made = store.create_schedule(environment.id, "f", 1_000.0, body)
    store.delete_segment(organization.id, "beta")  # the schedule's rule names it no more
    [failed] = store.apply_due_schedules(1_000.0)
    why = RecordedError(
        ErrorCode.UNKNOWN_SEGMENT, {"field": "rules", "index": 1, "segment": "beta"}
    )
    assert (failed.id, failed.state, failed.error) == (made.id, ScheduleState.FAILED, why)
    assert store.list_schedules(environment.id, "f") == [failed]  # kept as it was raised
    assert store.get_flag(environment.id, "f") is None
    with store.backend.transaction(write=True) as conn:  # as a version before codes wrote it
        conn.execute("UPDATE schedules SET error = ? WHERE id = ?", ("in words", made.id))
    assert store.list_schedules(environment.id, "f")[0].error == "in words"


def test_a_due_schedule_is_applied_once_by_racing_stores(open_store, store, environment) -> None:
    """Several workers (on PostgreSQL: several hosts) apply due schedules at the same moment."""
    body = FlagBody(True, False, ())
    made = [store.create_schedule(environment.id, f"f{i}", 1_000.0, body) for i in range(5)]
    racers = [open_store() for _ in range(4)]
    applied: list[str] = []
    start = threading.Barrier(len(racers))

    def race(racer) -> None:
        start.wait()
        applied.extend(s.id for s in racer.apply_due_schedules(1_000.0))

    threads = [threading.Thread(target=race, args=(racer,)) for racer in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(applied) == sorted(s.id for s in made)
    records = [r for r in store.list_audit(environment.organization_id) if r.actor == "schedule"]
    assert len(records) == 5


def test_webhook_outbox_delivery_retry_and_give_up(store, organization, environment) -> None:
    hook = store.create_webhook(organization.id, "http://example.test/h", ["flag.changed"])
    assert hook.secret.startswith("whsec_") and store.list_webhooks(organization.id) == [
        hook.record
    ]
    store.put_flag(environment.id, "f", True, False, [])
    store.put_flag(environment.id, "g", True, False, [])
    first, second = store.due_deliveries(now=1e12)
    assert msgspec.json.decode(first.body)["type"] == "flag.changed"
    assert (first.url, first.secret, store.pending_deliveries()) == (
        hook.record.url,
        hook.secret,
        2,
    )
    store.record_delivery(first.seq, 1.0, error=None, retry_at=None)
    store.record_delivery(second.seq, 1.0, error="HTTP 500", retry_at=1e13)
    assert store.due_deliveries(now=1e12) == [] and store.pending_deliveries() == 1
    [retried] = store.due_deliveries(now=1e13)
    assert (retried.seq, retried.attempts, retried.body) == (second.seq, 1, second.body)
    store.record_delivery(second.seq, 2.0, error="HTTP 500", retry_at=None)
    assert store.pending_deliveries() == 0
    store.delete_webhook(hook.record.id)
    assert store.list_webhooks(organization.id) == []
    with pytest.raises(NotFoundError) as missing:
        store.delete_webhook(hook.record.id)
    assert (missing.value.resource, missing.value.identifier) == (Resource.WEBHOOK, hook.record.id)


def test_usage_thresholds_are_announced_once(store, organization) -> None:
    store.create_webhook(organization.id, "http://example.test/h", ["usage.threshold"])
    assert store.record_usage_threshold(organization.id, "2025-03", 80, 8_000, 10_000)
    assert not store.record_usage_threshold(organization.id, "2025-03", 80, 8_001, 10_000)
    assert store.record_usage_threshold(organization.id, "2025-04", 80, 8_000, 10_000)
    assert store.pending_deliveries() == 2


def test_claimed_deliveries_are_not_handed_to_another_deliverer_until_the_claim_ends(
    store, organization, environment
) -> None:
    store.create_webhook(organization.id, "http://example.test/h", ["flag.changed"])
    store.put_flag(environment.id, "f", True, False, [])
    [claimed] = store.due_deliveries(now=1e12, claim_for_s=60)
    assert store.due_deliveries(now=1e12, claim_for_s=60) == []  # another server finds none
    assert [d.seq for d in store.due_deliveries(now=1e12 + 61)] == [claimed.seq]
