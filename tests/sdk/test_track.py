"""The SDK's ``track`` (remote and local) and the OpenFeature provider's, against a real
``flagsight serve``: each event reaches the lake with its source and the SDK's time, and
``flagsight pipeline run`` puts them in the warehouse's ``track_events`` (contract 13)."""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow.compute as pc
import pytest
from flagsight_sdk import FlagsightClient
from flagsight_sdk.provider import FlagsightProvider
from openfeature import api
from openfeature.evaluation_context import EvaluationContext
from openfeature.track import TrackingEventDetails

from api.eventlog.schema import FEEDBACK, TRACK
from api.settings import Settings
from pipelines.cli import run_pipeline_once
from pipelines.definitions import working_database_path
from tests.conftest import ADMIN_TOKEN
from tests.sdk.conftest import wait_for_events
from tests.support.admin import Admin, Tenant
from tests.support.server import GunicornServer


@pytest.fixture
def tenant(module_server: GunicornServer, module_server_admin: Admin) -> Tenant:
    made = module_server_admin.tenant()
    module_server_admin.flag(made.environment_id, "launch", [{"type": "STATIC"}])
    module_server.wait_config_everywhere()
    return made


def local_client(tenant: Tenant, server: GunicornServer) -> FlagsightClient:
    client = FlagsightClient(tenant.api_key, server.url, local=True, interval_s=0.2)
    assert client.local is not None and client.local.wait_ready(10)
    return client


def provider_client(client: FlagsightClient):  # noqa: ANN201 - openfeature's client
    domain = f"flagsight-{uuid.uuid4().hex}"
    api.set_provider(FlagsightProvider(client), domain)
    return api.get_client(domain)


def tracked(server: GunicornServer, tenant: Tenant, count: int) -> list[dict]:
    """The environment's tracked events in the lake, once there are ``count``, by user."""
    table = wait_for_events(
        server,
        TRACK,
        lambda t: t.filter(pc.equal(t["environment_id"], tenant.environment_id)),
        count,
    )
    return sorted(table.to_pylist(), key=lambda row: (row["user_identifier"], row["event_name"]))


def test_track_sends_what_the_service_takes_with_the_sdks_time(
    module_server, tenant, caplog
) -> None:
    client = FlagsightClient(tenant.api_key, module_server.url, interval_s=0.2)
    before = datetime.now(UTC)
    assert client.track("purchase", "ann", 59.9)
    assert client.track("purchase", "bob", 3)
    assert client.track("signup", "cid")
    with caplog.at_level(logging.WARNING, logger="flagsight_sdk"):
        assert client.track("refund", "dee", float("nan"))  # sent without its value
        assert client.track("paid", "eve", True)  # a bool is not a number: without it
        assert not client.track("has space", "fay")  # the service would refuse the batch
        assert not client.track("purchase", "")
        assert not client.track("purchase", None)  # type: ignore[arg-type]
    assert [r.getMessage() for r in caplog.records] == [
        "flagsight: track('refund'): value nan is not a finite number; sent as none",
        "flagsight: track('paid'): value True is not a finite number; sent as none",
        "flagsight: track('has space') not sent: the name must be 1 to 128 letters, digits, "
        "'.', '_' or '-'",
        "flagsight: track('purchase') not sent: the user must be a string of 1 to 1024 characters",
        "flagsight: track('purchase') not sent: the user must be a string of 1 to 1024 characters",
    ]
    assert client.flush(10)
    stats = client.track_batcher().stats
    assert (stats.submitted, stats.sent, stats.dropped) == (5, 5, {})
    after = datetime.now(UTC)

    rows = tracked(module_server, tenant, 5)
    assert [(r["event_name"], r["user_identifier"], r["value"], r["source"]) for r in rows] == [
        ("purchase", "ann", 59.9, "sdk"),
        ("purchase", "bob", 3.0, "sdk"),
        ("signup", "cid", None, "sdk"),
        ("refund", "dee", None, "sdk"),
        ("paid", "eve", None, "sdk"),
    ]
    for row in rows:  # when track() was called, not when the batch arrived
        assert before <= row["occurred_at"] <= row["received_at"] <= after + timedelta(seconds=1)
    client.close()
    assert not client.track("purchase", "ann")  # closed: nothing is sent any more


def test_a_batch_of_the_longest_users_and_names_reaches_the_service_whole(
    module_server, tenant
) -> None:
    """500 events of 1,024-character users of 4-byte characters and 128-character names: over
    the 2 MiB a body may hold even as UTF-8 (escaped, six bytes a character, it was over with
    users of 700 accented letters). The service answers 413 and the batch goes again in
    halves: every event arrives, none is dropped."""
    client = FlagsightClient(tenant.api_key, module_server.url, interval_s=60)
    name = "n" * 128
    users = [f"{n:04d}" + "\N{GRINNING FACE}" * 1_020 for n in range(500)]
    assert all(client.track(name, user) for user in users)
    assert client.flush(30)
    stats = client.track_batcher().stats
    assert (stats.sent, stats.dropped) == (500, {})
    rows = tracked(module_server, tenant, 500)
    assert sorted(row["user_identifier"] for row in rows) == users
    client.close()


@pytest.mark.parametrize(("ahead_s", "said", "first_at_service_time"), [
    (360.0, "ahead of", True),  # past the 5 minutes the service takes: refused, sent again
    (-3_600.0, "behind", False),  # within the 24 hours it takes: the first batch kept as sent
])  # fmt: skip
def test_a_clock_far_from_the_services_is_corrected_from_its_date(
    module_server, tenant, monkeypatch, caplog, ahead_s, said, first_at_service_time
) -> None:
    """This process's clock 6 minutes ahead of the service's, or an hour behind: the service's
    ``Date`` says by how much, and events go at the service's time from then on; a batch
    refused for its times goes again, moved. No event is lost."""
    from flagsight_sdk import tracking

    monkeypatch.setattr(tracking, "wall_clock", lambda: time.time() + ahead_s)
    # One attempt: the second send, at the service's time, is not one more attempt.
    client = FlagsightClient(tenant.api_key, module_server.url, interval_s=60, max_attempts=1)
    with caplog.at_level(logging.WARNING, logger="flagsight_sdk"):
        assert client.track("purchase", "ann", 1.0) and client.track("purchase", "bob", 2.0)
        assert client.flush(10)
        assert client.track("purchase", "cid", 3.0)
        assert client.flush(10)
    stats = client.track_batcher().stats
    assert (stats.sent, stats.dropped) == (3, {})
    assert f"s {said} the service's; tracked events are sent at the service's time" in caplog.text
    now = datetime.now(UTC)
    off = {row["user_identifier"]: (row["occurred_at"] - now).total_seconds()
           for row in tracked(module_server, tenant, 3)}  # fmt: skip
    assert abs(off["cid"]) < 30  # the service's time, within the Date header's whole seconds
    for user in ("ann", "bob"):
        assert (abs(off[user]) < 30) is first_at_service_time, off
    client.close()


def test_the_providers_track_is_a_tracked_event_unless_it_carries_success(
    module_server, tenant, caplog
) -> None:
    sdk = FlagsightClient(tenant.api_key, module_server.url, interval_s=0.2)
    client = provider_client(sdk)
    context = EvaluationContext("ann", {"plan": "pro"})
    evaluation_id = client.get_boolean_details("launch", False, context).flag_metadata[
        "evaluationId"
    ]
    client.track("purchase", context, TrackingEventDetails(value=12.5))
    client.track("signup", EvaluationContext("bob"))
    client.track("launch", context, TrackingEventDetails(attributes={"success": True}))  # feedback
    with caplog.at_level(logging.WARNING, logger="flagsight_sdk"):
        client.track("purchase", EvaluationContext(), TrackingEventDetails(value=1.0))
    assert [r.getMessage() for r in caplog.records] == [
        "flagsight: track('purchase') not sent: no targeting key"
    ]
    assert sdk.flush(10)

    rows = tracked(module_server, tenant, 2)
    assert [(r["event_name"], r["user_identifier"], r["value"], r["source"]) for r in rows] == [
        ("purchase", "ann", 12.5, "provider"),
        ("signup", "bob", None, "provider"),
    ]
    of_env = lambda t: t.filter(pc.equal(t["environment_id"], tenant.environment_id))  # noqa: E731
    feedback = wait_for_events(module_server, FEEDBACK, of_env, 1)
    assert feedback.column("evaluation_id").to_pylist() == [evaluation_id]
    assert sdk.track_batcher("provider").stats.sent == 2 and sdk.batcher.stats.sent == 1


def test_track_in_both_modes_and_through_the_provider_reaches_the_warehouse(
    module_server, tenant
) -> None:
    remote = FlagsightClient(tenant.api_key, module_server.url, interval_s=0.2)
    local = local_client(tenant, module_server)
    assert local.evaluate("launch", "local-1").value  # decided in this process
    remote.track("purchase", "remote-1", 10.0)
    local.track("purchase", "local-1", 20.0)
    local.track("purchase", "local-1", 5.0)
    provider_client(local).track(
        "purchase", EvaluationContext("provider-1"), TrackingEventDetails(value=30.0)
    )
    assert remote.flush(10) and local.flush(10)
    tracked(module_server, tenant, 4)  # sealed

    settings = Settings(data_dir=module_server.data_dir, admin_token=ADMIN_TOKEN)
    run_pipeline_once(settings, echo=lambda line: None)
    with duckdb.connect(working_database_path(settings), read_only=True) as con:
        rows = con.execute(
            "SELECT user_identifier, event_name, value, source, organization_id "
            "FROM track_events WHERE environment_id = ? ORDER BY user_identifier, value",
            [tenant.environment_id],
        ).fetchall()
    org = tenant.organization_id
    assert rows == [
        ("local-1", "purchase", 5.0, "sdk", org),
        ("local-1", "purchase", 20.0, "sdk", org),
        ("provider-1", "purchase", 30.0, "provider", org),
        ("remote-1", "purchase", 10.0, "sdk", org),
    ]
    local.close()
