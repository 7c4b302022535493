"""A transaction on SQLite leaves no statement open behind it.

SQLite keeps an unfinished statement's read snapshot past ``COMMIT``: the connection stays in
a read transaction, and once another connection has committed, its next write fails at once
with "database is locked" (``SQLITE_BUSY_SNAPSHOT``: the busy timeout does not wait it out),
which the API answers 503. The dashboard's audit page judged a segment's restore and kept the
refusal (``restore_refusals``): the check had stopped reading its flags at the first one naming
the segment, and the refusal's traceback kept that cursor alive until a garbage collection. A
refused deletion of the segment (409) did the same for as long as its error lived.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from flagsight_core import SegmentRule, StaticRule

from api.controlplane.errors import ConflictError, ConflictReason
from api.controlplane.model import Plan
from api.controlplane.sqlite_store import SqliteControlPlaneStore


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[SqliteControlPlaneStore, str, str]]:
    """A store, its organization's id and its environment's id: segment ``beta`` is named by
    the flag ``a-uses-beta``, and another flag comes after it."""
    store = SqliteControlPlaneStore(tmp_path / "controlplane.sqlite3")
    organization = store.create_organization("Acme", Plan.PRO)
    environment = store.create_environment(organization.id, "production", "Production", True)
    store.put_segment(organization.id, "beta", ["u1"])
    store.put_flag(environment.id, "a-uses-beta", True, False, [SegmentRule("beta")])
    store.put_flag(environment.id, "b-after-it", True, False, [StaticRule()])
    yield store, organization.id, environment.id
    store.close()


def another_worker_writes(store: SqliteControlPlaneStore, environment_id: str) -> None:
    """A write committed by another connection (another worker) meanwhile."""
    other = SqliteControlPlaneStore(store.backend.path)
    done = threading.Thread(target=other.put_flag, args=(environment_id, "c", True, False, []))
    done.start()
    done.join()
    other.close()


@pytest.fixture
def no_collection() -> Iterator[None]:
    """No garbage collection while the test runs: nothing frees a leftover statement for it."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_judging_a_refused_restore_leaves_the_next_write_free(
    world: tuple[SqliteControlPlaneStore, str, str], no_collection: None
) -> None:
    store, organization_id, environment_id = world
    [created] = [r for r in store.list_audit(organization_id) if r.target.endswith("/beta")]
    refusals = store.restore_refusals([created])  # undoing the creation: the segment is used
    assert isinstance(refusals[created.id], ConflictError)
    another_worker_writes(store, environment_id)
    store.put_flag(environment_id, "d", True, False, [StaticRule()])  # this thread writes next
    assert store.get_flag(environment_id, "d") is not None


def test_a_refused_deletion_kept_leaves_the_next_write_free(
    world: tuple[SqliteControlPlaneStore, str, str], no_collection: None
) -> None:
    store, organization_id, environment_id = world
    with pytest.raises(ConflictError) as refused:  # the 409: a flag names the segment
        store.delete_segment(organization_id, "beta")
    another_worker_writes(store, environment_id)
    store.put_flag(environment_id, "d", True, False, [StaticRule()])
    assert store.get_flag(environment_id, "d") is not None
    assert refused.value.reason is ConflictReason.SEGMENT_IN_USE
