"""The control-plane store's errors, in the store's own terms: a code and the values it concerns.

An error says what went wrong as data: its ``code`` (an ``ErrorCode``), and in ``details`` the
identifier the caller gave, the store's field at fault (as the store's methods name it, e.g.
``monthly_evaluation_limit``) and any value the refusal depends on (a limit, a segment key).
It carries no sentence for people, no HTTP and no driver's exception: the admin API and the
dashboard word each code in one place (``api/web/admin/error_messages.py``), so the store can
change its checks without changing what callers read, and the words cannot drift apart
between the places that show them. ``str(error)`` is a plain line for logs.

The subclasses say how the caller should take it (the admin API maps them to 404, 409, 400
and 503); ``NotFoundError.resource`` and ``ConflictError.reason`` are the coarse kinds a
caller may branch on, the code the exact case.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

Detail = str | int | float | None
"""A value an error carries: JSON-plain, so a failure can be kept in the database as it is."""


class ErrorCode(StrEnum):
    """Every case the store refuses, one member each: the edge words each one."""

    # NotFoundError: details["identifier"] is the id or key the caller gave
    ORGANIZATION_NOT_FOUND = "organization_not_found"
    ENVIRONMENT_NOT_FOUND = "environment_not_found"
    API_KEY_NOT_FOUND = "api_key_not_found"
    LIVE_API_KEY_NOT_FOUND = "live_api_key_not_found"
    """Revoking: no key of that id, or it is already revoked."""
    SEGMENT_NOT_FOUND = "segment_not_found"
    FLAG_NOT_FOUND = "flag_not_found"
    SCHEDULE_NOT_FOUND = "schedule_not_found"
    PENDING_SCHEDULE_NOT_FOUND = "pending_schedule_not_found"
    """Cancelling: no pending schedule of that id for the flag (``flag``)."""
    ROLLOUT_NOT_FOUND = "rollout_not_found"
    """The flag (``identifier``) has no rollout."""
    WEBHOOK_NOT_FOUND = "webhook_not_found"
    AUDIT_RECORD_NOT_FOUND = "audit_record_not_found"

    # ConflictError: the change is valid, but the records as they are now refuse it
    ENVIRONMENT_KEY_TAKEN = "environment_key_taken"
    SEGMENT_IN_USE = "segment_in_use"
    """``segment`` is named by a rule of ``flag`` in ``environment`` (its key)."""
    NO_PERCENTAGE_RULE = "no_percentage_rule"
    # a restore refused (ConflictReason.NOT_RESTORABLE): the first five for the kind of the
    # record's target (audit_id, action and target name the record), the last two because the
    # schedule (``schedule``) has moved past the change
    KIND_HAS_NO_RESTORE = "kind_has_no_restore"
    ORGANIZATIONS_NEVER_DELETED = "organizations_never_deleted"
    ENVIRONMENTS_NEVER_DELETED = "environments_never_deleted"
    WEBHOOK_SECRET_NOT_KEPT = "webhook_secret_not_kept"
    SEGMENT_MEMBERS_NOT_KEPT = "segment_members_not_kept"
    SCHEDULE_APPLIED = "schedule_applied"
    """The schedule was applied (at ``applied_at``): its flag change is what to restore."""
    SCHEDULE_DUE_TIME_PASSED = "schedule_due_time_passed"
    """The cancelled schedule's time (``due_at``, unix seconds) has passed."""
    # a restore that would change nothing (ConflictReason.NOTHING_TO_RESTORE)
    FLAG_STILL_ABSENT = "flag_still_absent"
    SEGMENT_STILL_ABSENT = "segment_still_absent"
    WEBHOOK_STILL_ABSENT = "webhook_still_absent"
    ROLLOUT_STILL_ABSENT = "rollout_still_absent"
    ROLLOUT_FLAG_GONE = "rollout_flag_gone"
    """The rollout's flag was deleted since: the rollout cannot come back."""
    API_KEY_ALREADY_REVOKED = "api_key_already_revoked"
    API_KEY_NOT_REVOKED = "api_key_not_revoked"
    SCHEDULE_FAILED = "schedule_failed"
    SCHEDULE_ALREADY_CANCELLED = "schedule_already_cancelled"
    SCHEDULE_NOT_CANCELLED = "schedule_not_cancelled"
    """Making it pending again: the schedule is in ``state``, not cancelled."""

    # InvalidError: details["field"] is the store's field at fault
    MONTHLY_LIMIT_OUT_OF_RANGE = "monthly_limit_out_of_range"
    MONTHLY_LIMIT_FIXED_BY_PLAN = "monthly_limit_fixed_by_plan"
    """Only enterprise chooses its limit; ``plan``'s is ``plan_limit``."""
    MONTHLY_LIMIT_REQUIRED = "monthly_limit_required"
    ENVIRONMENT_KEY_MALFORMED = "environment_key_malformed"
    FLAG_KEY_MALFORMED = "flag_key_malformed"
    SEGMENT_KEY_MALFORMED = "segment_key_malformed"
    SEGMENT_TOO_LARGE = "segment_too_large"
    UNKNOWN_SEGMENT = "unknown_segment"
    """The rule at ``index`` names ``segment``, which the organization does not have."""

    # UnavailableError
    UNAVAILABLE = "unavailable"


class Resource(StrEnum):
    """The kinds of record the store addresses (``NotFoundError.resource``)."""

    ORGANIZATION = "organization"
    ENVIRONMENT = "environment"
    API_KEY = "api_key"
    SEGMENT = "segment"
    FLAG = "flag"
    SCHEDULE = "schedule"
    ROLLOUT = "rollout"
    WEBHOOK = "webhook"
    AUDIT_RECORD = "audit_record"


class ConflictReason(StrEnum):
    """Why a change was refused although every value in it is valid (``ConflictError``)."""

    KEY_TAKEN = "key_taken"
    """A key that must be unique within its organization is already used."""
    SEGMENT_IN_USE = "segment_in_use"
    """A segment still referenced by a flag's rule cannot be deleted."""
    NOT_RESTORABLE = "not_restorable"
    """The audit record's change cannot be undone: its kind has no restore, or the target has
    moved past it (a schedule applied since, or whose time has passed)."""
    NOTHING_TO_RESTORE = "nothing_to_restore"
    """Restoring would change nothing: the record's before-state is what there is now."""
    NO_PERCENTAGE_RULE = "no_percentage_rule"
    """A guarded rollout needs the flag to have a percentage rule to move."""


class ControlPlaneError(Exception):
    """Base of the store's errors: ``code`` says which case, ``details`` its values."""

    def __init__(self, code: ErrorCode, **details: Detail):
        super().__init__(code)
        self.code = code
        self.details: dict[str, Detail] = details

    def __str__(self) -> str:
        values = " ".join(f"{name}={value!r}" for name, value in self.details.items())
        return f"{self.code} {values}" if values else str(self.code)


class NotFoundError(ControlPlaneError):
    """The addressed record does not exist: ``resource`` names its kind and ``identifier`` the
    id or key the caller gave (for a flag, its key within the environment addressed)."""

    def __init__(self, code: ErrorCode, resource: Resource, identifier: str, **details: Detail):
        super().__init__(code, identifier=identifier, **details)
        self.resource = resource
        self.identifier = identifier


class ConflictError(ControlPlaneError):
    """A key that must be unique is taken, or the change would break another record:
    ``reason`` says which, and ``field`` names the store's field at fault when there is one."""

    def __init__(
        self,
        code: ErrorCode,
        reason: ConflictReason,
        field_name: str | None = None,
        **details: Detail,
    ):
        fields = {} if field_name is None else {"field": field_name}
        super().__init__(code, **fields, **details)
        self.reason = reason
        self.field = field_name


class InvalidError(ControlPlaneError):
    """A value is not acceptable; ``field`` names it as the store's method does."""

    def __init__(self, code: ErrorCode, field_name: str, **details: Detail):
        super().__init__(code, field=field_name, **details)
        self.field = field_name


class UnavailableError(ControlPlaneError):
    """The database cannot be reached, or stayed busy too long: nothing was changed, and the
    same call can be retried. Evaluation goes on from each worker's last snapshot.

    ``str()`` is the driver's reason (``cause``), for operators: logs and ``/readyz`` show it.
    """

    def __init__(self, cause: str):
        super().__init__(ErrorCode.UNAVAILABLE, cause=cause)
        self.cause = cause

    def __str__(self) -> str:
        return self.cause


@dataclass(frozen=True, slots=True)
class RecordedError:
    """An error kept in a record after it was raised (a schedule that could not be applied
    keeps why): its code and details, worded where it is shown, as the error would be."""

    code: ErrorCode
    details: Mapping[str, Detail]

    @classmethod
    def of(cls, error: ControlPlaneError) -> RecordedError:
        return cls(error.code, dict(error.details))
