"""The words of the control plane's errors, written once for every place that shows them.

The store reports a code and its values (``api.controlplane.errors``); this module words each
code exactly as the admin API's messages read (other programs match them), and the dashboard
shows the same words on its pages and forms, as the CLI prints them from the API's answers.
The codes of the resources that existed when codes were introduced are worded here; a
resource added since words its own in its slice module (``word``).
Field names here are the API's (``monthlyEvaluationLimit``), which the store does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, cast

from flagsight_core.contract import KEY_SPEC

from api.controlplane.changes import Schedule
from api.controlplane.documents import iso_time
from api.controlplane.errors import Detail, RecordedError
from api.controlplane.store import ErrorCode

Details = Mapping[str, Detail]

UNAVAILABLE_MESSAGE = (
    "The control plane is busy or unavailable; nothing was changed. Retry shortly."
)

RESTORABLE = (
    "flags, an organization's plan and limit, an environment's settings, an API key's creation"
    " or revocation, a segment's members or creation, a schedule's creation or cancellation,"
    " a rollout's stop or hold, a webhook's creation, a metric (created, changed or deleted),"
    " and the metrics a flag follows"
)
"""What a restore can put back, as every refusal to restore names it."""


_SEGMENT_LISTS = {
    "user_identifiers": "userIdentifiers",
    "excluded_user_identifiers": "excludedUserIdentifiers",
}
"""A segment's two lists as the store names them (``SEGMENT_TOO_LARGE``'s field), and as the
API does."""


class Coded(Protocol):
    """An error as it is raised (``ControlPlaneError``) or kept (``RecordedError``)."""

    @property
    def code(self) -> ErrorCode: ...

    @property
    def details(self) -> Details: ...


REFUSED_WHY: Mapping[ErrorCode, str] = {
    ErrorCode.KIND_HAS_NO_RESTORE: "this kind of change has no restore",
    ErrorCode.ORGANIZATIONS_NEVER_DELETED: "organizations are never deleted",
    ErrorCode.ENVIRONMENTS_NEVER_DELETED: "environments are never deleted",
    ErrorCode.WEBHOOK_SECRET_NOT_KEPT: (
        "a webhook's secret is not kept in the log, so it cannot come back as it was;"
        " create a new webhook (it gets a new secret)"
    ),
    ErrorCode.SEGMENT_MEMBERS_NOT_KEPT: (
        "the members of segment changes made before this version were not kept;"
        " upload the segment again"
    ),
}
"""Why a record of that kind of change can never be restored, whatever its target is now."""


def _refused(why: str) -> Callable[[Details], str]:
    """A restore refused for ``why``: the record, then what can be restored instead."""
    return lambda d: (
        f"Audit record '{d['audit_id']}' ({d['action']} of {d['target']}) cannot be restored:"
        f" {why}. What can be restored: {RESTORABLE}"
    )


Wording = Callable[[Details], str]

MESSAGES: dict[str, Wording] = {
    ErrorCode.ORGANIZATION_NOT_FOUND: lambda d: f"Organization '{d['identifier']}' does not exist",
    ErrorCode.ENVIRONMENT_NOT_FOUND: lambda d: f"Environment '{d['identifier']}' does not exist",
    ErrorCode.API_KEY_NOT_FOUND: lambda d: f"API key '{d['identifier']}' does not exist",
    ErrorCode.LIVE_API_KEY_NOT_FOUND: lambda d: (
        f"API key '{d['identifier']}' does not exist or is already revoked"
    ),
    ErrorCode.SEGMENT_NOT_FOUND: lambda d: (
        f"Segment '{d['identifier']}' does not exist in this organization"
    ),
    ErrorCode.FLAG_NOT_FOUND: lambda d: (
        f"Flag '{d['identifier']}' does not exist in this environment"
    ),
    ErrorCode.SCHEDULE_NOT_FOUND: lambda d: f"Schedule '{d['identifier']}' does not exist",
    ErrorCode.PENDING_SCHEDULE_NOT_FOUND: lambda d: (
        f"No pending schedule '{d['identifier']}' for flag '{d['flag']}'"
    ),
    ErrorCode.ROLLOUT_NOT_FOUND: lambda d: (
        f"Flag '{d['identifier']}' has no rollout in this environment"
    ),
    ErrorCode.WEBHOOK_NOT_FOUND: lambda d: f"Webhook '{d['identifier']}' does not exist",
    ErrorCode.AUDIT_RECORD_NOT_FOUND: lambda d: f"Audit record '{d['identifier']}' does not exist",
    ErrorCode.ENVIRONMENT_KEY_TAKEN: lambda d: (
        f"Environment key '{d['key']}' already exists in this organization"
    ),
    ErrorCode.SEGMENT_IN_USE: lambda d: (
        f"Segment '{d['segment']}' is used by flag '{d['flag']}' in environment"
        f" '{d['environment']}'; remove that rule first"
    ),
    ErrorCode.NO_PERCENTAGE_RULE: lambda d: (
        f"Flag '{d['flag']}' has no PERCENTAGE rule: a guarded rollout moves the flag's first"
        " percentage rule, so add one first"
    ),
    **{code: _refused(why) for code, why in REFUSED_WHY.items()},
    ErrorCode.SCHEDULE_APPLIED: lambda d: (
        f"Schedule '{d['schedule']}' was applied at {d['applied_at']}: restore the flag"
        " change it made (its schedule.applied record) instead"
    ),
    ErrorCode.SCHEDULE_DUE_TIME_PASSED: lambda d: (
        f"Schedule '{d['schedule']}' was due at {iso_time(cast(float, d['due_at']))}, which has"
        " passed: it cannot be pending again; create a new schedule instead"
    ),
    ErrorCode.FLAG_STILL_ABSENT: lambda d: (
        f"Flag '{d['flag']}' did not exist before that change and does not now"
    ),
    ErrorCode.SEGMENT_STILL_ABSENT: lambda d: (
        f"Segment '{d['segment']}' did not exist before that change and does not now"
    ),
    ErrorCode.WEBHOOK_STILL_ABSENT: lambda d: (
        f"Webhook '{d['webhook']}' did not exist before that change and does not now"
    ),
    ErrorCode.ROLLOUT_STILL_ABSENT: lambda d: (
        f"Flag '{d['flag']}' had no rollout before that change and has none now"
    ),
    ErrorCode.ROLLOUT_FLAG_GONE: lambda d: (
        f"Flag '{d['flag']}' no longer exists: its rollout cannot come back"
    ),
    ErrorCode.API_KEY_ALREADY_REVOKED: lambda d: f"API key '{d['api_key']}' is already revoked",
    ErrorCode.API_KEY_NOT_REVOKED: lambda d: f"API key '{d['api_key']}' is not revoked",
    ErrorCode.SCHEDULE_FAILED: lambda d: (
        f"Schedule '{d['schedule']}' failed: nothing is pending to cancel"
    ),
    ErrorCode.SCHEDULE_ALREADY_CANCELLED: lambda d: (
        f"Schedule '{d['schedule']}' is already cancelled: nothing is pending to cancel"
    ),
    ErrorCode.SCHEDULE_NOT_CANCELLED: lambda d: (
        f"Schedule '{d['schedule']}' is {d['state']}, not cancelled"
    ),
    ErrorCode.MONTHLY_LIMIT_OUT_OF_RANGE: lambda d: (
        f"Field 'monthlyEvaluationLimit' must be an integer from 1 to {d['maximum']}"
    ),
    ErrorCode.MONTHLY_LIMIT_FIXED_BY_PLAN: lambda d: (
        "Field 'monthlyEvaluationLimit' can only be chosen on the enterprise plan"
        f" (the {d['plan']} plan's limit is {d['plan_limit']})"
    ),
    ErrorCode.MONTHLY_LIMIT_REQUIRED: lambda d: (
        "Field 'monthlyEvaluationLimit' is required for the enterprise plan"
    ),
    ErrorCode.ENVIRONMENT_KEY_MALFORMED: lambda d: f"Field 'key' must match {KEY_SPEC}",
    ErrorCode.FLAG_KEY_MALFORMED: lambda d: f"Flag key must match {KEY_SPEC}",
    ErrorCode.SEGMENT_KEY_MALFORMED: lambda d: f"Segment key must match {KEY_SPEC}",
    ErrorCode.SEGMENT_TOO_LARGE: lambda d: (
        f"Field '{_SEGMENT_LISTS.get(str(d['field']), 'userIdentifiers')}' has {d['count']}"
        f" distinct items; at most {d['maximum']} are allowed"
    ),
    ErrorCode.UNKNOWN_SEGMENT: lambda d: (
        f"Field 'rules[{d['index']}].segment' names segment '{d['segment']}',"
        " which does not exist in this organization"
    ),
    ErrorCode.UNAVAILABLE: lambda d: UNAVAILABLE_MESSAGE,
}
"""Each code's words, from its details; ``tests/admin/test_error_messages.py`` checks that
every code has them. A new resource words its own codes in its edge slice (``word``)."""


def word(codes: Mapping[str, Wording]) -> Mapping[str, Wording]:
    """Add the words of codes a resource brought (its control-plane slice's ``StrEnum``),
    from that resource's edge slice module, where they are read with its routes:
    ``word({NoteCode.NOTE_NOT_FOUND: lambda d: f"Note '{d['identifier']}' does not exist"})``.
    A code worded twice is an error: each has one wording."""
    twice = sorted(str(code) for code in codes if code in MESSAGES)
    if twice:
        raise ValueError(f"codes already worded: {', '.join(twice)}")
    MESSAGES.update(codes)
    return codes


def message(error: Coded) -> str:
    """What the admin API says for ``error`` (and the dashboard shows)."""
    return MESSAGES[error.code](error.details)


def restore_refusal(error: Coded) -> str:
    """Why a record's restore is refused, as short as its row on the audit page can say it:
    the reason alone for a kind of change that has none (``REFUSED_WHY``, without the record
    the row already shows), the whole message when the target as it is now refuses it."""
    return REFUSED_WHY.get(error.code) or message(error)


def schedule_error(schedule: Schedule) -> str | None:
    """Why a failed schedule could not be applied, in words; text kept from before errors were
    kept by code is already words."""
    error = schedule.error
    return message(error) if isinstance(error, RecordedError) else error
