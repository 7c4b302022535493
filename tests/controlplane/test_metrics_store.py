"""The metrics slice on both backends (contract 13): metrics, the flags that follow them, the
rollouts that guard on them, their audit records and restores."""

from __future__ import annotations

import pytest
from flagsight_core import PercentageRule

from api.controlplane.changes import Actor, RolloutAction, RolloutPlan
from api.controlplane.errors import ConflictError, ConflictReason, InvalidError, NotFoundError
from api.controlplane.model import Better, MetricFollow, MetricKind, Plan
from api.controlplane.store import ErrorCode


def _metric(store, organization, key="checkout", kind=MetricKind.CONVERSION, **changes):
    fields = {
        "name": "Checkout", "event": "checkout", "kind": kind, "window_hours": 72,
        "better": Better.HIGHER, **changes,
    }  # fmt: skip
    return store.put_metric(organization.id, key, **fields)


def _guarded(store, environment, flag="f", guardrails=("metric:checkout",), tolerances=()):
    store.put_flag(environment.id, flag, True, False, [PercentageRule(0.0)])
    plan = RolloutPlan((10.0, 100.0), 10.0, tuple(guardrails), tuple(tolerances))
    return store.start_rollout(environment.id, flag, plan)


def test_a_metric_is_created_read_listed_replaced_and_deleted(store, organization):
    made = _metric(store, organization, actor=Actor.ADMIN_API)
    assert (made.key, made.kind, made.window_hours, made.better) == (
        "checkout", MetricKind.CONVERSION, 72, Better.HIGHER,
    )  # fmt: skip
    assert made.created_at == made.updated_at and made.created_at.tzinfo is not None
    assert store.get_metric(organization.id, "checkout") == made
    _metric(store, organization, "aov", MetricKind.MEAN, name="Order value", event="order")
    assert [m.key for m in store.list_metrics(organization.id)] == ["aov", "checkout"]
    replaced = _metric(store, organization, name="Checkouts", better=Better.LOWER)
    assert (replaced.name, replaced.better, replaced.created_at) == (
        "Checkouts", Better.LOWER, made.created_at,
    )  # fmt: skip
    assert replaced.updated_at >= made.updated_at
    store.delete_metric(organization.id, "checkout")
    assert store.get_metric(organization.id, "checkout") is None
    with pytest.raises(NotFoundError) as missing:
        store.delete_metric(organization.id, "checkout")
    assert (missing.value.code, missing.value.resource) == (ErrorCode.METRIC_NOT_FOUND, "metric")


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"key": "a b"}, "METRIC_KEY_MALFORMED", "key"),
        ({"event": ""}, "METRIC_EVENT_MALFORMED", "event"),
        ({"window_hours": 0}, "METRIC_WINDOW_OUT_OF_RANGE", "window_hours"),
        ({"window_hours": 721}, "METRIC_WINDOW_OUT_OF_RANGE", "window_hours"),
    ],
)
def test_the_store_refuses_what_no_metric_can_be(store, organization, changes, code, field):
    with pytest.raises(InvalidError) as refused:
        _metric(store, organization, **changes)
    assert (refused.value.code, refused.value.field) == (getattr(ErrorCode, code), field)
    assert store.list_metrics(organization.id) == []


def test_an_unknown_organization_has_no_metric(store):
    with pytest.raises(NotFoundError) as missing:
        store.put_metric(
            "org_0000000000000000", "m", name="M", event="e", kind=MetricKind.COUNT,
            window_hours=1, better=Better.HIGHER,
        )  # fmt: skip
    assert missing.value.code == ErrorCode.ORGANIZATION_NOT_FOUND


def test_every_write_is_audited_and_restorable(store, organization):
    _metric(store, organization, actor=Actor.ADMIN_API)
    first = store.get_metric(organization.id, "checkout")
    _metric(store, organization, name="Checkouts", window_hours=24, actor=Actor.DASHBOARD)
    change = store.list_audit(organization.id)[0]
    assert (change.action, change.actor, change.target) == (
        "metric.put", "dashboard", f"metric:{organization.id}/checkout",
    )  # fmt: skip
    assert (change.before["name"], change.after["name"]) == ("Checkout", "Checkouts")
    assert change.after["windowHours"] == 24
    restored = store.restore(change.id, actor=Actor.ADMIN_API)
    assert (restored.action, restored.restored_from) == ("restore", change.id)
    assert store.get_metric(organization.id, "checkout") == first

    store.delete_metric(organization.id, "checkout", actor=Actor.ADMIN_API)
    deletion = store.list_audit(organization.id)[0]
    assert (deletion.action, deletion.after) == ("metric.deleted", None)
    store.restore(deletion.id)
    assert store.get_metric(organization.id, "checkout") == first

    creation = next(r for r in store.list_audit(organization.id) if r.before is None)
    store.restore(creation.id)  # undoing the creation deletes the metric
    assert store.get_metric(organization.id, "checkout") is None
    with pytest.raises(ConflictError) as nothing:
        store.restore(creation.id)
    assert nothing.value.code == ErrorCode.METRIC_STILL_ABSENT


def test_a_flag_follows_metrics_of_its_organization_only(store, organization, environment):
    store.put_flag(environment.id, "f", True, False, [])
    _metric(store, organization)
    _metric(store, organization, "errors", MetricKind.COUNT, event="error")
    assert store.flag_metrics(environment.id, "f") == []
    kept = store.set_flag_metrics(environment.id, "f", ["errors", "checkout", "errors"])
    assert kept == ["errors", "checkout"] == store.flag_metrics(environment.id, "f")
    with pytest.raises(InvalidError) as unknown:
        store.set_flag_metrics(environment.id, "f", ["checkout", "nope"])
    assert (unknown.value.code, unknown.value.field) == (ErrorCode.UNKNOWN_METRIC, "metrics")
    assert unknown.value.details["index"] == 1
    other = store.create_organization("Other", Plan.PRO)
    store.put_metric(
        other.id, "theirs", name="Theirs", event="e", kind=MetricKind.SUM, window_hours=1,
        better=Better.LOWER,
    )  # fmt: skip
    with pytest.raises(InvalidError):
        store.set_flag_metrics(environment.id, "f", ["theirs"])
    with pytest.raises(NotFoundError) as no_flag:
        store.set_flag_metrics(environment.id, "g", ["checkout"])
    assert no_flag.value.code == ErrorCode.FLAG_NOT_FOUND
    assert store.flag_metrics(environment.id, "f") == ["errors", "checkout"]


def test_follows_are_audited_restored_and_dropped_with_the_flag_or_metric(
    store, organization, environment
):
    store.put_flag(environment.id, "f", True, False, [])
    _metric(store, organization)
    _metric(store, organization, "errors", MetricKind.COUNT, event="error")
    store.set_flag_metrics(environment.id, "f", ["checkout"])
    store.set_flag_metrics(environment.id, "f", ["errors"], actor=Actor.ADMIN_API)
    change = store.list_audit(organization.id)[0]
    assert (change.action, change.target, change.before, change.after) == (
        "flagMetrics.put", f"flagMetrics:{environment.id}/f", {"metrics": ["checkout"]},
        {"metrics": ["errors"]},
    )  # fmt: skip
    store.restore(change.id)
    assert store.flag_metrics(environment.id, "f") == ["checkout"]

    store.set_flag_metrics(environment.id, "f", ["checkout", "errors"])
    store.delete_metric(organization.id, "checkout")  # its follows go with it
    assert store.flag_metrics(environment.id, "f") == ["errors"]
    deleted, dropped = store.list_audit(organization.id)[:2]  # newest first
    assert (deleted.action, deleted.target) == (
        "metric.deleted", f"metric:{organization.id}/checkout",
    )  # fmt: skip
    assert (dropped.action, dropped.target, dropped.before, dropped.after) == (
        "metric.deleted", f"flagMetrics:{environment.id}/f", {"metrics": ["checkout", "errors"]},
        {"metrics": ["errors"]},
    )  # fmt: skip
    with pytest.raises(ConflictError) as gone:
        store.restore(change.id)  # it would follow a metric deleted since
    assert (gone.value.code, gone.value.reason) == (
        ErrorCode.METRIC_GONE, ConflictReason.NOT_RESTORABLE,
    )  # fmt: skip
    store.restore(deleted.id)  # the metric back, then what the deletion took from the flag
    assert store.flag_metrics(environment.id, "f") == ["errors"]
    store.restore(dropped.id)
    assert store.flag_metrics(environment.id, "f") == ["checkout", "errors"]
    store.delete_metric(organization.id, "checkout")

    store.set_flag_metrics(environment.id, "f", ["errors"])
    store.delete_flag(environment.id, "f")
    store.put_flag(environment.id, "f", True, False, [])
    assert store.flag_metrics(environment.id, "f") == []


def test_metric_follows_include_the_guardrails_of_guarding_rollouts(
    store, organization, environment
):
    checkout = _metric(store, organization)
    errors = _metric(store, organization, "errors", MetricKind.COUNT, event="error")
    store.put_flag(environment.id, "a", True, False, [])
    store.set_flag_metrics(environment.id, "a", ["errors", "checkout"])
    _guarded(store, environment, "b", ("failureRate", "metric:checkout", "metric:errors"),
             (("metric:errors", 3.0),))  # fmt: skip
    _guarded(store, environment, "c", ("metric:checkout",))
    store.set_flag_metrics(environment.id, "c", ["checkout"])  # followed and guarded: once
    follows = store.metric_follows()
    assert [(f.flag_key, f.metric.key) for f in follows] == [
        ("a", "checkout"), ("a", "errors"), ("b", "checkout"), ("b", "errors"), ("c", "checkout"),
    ]  # fmt: skip
    assert follows[0] == MetricFollow(organization.id, environment.id, "a", checkout)
    assert follows[1].metric == errors
    store.stop_rollout(environment.id, "b")
    assert [(f.flag_key, f.metric.key) for f in store.metric_follows()] == [
        ("a", "checkout"), ("a", "errors"), ("c", "checkout"),
    ]  # fmt: skip


def test_a_guarded_metric_is_neither_deleted_nor_changes_kind(store, organization, environment):
    _metric(store, organization)
    _guarded(store, environment)
    with pytest.raises(ConflictError) as in_use:
        store.delete_metric(organization.id, "checkout")
    assert (in_use.value.code, in_use.value.reason) == (
        ErrorCode.METRIC_IN_USE, ConflictReason.METRIC_IN_USE,
    )  # fmt: skip
    assert in_use.value.details == {
        "metric": "checkout", "flag": "f", "environment": environment.key,
    }  # fmt: skip
    with pytest.raises(ConflictError) as kind:
        _metric(store, organization, kind=MetricKind.COUNT)
    assert kind.value.code == ErrorCode.METRIC_KIND_IN_USE
    _metric(store, organization, name="Checkouts", window_hours=24)  # all but its kind may change
    store.decide_rollout(environment.id, "f", 0, RolloutAction.HELD, "waited too long", None)
    with pytest.raises(ConflictError):  # a held rollout may run again: it still guards
        store.delete_metric(organization.id, "checkout")
    store.stop_rollout(environment.id, "f")
    stop = store.list_audit(organization.id)[0]
    store.delete_metric(organization.id, "checkout")
    with pytest.raises(ConflictError) as gone:
        store.restore(stop.id)  # the rollout would guard on a metric deleted since
    assert gone.value.code == ErrorCode.METRIC_GONE


def test_a_rollout_is_not_restored_onto_a_metric_of_another_kind(store, organization, environment):
    """A stopped rollout guarded a conversion (its tolerance in points); the metric became a
    sum since (allowed: nothing guarded on it). Restoring the rollout would read 1 point as 1
    of the sum's unit: refused, until the metric is a conversion again."""
    _metric(store, organization)
    _guarded(store, environment)
    store.stop_rollout(environment.id, "f")
    stop = store.list_audit(organization.id)[0]
    _metric(store, organization, kind=MetricKind.SUM)
    with pytest.raises(ConflictError) as changed:
        store.restore(stop.id)
    assert (changed.value.code, changed.value.reason) == (
        ErrorCode.METRIC_KIND_CHANGED, ConflictReason.NOT_RESTORABLE,
    )  # fmt: skip
    assert (changed.value.details["was"], changed.value.details["kind"]) == ("conversion", "sum")
    assert store.get_rollout(environment.id, "f") is None
    _metric(store, organization, name="Checkouts again")  # a conversion once more
    store.restore(stop.id)
    assert store.get_rollout(environment.id, "f").plan.tolerances == {"metric:checkout": 1.0}


def test_a_rollout_guards_only_on_metrics_of_its_organization(store, organization, environment):
    with pytest.raises(InvalidError) as unknown:
        _guarded(store, environment, guardrails=("failureRate", "metric:checkout"))
    assert (unknown.value.code, unknown.value.field) == (
        ErrorCode.UNKNOWN_METRIC_GUARDRAIL, "guardrails",
    )  # fmt: skip
    assert unknown.value.details["index"] == 1
    assert store.get_rollout(environment.id, "f") is None


@pytest.mark.parametrize("kind", [MetricKind.COUNT, MetricKind.SUM, MetricKind.MEAN])
def test_a_count_sum_or_mean_guardrail_needs_its_tolerance(store, organization, environment, kind):
    _metric(store, organization, "m", kind)
    with pytest.raises(InvalidError) as required:
        _guarded(store, environment, guardrails=("metric:m",))
    assert (required.value.code, required.value.field) == (
        ErrorCode.METRIC_TOLERANCE_REQUIRED, "tolerances",
    )  # fmt: skip
    started = _guarded(store, environment, guardrails=("metric:m",),
                       tolerances=(("metric:m", 2.5),))  # fmt: skip
    assert started.plan.tolerances == {"metric:m": 2.5}


def test_a_conversion_guardrail_defaults_to_one_point_and_at_most_a_hundred(
    store, organization, environment
):
    _metric(store, organization)
    assert _guarded(store, environment).plan.tolerances == {"metric:checkout": 1.0}
    with pytest.raises(InvalidError) as too_wide:
        _guarded(store, environment, tolerances=(("metric:checkout", 100.5),))
    assert (too_wide.value.code, too_wide.value.field) == (
        ErrorCode.METRIC_TOLERANCE_OUT_OF_RANGE, "tolerances",
    )  # fmt: skip
