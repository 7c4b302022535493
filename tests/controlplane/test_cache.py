"""ConfigCache: lookups without I/O, reloads on version change, unchanged segments reused."""

from __future__ import annotations

import time

import pytest
from flagsight_core import Flag, PercentageRule, SegmentRule

from api.controlplane.cache import ConfigCache, EnvironmentConfig
from api.controlplane.model import Plan
from api.observability.metrics import Metrics
from tests.support.timing import PROMPTLY_S


def wait_for(condition, timeout_s: float = PROMPTLY_S) -> float:
    """Seconds until ``condition()`` held; fails after ``timeout_s``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, "not within the time limit"
        time.sleep(0.01)
    return time.monotonic() - started


@pytest.fixture
def cache(store):
    cache = ConfigCache(store, poll_interval_s=0.05)
    yield cache
    cache.stop()


def test_environment_config(store, organization, environment, cache) -> None:
    store.put_segment(organization.id, "beta", ["a", "b"])
    store.put_flag(environment.id, "f", True, False, [SegmentRule("beta"), PercentageRule(10.0)])
    assert cache.refresh() is True
    config = cache.environment(environment.id)
    assert isinstance(config, EnvironmentConfig)
    assert (config.id, config.key, config.name, config.organization_id, config.insights_enabled) == (
        environment.id, "production", "Production", organization.id, True,
    )  # fmt: skip
    assert config.flags == {
        "f": Flag("f", True, False, (SegmentRule("beta"), PercentageRule(10.0)))
    }
    assert set(config.segments) == {"beta"} and "a" in config.segments["beta"]
    assert cache.organization(organization.id) == organization
    assert cache.environment("env_0000000000000000") is None
    assert cache.version == store.config_version()
    with pytest.raises(TypeError):
        config.flags["g"] = Flag("g", True)  # type: ignore[index]


def test_refresh_only_reloads_when_the_version_moved(store, organization, cache) -> None:
    assert cache.refresh() is False
    store.update_organization(organization.id, plan=Plan.TEAM)
    assert cache.organization(organization.id).plan is Plan.PRO  # not yet
    assert cache.refresh() is True
    assert cache.organization(organization.id).plan is Plan.TEAM


def test_authenticate_and_revoke(store, environment, cache) -> None:
    created = store.create_api_key(environment.id, "k")
    assert cache.authenticate(created.plaintext) is None  # before refresh
    cache.refresh()
    context = cache.authenticate(created.plaintext)
    assert (context.key_id, context.environment_id, context.organization_id) == (
        created.record.id, environment.id, environment.organization_id,
    )  # fmt: skip
    assert cache.authenticate(created.plaintext + "x") is None
    assert cache.authenticate("") is None
    store.revoke_api_key(created.record.id)
    cache.refresh()
    assert cache.authenticate(created.plaintext) is None


def test_caller_follows_the_snapshot(store, organization, environment, cache) -> None:
    """The key, its environment and organization, remembered until the next reload."""
    created = store.create_api_key(environment.id, "k")
    assert cache.caller(created.plaintext) is None  # before refresh
    cache.refresh()
    caller = cache.caller(created.plaintext)
    assert caller.key == cache.authenticate(created.plaintext)
    assert caller.environment is cache.environment(environment.id)
    assert caller.organization == organization
    assert caller.hard_limit == organization.hard_limit
    assert cache.caller(created.plaintext) is caller
    assert cache.caller(created.plaintext + "x") is None
    store.update_organization(organization.id, plan=Plan.TEAM)
    cache.refresh()
    assert cache.caller(created.plaintext).organization.plan is Plan.TEAM
    assert cache.caller(created.plaintext).hard_limit == 11_000_000
    store.revoke_api_key(created.record.id)
    cache.refresh()
    assert cache.caller(created.plaintext) is None


def test_remembered_key_hashes_are_bounded(store, environment, cache, monkeypatch) -> None:
    """Keys are hashed once each; the memo starts over when full, and keys keep working."""
    monkeypatch.setattr("api.controlplane.cache.KEY_HASHES_KEPT", 2)
    keys = [store.create_api_key(environment.id, f"k{i}") for i in range(5)]
    cache.refresh()
    for _ in range(2):
        for key in keys:
            assert cache.authenticate(key.plaintext).key_id == key.record.id
            assert len(cache._key_hashes) <= 2
    for _ in range(50):
        assert cache.authenticate(f"fsk_unknown{_}") is None
    assert len(cache._key_hashes) <= 2
    for _ in range(2):
        for key in keys:
            assert cache.caller(key.plaintext).key.key_id == key.record.id
            assert len(cache._snapshot.callers) <= 2


def test_another_worker_sees_a_change_within_a_second(
    open_store, organization, environment
) -> None:
    """On PostgreSQL the two stores are two hosts: each has its own pool."""
    writer = open_store()
    worker_store = open_store()
    worker = ConfigCache(worker_store, poll_interval_s=0.25)
    worker.start()
    try:
        created = writer.create_api_key(environment.id)
        wait_for(lambda: worker.authenticate(created.plaintext) is not None)
        writer.put_flag(environment.id, "late", True, False, [])
        wait_for(lambda: "late" in worker.environment(environment.id).flags)
        writer.revoke_api_key(created.record.id)
        wait_for(lambda: worker.authenticate(created.plaintext) is None)
    finally:
        worker.stop()
    assert worker._thread is None


def test_unchanged_segments_are_not_rebuilt(store, organization, environment, cache) -> None:
    store.put_segment(organization.id, "big", [f"u{i}" for i in range(50_000)])
    store.put_segment(organization.id, "small", ["x"])
    cache.refresh()
    built = cache.segments_built
    big = cache.environment(environment.id).segments["big"]

    store.put_flag(environment.id, "f", True, False, [])
    store.put_segment(organization.id, "small", ["y"])
    cache.refresh()
    segments = cache.environment(environment.id).segments
    assert cache.segments_built == built + 1  # only "small"
    assert segments["big"] is big
    assert "y" in segments["small"] and "x" not in segments["small"]

    store.delete_segment(organization.id, "small")
    cache.refresh()
    assert set(cache.environment(environment.id).segments) == {"big"}
    assert cache.segments_built == built + 1


def test_store_sends_members_only_of_changed_segments(store, organization) -> None:
    store.put_segment(organization.id, "a", ["1"])
    store.put_segment(organization.id, "b", ["2"])
    first = store.read_config({})
    assert set(first.segment_members) == {(organization.id, "a"), (organization.id, "b")}
    store.put_segment(organization.id, "b", ["3"])
    second = store.read_config(first.segment_versions)
    assert second.segment_members == {(organization.id, "b"): ["3"]}


def test_environment_version_tracks_its_answers(store, organization, environment, cache) -> None:
    other = store.create_environment(organization.id, "staging")
    cache.refresh()

    def versions():
        return (
            cache.environment(environment.id).version,
            cache.environment(other.id).version,
        )

    first = versions()
    store.create_api_key(environment.id)  # keys do not change answers
    cache.refresh()
    assert versions() == first
    store.put_flag(environment.id, "f", True, False, [])
    cache.refresh()
    second = versions()
    assert second[0] > first[0] and second[1] == first[1]
    store.delete_flag(environment.id, "f")
    cache.refresh()
    third = versions()
    assert third[0] > second[0] and third[1] == second[1]
    store.put_segment(organization.id, "s", [])
    cache.refresh()
    fourth = versions()
    assert fourth[0] > third[0] and fourth[1] > third[1]
    store.update_organization(organization.id, plan=Plan.FREE)
    cache.refresh()
    assert all(after > before for after, before in zip(versions(), fourth, strict=True))


def test_metrics_count_reloads(store, organization) -> None:
    metrics = Metrics()
    cache = ConfigCache(store, metrics=metrics)
    reloads = metrics.registry.get_sample_value("flagsight_config_reloads_total")
    assert reloads == 1.0
    store.update_organization(organization.id, plan=Plan.TEAM)
    cache.refresh()
    assert metrics.registry.get_sample_value("flagsight_config_reloads_total") == 2.0
    assert metrics.registry.get_sample_value("flagsight_config_version") == store.config_version()


def test_poll_survives_a_failing_read(store, organization) -> None:
    cache = ConfigCache(store, poll_interval_s=0.02)
    calls = {"n": 0}
    real = store.config_version

    def flaky() -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("database is locked")
        return real()

    store.config_version = flaky  # type: ignore[method-assign]
    cache.start()
    try:
        store.update_organization(organization.id, plan=Plan.TEAM)
        wait_for(lambda: cache.organization(organization.id).plan is Plan.TEAM)
    finally:
        cache.stop()
    assert calls["n"] >= 2
