"""The SDK and its OpenFeature provider against a real ``flagsight serve``."""

from __future__ import annotations

import logging
import uuid

import pyarrow.compute as pc
import pytest
from flagsight_sdk import FlagsightClient
from flagsight_sdk.provider import FlagsightProvider
from openfeature import api
from openfeature.evaluation_context import EvaluationContext
from openfeature.exception import ErrorCode
from openfeature.flag_evaluation import Reason
from openfeature.track import TrackingEventDetails

from api.eventlog.schema import FEEDBACK
from tests.sdk.conftest import wait_for_events
from tests.support.admin import Admin, Tenant


@pytest.fixture
def tenant(module_server, module_server_admin: Admin) -> Tenant:
    tenant = module_server_admin.tenant()
    module_server_admin.segment(tenant.organization_id, "beta", ["user-1"])
    env = tenant.environment_id
    module_server_admin.flag(env, "static-on", [{"type": "STATIC"}])
    module_server_admin.flag(env, "segment", [{"type": "SEGMENT", "segment": "beta"}])
    module_server_admin.flag(env, "half", [{"type": "PERCENTAGE", "percentage": 50}])
    module_server_admin.flag(env, "no-rules", [])
    module_server_admin.flag(env, "disabled", [{"type": "STATIC"}], enabled=False)
    module_server_admin.flag(env, "archived", [{"type": "STATIC"}], archived=True)
    module_server.wait_config_everywhere()
    return tenant


def test_evaluate_answers_as_the_service(module_server, tenant) -> None:
    client = FlagsightClient(tenant.api_key, module_server.url)
    on = client.evaluate("static-on", "user-1")
    assert (bool(on), on.value, on.matched_rule_type, on.error_type, on.failure) == (
        True,
        True,
        "STATIC",
        None,
        None,
    )
    assert len(on.evaluation_id) == 46
    assert client.evaluate("segment", "user-1").matched_rule_type == "SEGMENT"
    assert client.evaluate("segment", "user-2").value is False
    for flag, error in [
        ("disabled", "FLAG_DISABLED"),
        ("archived", "FLAG_ARCHIVED"),
        ("missing", "FLAG_NOT_FOUND"),
    ]:
        answer = client.evaluate(flag, "user-1")
        assert (answer.value, answer.error_type, answer.failure) == (False, error, None)
        assert answer.evaluation_id is not None


def test_evaluate_bulk_dedupes_and_splits_past_10000(module_server, tenant) -> None:
    client = FlagsightClient(tenant.api_key, module_server.url, timeout_s=10)
    users = [f"u{i}" for i in range(10_001)] + ["u0"]
    answers = client.evaluate_bulk("half", users)
    assert list(answers) == users[:-1]
    assert all(
        a.failure is None and a.matched_rule_type in ("PERCENTAGE", None) for a in answers.values()
    )
    on = sum(a.value for a in answers.values())
    assert 4_700 < on < 5_300
    assert answers["u7"].value == client.evaluate("half", "u7").value  # same bucketing either way


def test_one_keep_alive_connection_is_reused(module_server, tenant, caplog) -> None:
    client = FlagsightClient(tenant.api_key, module_server.url)
    with caplog.at_level(logging.DEBUG, logger="urllib3.connectionpool"):
        for _ in range(20):
            assert client.evaluate("static-on", "user-1").value is True
    opened = [
        r for r in caplog.records if r.getMessage().startswith("Starting new HTTP connection")
    ]
    assert len(opened) == 1


def provider_client(client: FlagsightClient):  # noqa: ANN201 - openfeature.client.OpenFeatureClient
    domain = f"flagsight-{uuid.uuid4().hex}"
    api.set_provider(FlagsightProvider(client), domain)
    return api.get_client(domain)


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("static-on", (True, Reason.STATIC, "on", None)),
        ("segment", (True, Reason.TARGETING_MATCH, "on", None)),
        ("no-rules", (False, Reason.DEFAULT, "off", None)),
        ("disabled", (False, Reason.DISABLED, "off", None)),
        ("archived", (False, Reason.DISABLED, "off", None)),
        ("missing", (True, Reason.ERROR, None, ErrorCode.FLAG_NOT_FOUND)),
    ],
)
def test_provider_resolves_booleans(module_server, tenant, flag, expected) -> None:
    client = provider_client(FlagsightClient(tenant.api_key, module_server.url))
    details = client.get_boolean_details(flag, True, EvaluationContext("user-1"))
    assert (details.value, details.reason, details.variant, details.error_code) == expected


def test_provider_split_reason_and_errors(module_server, tenant) -> None:
    client = provider_client(FlagsightClient(tenant.api_key, module_server.url))
    reasons = {
        client.get_boolean_details("half", False, EvaluationContext(f"u{i}")).reason
        for i in range(40)
    }
    assert reasons == {Reason.SPLIT, Reason.DEFAULT}
    no_key = client.get_boolean_details("static-on", False, EvaluationContext())
    assert (no_key.value, no_key.error_code) == (False, ErrorCode.TARGETING_KEY_MISSING)
    assert (
        client.get_string_details("static-on", "x", EvaluationContext("u")).error_code
        == ErrorCode.TYPE_MISMATCH
    )
    down = provider_client(FlagsightClient(tenant.api_key, "http://127.0.0.1:9"))
    failed = down.get_boolean_details("static-on", False, EvaluationContext("user-1"))
    assert (failed.value, failed.reason, failed.error_code) == (
        False,
        Reason.ERROR,
        ErrorCode.GENERAL,
    )


def test_provider_track_reports_the_latest_evaluation(module_server, tenant) -> None:
    sdk = FlagsightClient(tenant.api_key, module_server.url)
    client = provider_client(sdk)
    context = EvaluationContext("user-1")
    client.get_boolean_details("static-on", False, context)
    latest = client.get_boolean_details("static-on", False, context).flag_metadata["evaluationId"]
    other_user = client.get_boolean_details(
        "static-on", False, EvaluationContext("user-2")
    ).flag_metadata["evaluationId"]
    client.track(
        "static-on",
        context,
        TrackingEventDetails(value=42.5, attributes={"success": False, "errorType": "Timeout"}),
    )
    client.track(
        "static-on", EvaluationContext("user-2"), TrackingEventDetails(attributes={"success": True})
    )
    client.track(
        "never-evaluated", context, TrackingEventDetails(attributes={"success": True})
    )  # logged, not sent
    assert sdk.flush(10)
    assert sdk.batcher.stats.sent == 2

    feedback = wait_for_events(
        module_server,
        FEEDBACK,
        lambda t: t.filter(pc.equal(t["environment_id"], tenant.environment_id)),
        2,
    )
    rows = {
        r["evaluation_id"]: (r["result"], r["latency_ms"], r["error_type"])
        for r in feedback.to_pylist()
    }
    assert rows[latest] == (False, 42.5, "Timeout")
    result, latency, error = rows[other_user]
    assert (result, error) == (True, None) and 0 <= latency < 5_000
    assert len(rows) == 2
