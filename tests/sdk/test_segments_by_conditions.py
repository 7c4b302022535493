"""The SDK's local mode on segments defined by conditions and percentages within a segment
(contract 12), against this process's service (its ruleset, quota and reports): every
language-neutral condition case (``tests/cases/conditions.json``) decided locally as the case
says, and for random contexts the local answer equal to the service's (its serving layer, and
the remote client's through ``/v1/evaluate`` once that door takes attributes)."""

from __future__ import annotations

from collections.abc import Iterator

import falcon.testing
import pytest
from flagsight_core import RESULTS
from flagsight_sdk import FlagsightClient
from flagsight_sdk.model import FAILURE_REFUSED
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.eventlog.schema import SOURCE_EVALUATE, LocalRow
from api.serving.evaluations import EvaluationServer
from tests.api.test_condition_cases import door_takes_attributes
from tests.support.admin import Admin, Tenant
from tests.support.condition_cases import HOLDS, answer, key, put_cases
from tests.support.in_process_session import in_process_session


def local_client(client: falcon.testing.TestClient, tenant: Tenant) -> FlagsightClient:
    session = in_process_session(client)
    sdk = FlagsightClient(tenant.api_key, "http://flagsight.test", session=session, local=True)
    assert sdk.local is not None and sdk.local.wait_ready(10)
    return sdk


def test_every_condition_case_decided_locally(
    client: falcon.testing.TestClient, admin: Admin
) -> None:
    tenant = admin.tenant()
    put_cases(admin, tenant)
    sdk = local_client(client, tenant)
    try:
        for index, case in enumerate(HOLDS):
            got = sdk.evaluate(key(index), case["userIdentifier"], case["attributes"])
            assert got.evaluation_id is not None, got
            assert (got.value, got.matched_rule_type) == answer(case), case["name"]
    finally:
        sdk.close()


USERS = [f"user-{i}" for i in range(12)] + ["alice", "bob"]
SEGMENTS = {
    "staff": {
        "userIdentifiers": ["alice"],
        "excludedUserIdentifiers": ["bob"],
        "conditions": [
            {"attribute": "email", "operator": "ENDS_WITH", "values": ["@example.com"]},
            {"attribute": "plan", "operator": "IN", "values": ["pro", "team"]},
        ],
    },
    "recent": {
        "conditions": [
            {"attribute": "version", "operator": "SEMVER_GREATER_THAN", "values": ["2.2.9"]},
            {"attribute": "seats", "operator": "GREATER_OR_EQUAL", "values": [5]},
            {"attribute": "signup", "operator": "AFTER", "values": ["2025-01-01T00:00:00Z"]},
        ],
    },
}
FLAGS = {
    "segment": [{"type": "SEGMENT", "segment": "staff"}, {"type": "PERCENTAGE", "percentage": 30}],
    "within": [
        {"type": "PERCENTAGE", "percentage": 50, "segment": "staff"},
        {"type": "PERCENTAGE", "percentage": 20, "segment": "recent", "value": False},
        {"type": "STATIC"},
    ],
}
attributes = st.fixed_dictionaries(
    {},
    optional={
        "email": st.sampled_from(["a@example.com", "b@example.org", "@example.com"]),
        "plan": st.sampled_from(["pro", "team", "free"]),
        "version": st.sampled_from(["2.3.0", "2.2.9", "10.0.0-rc.1", "2.3", "x"]),
        "seats": st.one_of(st.integers(0, 9), st.floats(0, 9), st.just("7")),
        "signup": st.one_of(
            st.sampled_from(["2025-06-01T10:00:00+02:00", "2024-12-31T23:59:59Z", "soon"]),
            st.integers(1_700_000_000, 1_800_000_000),
        ),
        "tags": st.lists(st.sampled_from(["a", "b"]), max_size=3),
    },
)


@pytest.fixture
def targeting(
    client, admin: Admin, services
) -> Iterator[tuple[FlagsightClient, FlagsightClient | None, Tenant]]:
    """The local client, and a remote one once ``/v1/evaluate`` takes attributes."""
    tenant = admin.tenant()
    for segment, body in SEGMENTS.items():
        admin.request(
            "PUT", f"/organizations/{tenant.organization_id}/segments/{segment}", body, expect=200
        )
    for flag, rules in FLAGS.items():
        admin.flag(tenant.environment_id, flag, rules)
    services.config.refresh()
    sdk = local_client(client, tenant)
    remote = None
    if door_takes_attributes(client, tenant):
        session = in_process_session(client)
        remote = FlagsightClient(tenant.api_key, "http://flagsight.test", session=session)
    yield sdk, remote, tenant
    sdk.close()
    if remote is not None:
        remote.close()


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(FLAGS)), st.sampled_from(USERS), attributes)
def test_local_answers_equal_the_services_for_random_contexts(
    targeting, services, flag: str, user: str, attributes: dict
) -> None:
    sdk, remote_sdk, tenant = targeting
    local = sdk.evaluate(flag, user, attributes)
    caller = services.config.caller(tenant.api_key)
    code, _prefix = EvaluationServer(services).serve_one(
        caller, caller.environment, flag, user, sdk=None, source=SOURCE_EVALUATE,
        attributes=attributes,
    )  # fmt: skip
    remote = RESULTS[code]
    assert (local.value, local.matched_rule_type, local.error_type) == (
        remote.value, remote.matched_rule_type, remote.error_type,
    )  # fmt: skip
    if remote_sdk is not None:
        through = remote_sdk.evaluate(flag, user, attributes)
        assert (through.value, through.matched_rule_type) == (local.value, local.matched_rule_type)


REFUSED_ATTRIBUTES = [
    {"plan": "pro", "userIdentifier": "x"},  # the reserved name
    {"bio": "x" * 2_000},
    {f"a{n}": n for n in range(51)},
    {"bad name": 1},
    {"plan": None},
    {"plan": {"tier": "pro"}},
    {"seats": float("nan")},  # the remote client's JSON has NaN: "Malformed JSON body"
    {"tags": ["a"] * 101},
    {"tags": ["a", 1]},
]
"""What ``/v1/evaluate`` refuses with 400 (contract 12): the local client refuses it too."""


@pytest.mark.parametrize("given", REFUSED_ATTRIBUTES)
def test_local_mode_refuses_the_attributes_the_service_refuses_in_its_words(
    targeting, given: dict
) -> None:
    sdk, remote_sdk, _tenant = targeting
    assert remote_sdk is not None
    reports = sdk.local.reports.stats.submitted
    local, remote = (
        sdk.evaluate("segment", "alice", given),
        remote_sdk.evaluate("segment", "alice", given),
    )
    assert (
        (local.value, local.failure) == (False, FAILURE_REFUSED) == (remote.value, remote.failure)
    )
    words = "nan" not in repr(given)  # else both refused, the remote one for its JSON
    assert local.error_message
    if words:
        assert local.error_message in remote.error_message
    bulk = {"alice": {"plan": "pro"}, "bob": given}
    local_bulk = sdk.evaluate_bulk("segment", ["alice", "bob"], bulk)
    remote_bulk = remote_sdk.evaluate_bulk("segment", ["alice", "bob"], bulk)
    for user in ("alice", "bob"):  # the whole request is refused, for both users
        assert local_bulk[user].failure == FAILURE_REFUSED == remote_bulk[user].failure
        if words:
            assert local_bulk[user].error_message in remote_bulk[user].error_message
    assert sdk.local.reports.stats.submitted == reports  # nothing decided, nothing reported


def test_attributes_that_are_no_mapping_are_refused_never_raised(targeting) -> None:
    """The fail-safe rule: whatever the application passes, an answer, never an exception."""
    sdk, _remote, _tenant = targeting
    one = sdk.evaluate("segment", "alice", "pro")  # type: ignore[arg-type]
    bulk = sdk.evaluate_bulk("segment", ["alice"], {"alice": "pro"})  # type: ignore[dict-item]
    for got in (one, bulk["alice"]):
        assert (got.value, got.failure) == (False, FAILURE_REFUSED)
        assert "must be a JSON object of attributes by name" in got.error_message


class _Reports:
    """The event log, keeping the local reports appended."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.rows: list = []

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def append_local_report(self, report) -> None:
        self.rows.extend(report.rows)
        self._inner.append_local_report(report)


def test_local_reports_put_users_outside_the_splits_segment_in_neither_arm(
    client, admin: Admin, services
) -> None:
    tenant = admin.tenant()
    body = {"userIdentifiers": ["alice"], "conditions": SEGMENTS["staff"]["conditions"]}
    admin.request(
        "PUT", f"/organizations/{tenant.organization_id}/segments/staff", body, expect=200
    )
    admin.flag(tenant.environment_id, "within", FLAGS["within"][:1])
    services.config.refresh()
    services.event_log = reports = _Reports(services.event_log)
    sdk = local_client(client, tenant)
    staff = {"email": "x@example.com", "plan": "pro"}
    users = [f"user-{i}" for i in range(60)]
    try:
        for user in users:
            sdk.evaluate("within", user, staff)
            sdk.evaluate("within", f"outside-{user}", {"plan": "pro"})
    finally:
        sdk.close()
    rows = [LocalRow(*row) for row in reports.rows]
    arms = {row.user_identifier: (row.rule_index, row.arm) for row in rows}
    assert len(arms) == 2 * len(users)
    assert all(arms[f"outside-{user}"] == (None, None) for user in users)
    inside = {arms[user] for user in users}
    assert inside == {(0, "treatment"), (None, "control")}
