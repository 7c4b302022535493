"""The store's error codes worded at the edge: every code has words, each reads exactly as the
admin API's message did when the store wrote it (clients match these), and a failed schedule
shows why in the same words."""

from __future__ import annotations

import pytest

from api.controlplane.errors import (
    ConflictError,
    ConflictReason,
    ControlPlaneError,
    InvalidError,
    NotFoundError,
    Resource,
    UnavailableError,
)
from api.controlplane.store import ErrorCode
from api.web.admin.error_messages import MESSAGES, RESTORABLE, message
from api.web.admin.errors import http_error
from tests.admin.conftest import NOW, AdminClient

C, R, N = ErrorCode, ConflictReason, ConflictReason.NOTHING_TO_RESTORE
AUDIT = {"audit_id": "aud_1", "action": "webhook.deleted", "target": "webhook:whk_1"}
REFUSED = "Audit record 'aud_1' (webhook.deleted of webhook:whk_1) cannot be restored: "
KEY = "[A-Za-z0-9._-]{1,128}"

EXAMPLES: list[tuple[ControlPlaneError, int, str]] = [
    (NotFoundError(C.ORGANIZATION_NOT_FOUND, Resource.ORGANIZATION, "org_1"), 404,
     "Organization 'org_1' does not exist"),
    (NotFoundError(C.ENVIRONMENT_NOT_FOUND, Resource.ENVIRONMENT, "env_1"), 404,
     "Environment 'env_1' does not exist"),
    (NotFoundError(C.API_KEY_NOT_FOUND, Resource.API_KEY, "key_1"), 404,
     "API key 'key_1' does not exist"),
    (NotFoundError(C.LIVE_API_KEY_NOT_FOUND, Resource.API_KEY, "key_1"), 404,
     "API key 'key_1' does not exist or is already revoked"),
    (NotFoundError(C.SEGMENT_NOT_FOUND, Resource.SEGMENT, "beta"), 404,
     "Segment 'beta' does not exist in this organization"),
    (NotFoundError(C.FLAG_NOT_FOUND, Resource.FLAG, "f"), 404,
     "Flag 'f' does not exist in this environment"),
    (NotFoundError(C.SCHEDULE_NOT_FOUND, Resource.SCHEDULE, "sch_1"), 404,
     "Schedule 'sch_1' does not exist"),
    (NotFoundError(C.PENDING_SCHEDULE_NOT_FOUND, Resource.SCHEDULE, "sch_1", flag="f"), 404,
     "No pending schedule 'sch_1' for flag 'f'"),
    (NotFoundError(C.ROLLOUT_NOT_FOUND, Resource.ROLLOUT, "f"), 404,
     "Flag 'f' has no rollout in this environment"),
    (NotFoundError(C.WEBHOOK_NOT_FOUND, Resource.WEBHOOK, "whk_1"), 404,
     "Webhook 'whk_1' does not exist"),
    (NotFoundError(C.AUDIT_RECORD_NOT_FOUND, Resource.AUDIT_RECORD, "aud_1"), 404,
     "Audit record 'aud_1' does not exist"),
    (ConflictError(C.ENVIRONMENT_KEY_TAKEN, R.KEY_TAKEN, "key", key="production"), 409,
     "Environment key 'production' already exists in this organization"),
    (ConflictError(C.SEGMENT_IN_USE, R.SEGMENT_IN_USE, segment="beta", flag="f",
                   environment="production"), 409,
     "Segment 'beta' is used by flag 'f' in environment 'production'; remove that rule first"),
    (ConflictError(C.NO_PERCENTAGE_RULE, R.NO_PERCENTAGE_RULE, flag="f"), 409,
     "Flag 'f' has no PERCENTAGE rule: a guarded rollout moves the flag's first percentage"
     " rule, so add one first"),
    (ConflictError(C.KIND_HAS_NO_RESTORE, R.NOT_RESTORABLE, **AUDIT), 409,
     f"{REFUSED}this kind of change has no restore. What can be restored: {RESTORABLE}"),
    (ConflictError(C.ORGANIZATIONS_NEVER_DELETED, R.NOT_RESTORABLE, **AUDIT), 409,
     f"{REFUSED}organizations are never deleted. What can be restored: {RESTORABLE}"),
    (ConflictError(C.ENVIRONMENTS_NEVER_DELETED, R.NOT_RESTORABLE, **AUDIT), 409,
     f"{REFUSED}environments are never deleted. What can be restored: {RESTORABLE}"),
    (ConflictError(C.WEBHOOK_SECRET_NOT_KEPT, R.NOT_RESTORABLE, **AUDIT), 409,
     f"{REFUSED}a webhook's secret is not kept in the log, so it cannot come back as it was;"
     f" create a new webhook (it gets a new secret). What can be restored: {RESTORABLE}"),
    (ConflictError(C.SEGMENT_MEMBERS_NOT_KEPT, R.NOT_RESTORABLE, **AUDIT), 409,
     f"{REFUSED}the members of segment changes made before this version were not kept;"
     f" upload the segment again. What can be restored: {RESTORABLE}"),
    (ConflictError(C.SCHEDULE_APPLIED, R.NOT_RESTORABLE, schedule="sch_1",
                   applied_at="2001-01-01T00:00:00.000Z"), 409,
     "Schedule 'sch_1' was applied at 2001-01-01T00:00:00.000Z: restore the flag change it"
     " made (its schedule.applied record) instead"),
    (ConflictError(C.SCHEDULE_DUE_TIME_PASSED, R.NOT_RESTORABLE, schedule="sch_1",
                   due_at=2_000.0), 409,
     "Schedule 'sch_1' was due at 1970-01-01T00:33:20.000Z, which has passed: it cannot be"
     " pending again; create a new schedule instead"),
    (ConflictError(C.FLAG_STILL_ABSENT, N, flag="f"), 409,
     "Flag 'f' did not exist before that change and does not now"),
    (ConflictError(C.SEGMENT_STILL_ABSENT, N, segment="beta"), 409,
     "Segment 'beta' did not exist before that change and does not now"),
    (ConflictError(C.WEBHOOK_STILL_ABSENT, N, webhook="whk_1"), 409,
     "Webhook 'whk_1' did not exist before that change and does not now"),
    (ConflictError(C.ROLLOUT_STILL_ABSENT, N, flag="f"), 409,
     "Flag 'f' had no rollout before that change and has none now"),
    (ConflictError(C.ROLLOUT_FLAG_GONE, N, flag="f"), 409,
     "Flag 'f' no longer exists: its rollout cannot come back"),
    (ConflictError(C.API_KEY_ALREADY_REVOKED, N, api_key="key_1"), 409,
     "API key 'key_1' is already revoked"),
    (ConflictError(C.API_KEY_NOT_REVOKED, N, api_key="key_1"), 409,
     "API key 'key_1' is not revoked"),
    (ConflictError(C.SCHEDULE_FAILED, N, schedule="sch_1"), 409,
     "Schedule 'sch_1' failed: nothing is pending to cancel"),
    (ConflictError(C.SCHEDULE_ALREADY_CANCELLED, N, schedule="sch_1"), 409,
     "Schedule 'sch_1' is already cancelled: nothing is pending to cancel"),
    (ConflictError(C.SCHEDULE_NOT_CANCELLED, N, schedule="sch_1", state="pending"), 409,
     "Schedule 'sch_1' is pending, not cancelled"),
    (InvalidError(C.MONTHLY_LIMIT_OUT_OF_RANGE, "monthly_evaluation_limit", value=0,
                  maximum=10**15), 400,
     "Field 'monthlyEvaluationLimit' must be an integer from 1 to 1000000000000000"),
    (InvalidError(C.MONTHLY_LIMIT_FIXED_BY_PLAN, "monthly_evaluation_limit", value=5,
                  plan="pro", plan_limit=1_000_000), 400,
     "Field 'monthlyEvaluationLimit' can only be chosen on the enterprise plan (the pro"
     " plan's limit is 1000000)"),
    (InvalidError(C.MONTHLY_LIMIT_REQUIRED, "monthly_evaluation_limit", plan="enterprise"), 400,
     "Field 'monthlyEvaluationLimit' is required for the enterprise plan"),
    (InvalidError(C.ENVIRONMENT_KEY_MALFORMED, "key", value="a b"), 400,
     f"Field 'key' must match {KEY}"),
    (InvalidError(C.FLAG_KEY_MALFORMED, "key", value="a b"), 400, f"Flag key must match {KEY}"),
    (InvalidError(C.SEGMENT_KEY_MALFORMED, "key", value="a b"), 400,
     f"Segment key must match {KEY}"),
    (InvalidError(C.SEGMENT_TOO_LARGE, "user_identifiers", count=1_000_001,
                  maximum=1_000_000), 400,
     "Field 'userIdentifiers' has 1000001 distinct items; at most 1000000 are allowed"),
    (InvalidError(C.SEGMENT_TOO_LARGE, "excluded_user_identifiers", count=1_000_001,
                  maximum=1_000_000), 400,
     "Field 'excludedUserIdentifiers' has 1000001 distinct items; at most 1000000 are allowed"),
    (InvalidError(C.UNKNOWN_SEGMENT, "rules", index=1, segment="ghost"), 400,
     "Field 'rules[1].segment' names segment 'ghost', which does not exist in this"
     " organization"),
    (NotFoundError(C.METRIC_NOT_FOUND, "metric", "checkout"), 404,
     "Metric 'checkout' does not exist in this organization"),
    (ConflictError(C.METRIC_IN_USE, R.METRIC_IN_USE, metric="checkout", flag="f",
                   environment="production"), 409,
     "Metric 'checkout' is guarded on by the rollout of flag 'f' in environment 'production';"
     " stop that rollout first"),
    (ConflictError(C.METRIC_KIND_IN_USE, R.METRIC_IN_USE, metric="checkout", flag="f",
                   environment="production", kind="count"), 409,
     "Metric 'checkout' cannot become a count metric while the rollout of flag 'f' in"
     " environment 'production' guards on it (its tolerance is in the metric's unit); stop"
     " that rollout first"),
    (ConflictError(C.METRIC_STILL_ABSENT, N, metric="checkout"), 409,
     "Metric 'checkout' did not exist before that change and does not now"),
    (ConflictError(C.METRIC_GONE, R.NOT_RESTORABLE, metric="checkout", **AUDIT), 409,
     f"{REFUSED}metric 'checkout' has been deleted since"),
    (ConflictError(C.METRIC_KIND_CHANGED, R.NOT_RESTORABLE, metric="checkout",
                   was="conversion", kind="sum", **AUDIT), 409,
     f"{REFUSED}metric 'checkout' was a conversion metric then and is a sum one now (the"
     " rollout's tolerance for it is in the old kind's unit); start a new rollout instead"),
    (InvalidError(C.METRIC_KEY_MALFORMED, "key", value="a b"), 400,
     f"Metric key must match {KEY}"),
    (InvalidError(C.METRIC_EVENT_MALFORMED, "event", value="a b"), 400,
     f"Field 'event' must match {KEY}"),
    (InvalidError(C.METRIC_WINDOW_OUT_OF_RANGE, "window_hours", value=0, maximum=720), 400,
     "Field 'windowHours' must be an integer from 1 to 720"),
    (InvalidError(C.UNKNOWN_METRIC, "metrics", metric="ghost", index=2), 400,
     "Field 'metrics[2]' names metric 'ghost', which does not exist in this organization"),
    (InvalidError(C.UNKNOWN_METRIC_GUARDRAIL, "guardrails", metric="ghost", index=1), 400,
     "Field 'guardrails[1]' guards on metric 'ghost', which does not exist in this"
     " organization"),
    (InvalidError(C.METRIC_TOLERANCE_REQUIRED, "tolerances", guardrail="metric:revenue",
                  kind="sum"), 400,
     "Field 'tolerances' must give metric:revenue a tolerance: a sum metric's difference is"
     " in its events' own unit, which has no default"),
    (InvalidError(C.METRIC_TOLERANCE_OUT_OF_RANGE, "tolerances", guardrail="metric:checkout",
                  tolerance=101.0, maximum=100.0), 400,
     "Field 'tolerances' must give metric:checkout a number above 0 and at most 100 (pp)"),
    (UnavailableError("the control-plane database cannot be reached: refused"), 503,
     "The control plane is busy or unavailable; nothing was changed. Retry shortly."),
]  # fmt: skip


def test_every_error_code_has_words_at_the_edge() -> None:
    assert [code for code in ErrorCode if code not in MESSAGES] == []
    assert {error.code for error, _, _ in EXAMPLES} == set(ErrorCode)  # each one checked below


@pytest.mark.parametrize(
    ("error", "status", "words"), EXAMPLES, ids=[str(error.code) for error, _, _ in EXAMPLES]
)
def test_each_code_reads_as_the_api_has_always_said_it(
    error: ControlPlaneError, status: int, words: str
) -> None:
    answer = http_error(error)
    assert (answer.status_code, answer.description, message(error)) == (status, words, words)


def test_an_error_prints_as_its_code_and_values_for_logs() -> None:
    error = InvalidError(C.UNKNOWN_SEGMENT, "rules", index=1, segment="ghost")
    assert str(error) == "unknown_segment field='rules' index=1 segment='ghost'"
    cause = "the control-plane database cannot be reached: refused"
    assert str(UnavailableError(cause)) == cause  # /readyz and the logs show the driver's reason


def test_a_failed_schedule_says_why_in_the_api_words(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    assert admin_api.put(f"/organizations/{org['id']}/segments/beta",
                         {"userIdentifiers": ["alice"]}).status in (200, 201)  # fmt: skip
    path = f"/environments/{env['id']}/flags/checkout/schedules"
    rules = [{"type": "STATIC", "value": True}, {"type": "SEGMENT", "segment": "beta"}]
    body = {"at": "2001-01-01T00:00:00Z", "flag": {"enabled": True, "rules": rules}}
    made = admin_api.post(path, body).body
    assert admin_api.delete(f"/organizations/{org['id']}/segments/beta").status == 204
    store = admin_api.services.store
    store.apply_due_schedules(NOW)
    [failed] = admin_api.get(path).body["items"]
    assert (failed["id"], failed["state"], failed["error"]) == (
        made["id"], "failed",
        "Field 'rules[1].segment' names segment 'beta', which does not exist in this organization",
    )  # fmt: skip
    with store.backend.transaction(write=True) as conn:  # as a version before codes wrote it
        conn.execute("UPDATE schedules SET error = ? WHERE id = ?", ("kept words", made["id"]))
    assert admin_api.get(path).body["items"][0]["error"] == "kept words"
