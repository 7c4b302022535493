"""The demo data ``make run`` starts with: one organization, one environment, three flags.

``seed_demo`` only creates what is missing, so running it again changes nothing (and does not
undo edits made through the admin API since). The demo API key is created the first time;
its plaintext is returned then, for the caller to print and keep (``flagsight init`` keeps it
in ``$FLAGSIGHT_DATA_DIR/demo-api-key``). Given that kept plaintext back, and while it is
still a live demo key, ``seed_demo`` keeps the key: a restart must not break a client of the
key printed before. A key that was revoked, or that nobody kept, is replaced.
"""

from __future__ import annotations

from dataclasses import dataclass

from flagsight_core import Rule, rule_from_json

from api.controlplane.cache import ConfigCache
from api.controlplane.model import Organization, Plan
from api.controlplane.store import ControlPlaneStore

DEMO_ORGANIZATION = "Demo"
DEMO_ENVIRONMENT = "production"
DEMO_KEY_NAME = "demo"
DEMO_SEGMENT = "beta-testers"
DEMO_SEGMENT_MEMBERS = ("alice", "bob", "carol", "user-1", "user-2", "user-3")
DEMO_FLAGS: dict[str, list[dict[str, object]]] = {
    "new-checkout": [{"type": "PERCENTAGE", "percentage": 50, "value": True}],
    "beta-banner": [
        {"type": "SEGMENT", "segment": DEMO_SEGMENT, "value": True},
        {"type": "PERCENTAGE", "percentage": 10, "value": True},
    ],
    "dark-mode": [{"type": "STATIC", "value": True}],
}


@dataclass(frozen=True)
class DemoSeed:
    """What the demo consists of; ``api_key`` is the plaintext when it was just made or the
    caller's kept one is still live (``None``: a live key exists whose plaintext nobody has)."""

    organization_id: str
    environment_id: str
    api_key_id: str
    api_key: str | None
    new_key: bool = False


def _demo_organization(store: ControlPlaneStore) -> Organization:
    for organization in store.list_organizations():
        if organization.name == DEMO_ORGANIZATION:
            return organization
    return store.create_organization(DEMO_ORGANIZATION, Plan.PRO)


def _rules(raw: list[dict[str, object]]) -> list[Rule]:
    return [rule_from_json(rule) for rule in raw]


def seed_demo(
    store: ControlPlaneStore, *, rotate_key: bool = False, kept_key: str | None = None
) -> DemoSeed:
    """Create the demo where missing; keep ``kept_key`` while it is a live demo key, else make
    one; with ``rotate_key``, revoke every demo key and make a new one."""
    organization = _demo_organization(store)
    environment = store.find_environment(organization.id, DEMO_ENVIRONMENT)
    if environment is None:
        environment = store.create_environment(
            organization.id, DEMO_ENVIRONMENT, "Production", insights_enabled=True
        )
    if store.get_segment(organization.id, DEMO_SEGMENT) is None:
        store.put_segment(organization.id, DEMO_SEGMENT, DEMO_SEGMENT_MEMBERS)
    for key, rules in DEMO_FLAGS.items():
        if store.get_flag(environment.id, key) is None:
            store.put_flag(environment.id, key, True, False, _rules(rules))
    existing = [k for k in store.list_api_keys(environment.id) if k.name == DEMO_KEY_NAME]
    kept = _live_key_id(store, kept_key, {key.id for key in existing})
    if kept is not None and not rotate_key:
        return DemoSeed(organization.id, environment.id, kept, kept_key)
    if existing and kept_key is None and not rotate_key:
        return DemoSeed(organization.id, environment.id, existing[0].id, None)
    for key in existing:
        store.revoke_api_key(key.id)
    created = store.create_api_key(environment.id, DEMO_KEY_NAME)
    return DemoSeed(
        organization.id, environment.id, created.record.id, created.plaintext, new_key=True
    )


def _live_key_id(store: ControlPlaneStore, plaintext: str | None, demo_ids: set[str]) -> str | None:
    """The id of the demo key whose plaintext this is, if it is live."""
    if not plaintext:
        return None
    context = ConfigCache(store).authenticate(plaintext)
    return context.key_id if context is not None and context.key_id in demo_ids else None
