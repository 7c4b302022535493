"""seed_demo: the demo tenant, created once; its key's plaintext returned only when made."""

from __future__ import annotations

from flagsight_core import evaluate

from api.cli.demo_seed import seed_demo
from api.controlplane.cache import ConfigCache
from api.controlplane.model import Plan


def test_seed_creates_the_demo(store) -> None:
    seed = seed_demo(store)
    organization = store.get_organization(seed.organization_id)
    assert (organization.name, organization.plan) == ("Demo", Plan.PRO)
    environment = store.get_environment(seed.environment_id)
    assert (environment.key, environment.insights_enabled) == ("production", True)
    assert seed.api_key is not None and seed.api_key.startswith("fsk_")
    cache = ConfigCache(store)
    assert cache.authenticate(seed.api_key).key_id == seed.api_key_id
    config = cache.environment(seed.environment_id)
    assert sorted(config.flags) == ["beta-banner", "dark-mode", "new-checkout"]
    assert evaluate(config.flags["dark-mode"], "anyone", config.segments).value is True
    assert (
        evaluate(config.flags["beta-banner"], "alice", config.segments).matched_rule_type
        == "SEGMENT"
    )
    rollout = [
        evaluate(config.flags["new-checkout"], f"u{i}", config.segments).value for i in range(2000)
    ]
    assert 850 < sum(rollout) < 1150


def test_seed_is_idempotent(store) -> None:
    first = seed_demo(store)
    version = store.config_version()
    second = seed_demo(store)
    assert second.api_key is None
    assert (second.organization_id, second.environment_id, second.api_key_id) == (
        first.organization_id, first.environment_id, first.api_key_id,
    )  # fmt: skip
    assert store.config_version() == version  # nothing written
    assert len(store.list_organizations()) == 1
    assert len(store.list_api_keys(first.environment_id)) == 1


def test_seed_keeps_edits_and_restores_what_was_deleted(store) -> None:
    first = seed_demo(store)
    store.put_flag(first.environment_id, "dark-mode", False, False, [])
    store.delete_flag(first.environment_id, "new-checkout")
    seed_demo(store)
    assert store.get_flag(first.environment_id, "dark-mode").enabled is False
    assert store.get_flag(first.environment_id, "new-checkout") is not None


def test_rotate_key_revokes_the_old_demo_key(store) -> None:
    first = seed_demo(store)
    rotated = seed_demo(store, rotate_key=True)
    assert rotated.api_key not in (None, first.api_key)
    cache = ConfigCache(store)
    assert cache.authenticate(first.api_key) is None
    assert cache.authenticate(rotated.api_key).key_id == rotated.api_key_id
