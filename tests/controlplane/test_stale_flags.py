"""``flag.stale`` once per flag and transition, decided by the store on both backends."""

from __future__ import annotations

import json

from api.controlplane.changes import EventType


def _events(store) -> list[dict]:
    due = store.due_deliveries(10**10, limit=1000)
    for delivery in due:
        store.record_delivery(delivery.seq, 0.0, error=None, retry_at=None)
    return [json.loads(delivery.body) for delivery in due]


def test_each_transition_is_announced_once(store, organization, environment) -> None:
    store.create_webhook(organization.id, "https://hooks.example/x", [str(EventType.FLAG_STALE)])
    doc = {"stage": "stale", "reasons": ["expired"]}
    key = (environment.id, "checkout")
    assert store.announce_stale_flags({key: doc}) == [key]
    [event] = _events(store)
    assert event["type"] == "flag.stale"
    assert event["data"] == {
        "environmentId": environment.id,
        "environmentKey": "production",
        "flagKey": "checkout",
        "lifecycle": doc,
    }
    assert store.announce_stale_flags({key: doc}) == []  # a run repeated: nothing twice
    assert _events(store) == []
    assert store.announce_stale_flags({}) == []  # no longer stale: forgotten
    assert store.announce_stale_flags({key: doc}) == [key]  # stale again: announced again
    assert len(_events(store)) == 1


def test_flags_of_unknown_environments_are_left_out(store) -> None:
    assert store.announce_stale_flags({("env_0000000000000000", "x"): {}}) == []
