"""The control-plane store on both backends: records, rules of the model, the config version,
secrets, concurrent writers (threads, forked processes, and other stores on the database)."""

from __future__ import annotations

import hashlib
import multiprocessing
import re
import threading

import pytest
from flagsight_core import PercentageRule, SegmentRule, StaticRule

from api.controlplane.errors import (
    ConflictError,
    ConflictReason,
    InvalidError,
    NotFoundError,
    Resource,
)
from api.controlplane.model import Plan
from api.controlplane.sqlite_store import SqliteControlPlaneStore
from api.controlplane.store import ErrorCode


def test_ids_have_their_prefix_and_16_hex_digits(store, organization, environment) -> None:
    key = store.create_api_key(environment.id, "k")
    assert re.fullmatch(r"org_[0-9a-f]{16}", organization.id)
    assert re.fullmatch(r"env_[0-9a-f]{16}", environment.id)
    assert re.fullmatch(r"key_[0-9a-f]{16}", key.record.id)
    assert re.fullmatch(r"fsk_[A-Za-z0-9_-]{43}", key.plaintext)


def test_sqlite_journal_is_wal_and_busy_timeout_set(store_path) -> None:
    conn = SqliteControlPlaneStore(store_path).backend.connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000


def test_organization_limits(store) -> None:
    assert store.create_organization("F", Plan.FREE).monthly_evaluation_limit == 10_000
    org = store.create_organization("E", Plan.ENTERPRISE, 5)
    assert store.get_organization(org.id) == org
    assert (
        store.update_organization(org.id, monthly_evaluation_limit=9).monthly_evaluation_limit == 9
    )
    assert store.update_organization(org.id, plan=Plan.TEAM).monthly_evaluation_limit == 10_000_000
    moved = store.update_organization(org.id, plan=Plan.ENTERPRISE)  # keeps its quota
    assert (moved.plan, moved.monthly_evaluation_limit) == (Plan.ENTERPRISE, 10_000_000)
    with pytest.raises(InvalidError) as error:
        store.create_organization("N", Plan.ENTERPRISE)
    assert (error.value.code, error.value.field) == (
        ErrorCode.MONTHLY_LIMIT_REQUIRED,
        "monthly_evaluation_limit",
    )
    with pytest.raises(InvalidError) as error:
        store.create_organization("P", Plan.PRO, 5)
    assert error.value.code is ErrorCode.MONTHLY_LIMIT_FIXED_BY_PLAN
    assert error.value.details == {
        "field": "monthly_evaluation_limit", "value": 5, "plan": "pro", "plan_limit": 1_000_000,
    }  # fmt: skip
    with pytest.raises(InvalidError) as error:
        store.create_organization("E", Plan.ENTERPRISE, 0)
    assert (error.value.code, error.value.details["maximum"]) == (
        ErrorCode.MONTHLY_LIMIT_OUT_OF_RANGE,
        10**15,
    )
    with pytest.raises(NotFoundError) as missing:
        store.update_organization("org_0000000000000000", plan=Plan.PRO)
    assert (missing.value.code, missing.value.resource, missing.value.identifier) == (
        ErrorCode.ORGANIZATION_NOT_FOUND,
        Resource.ORGANIZATION,
        "org_0000000000000000",
    )
    assert [o.name for o in store.list_organizations()] == ["F", "E"]


def test_environment_keys_unique_per_organization(store, organization, environment) -> None:
    with pytest.raises(ConflictError) as taken:
        store.create_environment(organization.id, "production")
    assert (taken.value.code, taken.value.reason, taken.value.field) == (
        ErrorCode.ENVIRONMENT_KEY_TAKEN,
        ConflictReason.KEY_TAKEN,
        "key",
    )
    assert taken.value.details == {"field": "key", "key": "production"}
    assert store.find_environment(organization.id, "production") == environment
    assert store.find_environment(organization.id, "PRODUCTION") is None
    with pytest.raises(NotFoundError):
        store.create_environment("org_0000000000000000", "production")
    with pytest.raises(InvalidError) as malformed:
        store.create_environment(organization.id, "no spaces")
    assert (malformed.value.code, malformed.value.field) == (
        ErrorCode.ENVIRONMENT_KEY_MALFORMED,
        "key",
    )
    updated = store.update_environment(environment.id, insights_enabled=False)
    assert (updated.name, updated.insights_enabled) == ("Production", False)
    assert store.list_environments(organization.id) == [updated]


def test_api_keys_stored_as_sha256_only(store, environment) -> None:
    created = store.create_api_key(environment.id, "backend")
    stored = [tuple(row) for row in store._fetchall("SELECT key_sha256 FROM api_keys")]
    assert stored == [(hashlib.sha256(created.plaintext.encode()).hexdigest(),)]
    assert store.list_api_keys(environment.id) == [created.record]
    store.revoke_api_key(created.record.id)
    assert store.list_api_keys(environment.id) == []
    assert store.get_api_key(created.record.id).revoked is True
    with pytest.raises(NotFoundError) as missing:
        store.revoke_api_key(created.record.id)
    assert (missing.value.code, missing.value.resource, missing.value.identifier) == (
        ErrorCode.LIVE_API_KEY_NOT_FOUND,
        Resource.API_KEY,
        created.record.id,
    )
    with pytest.raises(NotFoundError):
        store.create_api_key("env_0000000000000000")


def test_segments_dedupe_replace_and_limit(store, organization) -> None:
    segment, created = store.put_segment(organization.id, "beta", ["b", "a", "b"])
    assert (segment.size, created) == (2, True)
    assert store.segment_members(organization.id, "beta") == ["b", "a"]
    segment, created = store.put_segment(organization.id, "beta", ["c"])
    assert (segment.size, created) == (1, False)
    assert store.get_segment(organization.id, "beta") == segment
    assert store.list_segments(organization.id) == [segment]
    with pytest.raises(InvalidError) as too_large:
        store.put_segment(organization.id, "big", [str(i) for i in range(1_000_001)])
    assert (too_large.value.code, too_large.value.details) == (
        ErrorCode.SEGMENT_TOO_LARGE,
        {"field": "user_identifiers", "count": 1_000_001, "maximum": 1_000_000},
    )
    with pytest.raises(NotFoundError):
        store.put_segment("org_0000000000000000", "beta", [])
    store.delete_segment(organization.id, "beta")
    assert store.get_segment(organization.id, "beta") is None
    with pytest.raises(NotFoundError) as missing:
        store.delete_segment(organization.id, "beta")
    assert (missing.value.resource, missing.value.identifier) == (Resource.SEGMENT, "beta")


def test_flags_create_replace_and_segment_rules(store, organization, environment) -> None:
    rules = [SegmentRule("beta", False), PercentageRule(33.33), StaticRule()]
    with pytest.raises(InvalidError) as error:
        store.put_flag(environment.id, "f", True, False, rules)
    assert (error.value.code, error.value.details) == (
        ErrorCode.UNKNOWN_SEGMENT,
        {"field": "rules", "index": 0, "segment": "beta"},
    )
    store.put_segment(organization.id, "beta", ["a"])
    flag, created = store.put_flag(environment.id, "f", True, False, rules)
    assert created and flag.rules == tuple(rules)
    assert store.get_flag(environment.id, "f") == flag
    flag, created = store.put_flag(environment.id, "f", False, True, [])
    assert not created and store.list_flags(environment.id) == [flag]
    with pytest.raises(NotFoundError) as missing:
        store.put_flag("env_0000000000000000", "f", True, False, [])
    assert missing.value.resource is Resource.ENVIRONMENT
    store.put_flag(environment.id, "g", True, False, [SegmentRule("beta")])
    with pytest.raises(ConflictError) as in_use:
        store.delete_segment(organization.id, "beta")
    assert (in_use.value.reason, in_use.value.field) == (ConflictReason.SEGMENT_IN_USE, None)
    assert in_use.value.details == {"segment": "beta", "flag": "g", "environment": "production"}
    assert str(in_use.value) == "segment_in_use segment='beta' flag='g' environment='production'"
    store.delete_flag(environment.id, "g")
    with pytest.raises(NotFoundError) as missing:
        store.delete_flag(environment.id, "g")
    assert (missing.value.resource, missing.value.identifier) == (Resource.FLAG, "g")
    store.delete_segment(organization.id, "beta")


WRITES = {
    "create organization": lambda s, o, e: s.create_organization("B", Plan.FREE),
    "update organization": lambda s, o, e: s.update_organization(o.id, plan=Plan.TEAM),
    "create environment": lambda s, o, e: s.create_environment(o.id, "staging"),
    "update environment": lambda s, o, e: s.update_environment(e.id, name="P"),
    "create api key": lambda s, o, e: s.create_api_key(e.id),
    "revoke api key": lambda s, o, e: s.revoke_api_key(s.list_api_keys(e.id)[0].id),
    "put segment": lambda s, o, e: s.put_segment(o.id, "seg", ["x"]),
    "replace segment": lambda s, o, e: s.put_segment(o.id, "kept", ["y"]),
    "delete segment": lambda s, o, e: s.delete_segment(o.id, "kept"),
    "put flag": lambda s, o, e: s.put_flag(e.id, "new", True, False, []),
    "replace flag": lambda s, o, e: s.put_flag(e.id, "old", False, False, []),
    "delete flag": lambda s, o, e: s.delete_flag(e.id, "old"),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_every_write_increases_the_config_version(store, organization, environment, write) -> None:
    store.create_api_key(environment.id)
    store.put_segment(organization.id, "kept", ["x"])
    store.put_flag(environment.id, "old", True, False, [])
    before = store.config_version()
    write(store, organization, environment)
    assert store.config_version() == before + 1


def test_failed_writes_leave_the_version_alone(store, organization, environment) -> None:
    before = store.config_version()
    for failing in (
        lambda: store.create_environment(organization.id, "production"),
        lambda: store.put_flag(environment.id, "f", True, False, [SegmentRule("ghost")]),
        lambda: store.revoke_api_key("key_0000000000000000"),
        lambda: store.delete_flag(environment.id, "ghost"),
    ):
        with pytest.raises((ConflictError, InvalidError, NotFoundError)):
            failing()
    assert store.config_version() == before


def test_secrets_are_made_once_and_shared(store, open_store) -> None:
    key = store.signing_key()
    assert len(key) == 32
    assert open_store().signing_key() == key
    assert store.admin_token_hash() is None
    store.set_admin_token_hash("ab" * 32)
    store.set_admin_token_hash("cd" * 32)
    assert open_store().admin_token_hash() == "cd" * 32


def test_threads_write_concurrently(store, organization) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                store.create_environment(organization.id, f"t{n}-{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(store.list_environments(organization.id)) == 80


def _process_writes(store, organization_id: str, worker: int) -> None:
    for i in range(15):
        store.create_environment(organization_id, f"p{worker}-{i}")
    store.close()


def test_forked_processes_write_concurrently_through_the_inherited_store(
    store, organization
) -> None:
    """As gunicorn's workers do: the store was used before the fork, each child opens its own
    connections and never touches the parent's."""
    before = store.config_version()
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_process_writes, args=(store, organization.id, n)) for n in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]
    assert len(store.list_environments(organization.id)) == 45
    assert store.config_version() == before + 45  # the parent's connections still work
