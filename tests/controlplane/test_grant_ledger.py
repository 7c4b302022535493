"""The ledger of local grants on both backends (contract section 4): a grant is given back
once, never more than its unreported part, and ids given back are never reported after."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from api.controlplane.model import Organization
from api.controlplane.sql_grants import GIVE_BACK_WINDOW_S, GrantState, GrantTooOld, LocalGrant
from api.controlplane.sql_store import SqlControlPlaneStore

NOW = 1_800_000_000.0


def a_grant(organization: Organization, name: str = "a", count: int = 1_000) -> LocalGrant:
    return LocalGrant(f"prefix-{name}", organization.id, count, int(NOW) - 60)


def test_a_grant_is_given_back_once(store: SqlControlPlaneStore, organization) -> None:
    grant = a_grant(organization)
    assert store.give_back_grant(grant, 400, NOW) is None
    assert store.give_back_grant(grant, 400, NOW) == GrantState(1_000, 0, 400)
    assert store.give_back_grant(grant, 1, NOW) == GrantState(1_000, 0, 400)


def test_never_more_than_the_unreported_part(store: SqlControlPlaneStore, organization) -> None:
    grant = a_grant(organization)
    assert store.note_grants_reported([(grant, 700)]) is None
    assert store.note_grants_reported([(grant, 650)]) is None  # a late batch: the highest stays
    assert store.give_back_grant(grant, 301, NOW) == GrantState(1_000, 700, None)
    assert store.give_back_grant(grant, 300, NOW) is None


def test_ids_given_back_are_not_reported_after(store: SqlControlPlaneStore, organization) -> None:
    grant, other = a_grant(organization), a_grant(organization, "b")
    assert store.give_back_grant(grant, 300, NOW) is None
    assert store.note_grants_reported([(grant, 700)]) is None  # ids 0..699: not given back
    refused = store.note_grants_reported([(other, 5), (grant, 701)])
    assert refused == (grant, GrantState(1_000, 700, 300))
    # all or nothing: the other grant's reach was not recorded either
    assert store.give_back_grant(other, 1_000, NOW) is None


def test_a_grant_past_the_window_cannot_be_given_back_and_old_rows_go(
    store: SqlControlPlaneStore, organization
) -> None:
    old = LocalGrant("prefix-old", organization.id, 10, int(NOW - GIVE_BACK_WINDOW_S) + 5)
    assert store.give_back_grant(old, 10, NOW) is None
    later = NOW + 10
    with pytest.raises(GrantTooOld):
        store.give_back_grant(old, 10, later)
    assert store.give_back_grant(a_grant(organization), 1, later) is None  # deletes the old row
    rows = store._backend.fetch("SELECT id_prefix FROM local_grants ORDER BY id_prefix")
    assert [row[0] for row in rows] == ["prefix-a"]


def test_racing_give_backs_from_two_hosts_record_one(
    open_store: Callable[[], SqlControlPlaneStore], organization
) -> None:
    """Eight give-backs of one grant at once, from four stores (workers or hosts): one wins."""
    stores = [open_store() for _ in range(4)]
    grant = a_grant(organization)
    answers: list[GrantState | None] = []
    start = threading.Barrier(8)

    def give_back(store: SqlControlPlaneStore) -> None:
        start.wait()
        answers.append(store.give_back_grant(grant, 1_000, NOW))

    threads = [threading.Thread(target=give_back, args=(s,)) for s in stores * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers.count(None) == 1
    assert sorted(map(str, answers))[:7] == [str(GrantState(1_000, 0, 1_000))] * 7


def test_an_undone_give_back_can_be_made_again(store: SqlControlPlaneStore, organization) -> None:
    grant = a_grant(organization)
    assert store.give_back_grant(grant, 10, NOW) is None
    store.undo_give_back(grant)
    assert store.give_back_grant(grant, 10, NOW) is None
