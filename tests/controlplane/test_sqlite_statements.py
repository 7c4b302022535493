"""A transaction on SQLite leaves no statement open behind it.

SQLite keeps an unfinished statement's read snapshot past ``COMMIT``: the connection stays in
a read transaction, and once another connection has committed, its next write fails at once
with "database is locked" (``SQLITE_BUSY_SNAPSHOT``: the busy timeout does not wait it out),
which the API answers 503. The dashboard's audit page judged a segment's restore and kept the
refusal (``restore_refusals``): the check had stopped reading its flags at the first one naming
the segment, and the refusal's traceback kept that cursor alive until a garbage collection.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from flagsight_core import SegmentRule, StaticRule

from api.controlplane.errors import ConflictError
from api.controlplane.model import Plan
from api.controlplane.sqlite_store import SqliteControlPlaneStore


@pytest.fixture
def no_collection() -> Iterator[None]:
    """No garbage collection while the test runs: nothing frees a leftover statement for it."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_judging_a_refused_restore_leaves_the_next_write_free(
    tmp_path: Path, no_collection: None
) -> None:
    path = tmp_path / "controlplane.sqlite3"
    store = SqliteControlPlaneStore(path)
    organization = store.create_organization("Acme", Plan.PRO)
    environment = store.create_environment(organization.id, "production", "Production", True)
    store.put_segment(organization.id, "beta", ["u1"])
    store.put_flag(environment.id, "a-uses-beta", True, False, [SegmentRule("beta")])
    store.put_flag(environment.id, "b-after-it", True, False, [StaticRule()])
    [created] = [r for r in store.list_audit(organization.id) if r.target.endswith("/beta")]

    refusals = store.restore_refusals([created])  # undoing the creation: the segment is used
    assert isinstance(refusals[created.id], ConflictError)

    other = SqliteControlPlaneStore(path)  # another worker commits meanwhile
    done = threading.Thread(target=other.put_flag, args=(environment.id, "c", True, False, []))
    done.start()
    done.join()
    other.close()
    store.put_flag(environment.id, "d", True, False, [StaticRule()])  # this thread writes next
    assert store.get_flag(environment.id, "d") is not None
    store.close()
