"""Segments by conditions in the store (contract 12, migration 10): excluded members and
conditions written, read, audited, loaded by every worker, kept for a restore; a PERCENTAGE
rule's segment must exist and keeps the segment in use; a rollout moves the percentage and
keeps the segment. Each test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from flagsight_core import PercentageRule, SegmentRule, evaluate
from flagsight_core.conditions import conditions_from_json
from flagsight_core.segments import DefinedSegment, SegmentMembership

from api.controlplane.cache import ConfigCache
from api.controlplane.changes import Actor, RolloutPlan
from api.controlplane.errors import ConflictError, InvalidError
from api.controlplane.resources.rollouts import with_split_at
from api.controlplane.store import ErrorCode

PRO = conditions_from_json([{"attribute": "plan", "operator": "EQUALS", "values": ["pro"]}])
GERMANY = conditions_from_json(
    [
        {"attribute": "plan", "operator": "EQUALS", "values": ["pro"]},
        {"attribute": "country", "operator": "IN", "values": ["DE", "AT"]},
    ]
)


def _put(store, organization, conditions=PRO, members=("alice",), excluded=("bob",)):
    return store.put_segment(
        organization.id, "beta", list(members), excluded_user_identifiers=list(excluded),
        conditions=conditions,
    )  # fmt: skip


def test_a_segment_keeps_its_lists_and_conditions(store, organization) -> None:
    segment, created = _put(store, organization, GERMANY, ["alice", "ann", "alice"], ["bob"])
    assert created and (segment.size, segment.excluded_size, segment.conditions) == (
        2, 1, GERMANY,
    )  # fmt: skip
    assert store.get_segment(organization.id, "beta") == segment
    assert store.list_segments(organization.id) == [segment]
    assert store.segment_members(organization.id, "beta") == ["alice", "ann"]
    assert store.segment_excluded(organization.id, "beta") == ["bob"]
    record = store.list_audit(organization.id)[0]
    assert record.after == {
        "key": "beta", "size": 2, "excludedSize": 1,
        "conditions": [c.to_json() for c in GERMANY], "updatedAt": segment.updated_at,
    }  # fmt: skip


def test_a_body_of_members_alone_is_a_list_as_before(store, organization) -> None:
    _put(store, organization)
    segment, created = store.put_segment(organization.id, "beta", ["carol"])
    assert not created and (segment.size, segment.excluded_size, segment.conditions) == (1, 0, ())
    assert store.segment_excluded(organization.id, "beta") == []


def test_too_many_excluded_identifiers_name_their_field(store, organization) -> None:
    with pytest.raises(InvalidError) as refused:
        store.put_segment(
            organization.id,
            "beta",
            [],
            excluded_user_identifiers=[str(i) for i in range(1_000_001)],
        )
    assert (refused.value.code, refused.value.field) == (
        ErrorCode.SEGMENT_TOO_LARGE, "excluded_user_identifiers",
    )  # fmt: skip


def test_every_worker_decides_by_the_definition(store, organization, environment) -> None:
    _put(store, organization)
    store.put_flag(environment.id, "f", True, False, [SegmentRule("beta")])
    worker = ConfigCache(store)
    config = worker.environment(environment.id)
    segment = config.segments["beta"]
    assert isinstance(segment, DefinedSegment) and segment.conditions == PRO
    pro = {"plan": "pro"}
    assert evaluate(config.flags["f"], "alice", config.segments).value  # listed
    assert not evaluate(config.flags["f"], "bob", config.segments, pro).value  # excluded
    assert evaluate(config.flags["f"], "carol", config.segments, pro).value  # conditions
    assert not evaluate(config.flags["f"], "carol", config.segments).value
    store.put_segment(organization.id, "beta", ["carol"])  # no conditions: a table again
    assert worker.refresh()
    segments = worker.environment(environment.id).segments
    assert type(segments["beta"]) is SegmentMembership and "carol" in segments["beta"]


def test_a_restore_puts_lists_and_conditions_back(store, organization, environment) -> None:
    _put(store, organization)
    before = store.get_segment(organization.id, "beta")
    store.put_flag(environment.id, "f", True, False, [SegmentRule("beta")])
    worker = ConfigCache(store)
    store.put_segment(organization.id, "beta", ["dave"], actor=Actor.ADMIN_API)
    assert worker.refresh()
    change = store.list_audit(organization.id)[0]
    restored = store.restore(change.id, actor=Actor.DASHBOARD)
    assert (restored.before, restored.after) == (change.after, change.before)
    assert store.get_segment(organization.id, "beta") == before
    assert store.segment_members(organization.id, "beta") == ["alice"]
    assert store.segment_excluded(organization.id, "beta") == ["bob"]
    assert worker.refresh()  # every worker decides by the restored definition
    config = worker.environment(environment.id)
    assert evaluate(config.flags["f"], "carol", config.segments, {"plan": "pro"}).value
    assert not evaluate(config.flags["f"], "bob", config.segments, {"plan": "pro"}).value


def test_restoring_a_deletion_brings_lists_and_conditions_back(store, organization) -> None:
    _put(store, organization)
    before = store.get_segment(organization.id, "beta")
    store.delete_segment(organization.id, "beta")
    store.restore(store.list_audit(organization.id)[0].id)
    assert store.get_segment(organization.id, "beta") == before
    assert store.segment_excluded(organization.id, "beta") == ["bob"]


def test_a_change_kept_before_version_10_restores_members_alone(store, organization) -> None:
    store.put_segment(organization.id, "beta", ["alice"])
    _put(store, organization)
    change = store.list_audit(organization.id)[0]
    with store.backend.transaction(write=True) as conn:  # as recorded before version 10
        conn.execute(
            "UPDATE segment_history SET excluded = NULL, conditions = NULL WHERE audit_id = ?",
            (change.id,),
        )
    store.restore(change.id)
    segment = store.get_segment(organization.id, "beta")
    assert (segment.size, segment.excluded_size, segment.conditions) == (1, 0, ())
    assert store.segment_members(organization.id, "beta") == ["alice"]


def test_a_percentage_rule_names_a_segment_that_exists_and_keeps_it_in_use(
    store, organization, environment
) -> None:
    within = [PercentageRule(10, True, "beta")]
    with pytest.raises(InvalidError) as unknown:
        store.put_flag(environment.id, "f", True, False, within)
    assert (unknown.value.code, unknown.value.details) == (
        ErrorCode.UNKNOWN_SEGMENT, {"field": "rules", "index": 0, "segment": "beta"},
    )  # fmt: skip
    _put(store, organization)
    store.put_flag(environment.id, "f", True, False, within)
    with pytest.raises(ConflictError) as in_use:
        store.delete_segment(organization.id, "beta")
    assert (in_use.value.code, in_use.value.details) == (
        ErrorCode.SEGMENT_IN_USE, {"segment": "beta", "flag": "f", "environment": "production"},
    )  # fmt: skip


def test_a_rollout_moves_the_percentage_and_keeps_the_segment(
    store, organization, environment
) -> None:
    _put(store, organization)
    flag, _ = store.put_flag(environment.id, "f", True, False, [PercentageRule(0, False, "beta")])
    assert with_split_at(flag, 25, "now").rules == (PercentageRule(25, False, "beta"),)
    store.start_rollout(environment.id, "f", RolloutPlan((1, 50, 100), 10, ("failureRate",)))
    assert store.get_flag(environment.id, "f").rules == (PercentageRule(1, False, "beta"),)
