"""The control-plane store: the interface every backend implements.

Two backends implement the ``ControlPlaneStore`` protocol with the same SQL
(``sql_store``): ``SqliteControlPlaneStore``, the embedded default, and
``PostgresControlPlaneStore``, shared by every host of a cluster. Validation of shapes (JSON
types, lengths) belongs to the admin API; the store enforces what needs the data: uniqueness,
existence, plan limits, and that a SEGMENT rule names an existing segment. It reports those
with the errors of ``api.controlplane.errors``: codes and values, no words, no HTTP and no
driver's exception (the admin API words them, and maps them to 400, 404, 409 and 503).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from flagsight_core import Rule

from api.controlplane.changes import (
    Actor,
    AuditRecord,
    CreatedWebhook,
    Delivery,
    FlagBody,
    JsonDocument,
    Rollout,
    RolloutAction,
    RolloutPlan,
    Schedule,
    Webhook,
)
from api.controlplane.errors import ControlPlaneError, ErrorCode, InvalidError
from api.controlplane.model import (
    PLAN_MONTHLY_LIMITS,
    ApiKey,
    Environment,
    FlagMeta,
    FlagRecord,
    KeyContext,
    Organization,
    Plan,
    Segment,
)
from api.controlplane.sql_grants import GrantState, LocalGrant

MAX_MONTHLY_LIMIT = 10**15
LIMIT_FIELD = "monthly_evaluation_limit"
"""The field ``resolve_monthly_limit``'s refusals name (``InvalidError.field``)."""

SegmentId = tuple[str, str]
"""``(organization_id, segment_key)``."""


def resolve_monthly_limit(plan: Plan, requested: int | None, current: Organization | None) -> int:
    """The monthly evaluation limit an organization gets on ``plan``.

    Enterprise takes ``requested``, else keeps ``current``'s limit (an organization moved to
    enterprise without a limit keeps the quota it had until one is chosen); a new one without
    a limit is refused. Other plans take their plan's limit, and a ``requested`` value other
    than that limit is refused (echoing it back is fine).
    """
    if requested is not None and (
        isinstance(requested, bool) or not 1 <= requested <= MAX_MONTHLY_LIMIT
    ):
        raise InvalidError(
            ErrorCode.MONTHLY_LIMIT_OUT_OF_RANGE, LIMIT_FIELD, value=requested,
            maximum=MAX_MONTHLY_LIMIT,
        )  # fmt: skip
    plan_limit = PLAN_MONTHLY_LIMITS[plan]
    if plan_limit is not None:
        if requested is not None and requested != plan_limit:
            raise InvalidError(
                ErrorCode.MONTHLY_LIMIT_FIXED_BY_PLAN, LIMIT_FIELD, value=requested,
                plan=plan.value, plan_limit=plan_limit,
            )  # fmt: skip
        return plan_limit
    if requested is not None:
        return requested
    if current is not None:
        return current.monthly_evaluation_limit
    raise InvalidError(ErrorCode.MONTHLY_LIMIT_REQUIRED, LIMIT_FIELD, plan=plan.value)


@dataclass(frozen=True)
class ConfigSnapshot:
    """Everything evaluation and authentication need, read in one consistent transaction.

    ``segment_members`` holds only the segments whose version differs from what the reader
    already has (see ``ControlPlaneStore.read_config``); ``segment_versions`` lists them all.
    ``environment_versions`` is, per environment, the latest version that changed an answer
    evaluation can give there (its flags, its organization or the organization's segments).
    """

    version: int
    organizations: Sequence[Organization]
    environments: Sequence[Environment]
    api_keys: Mapping[str, KeyContext]  # sha256 hex of the key -> who it is
    flags: Sequence[FlagRecord]
    environment_versions: Mapping[str, int]
    segment_versions: Mapping[SegmentId, int]
    segment_members: Mapping[SegmentId, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class CreatedApiKey:
    """A new API key: ``plaintext`` exists only here, the store keeps its sha256."""

    record: ApiKey
    plaintext: str


class ControlPlaneStore(Protocol):
    """Organizations, environments, API keys, segments and flags, with a change counter; and
    their history (contract section 10): audit log, rollouts, schedules, webhooks.

    Every write that can change evaluation or authentication increases ``config_version()``,
    which is what each worker's ``ConfigCache`` polls. Every write takes ``actor`` (who makes
    it) and records its audit record, and queues the webhook events it raises, in the same
    transaction as the change.
    """

    # organizations
    def create_organization(
        self,
        name: str,
        plan: Plan,
        monthly_evaluation_limit: int | None = None,
        *,
        actor: str = Actor.SYSTEM,
    ) -> Organization:
        """Enterprise needs ``monthly_evaluation_limit``; other plans take their plan's limit."""
        ...

    def get_organization(self, organization_id: str) -> Organization | None: ...

    def list_organizations(self) -> list[Organization]: ...

    def update_organization(
        self,
        organization_id: str,
        *,
        plan: Plan | None = None,
        monthly_evaluation_limit: int | None = None,
        actor: str = Actor.SYSTEM,
    ) -> Organization: ...

    # environments
    def create_environment(
        self,
        organization_id: str,
        key: str,
        name: str | None = None,
        insights_enabled: bool = False,
        *,
        actor: str = Actor.SYSTEM,
    ) -> Environment:
        """Raises ``ConflictError`` when the organization already has an environment ``key``."""
        ...

    def get_environment(self, environment_id: str) -> Environment | None: ...

    def find_environment(self, organization_id: str, key: str) -> Environment | None: ...

    def list_environments(self, organization_id: str) -> list[Environment]: ...

    def update_environment(
        self,
        environment_id: str,
        *,
        name: str | None = None,
        insights_enabled: bool | None = None,
        actor: str = Actor.SYSTEM,
    ) -> Environment: ...

    # API keys
    def create_api_key(
        self, environment_id: str, name: str = "", *, actor: str = Actor.SYSTEM
    ) -> CreatedApiKey: ...

    def get_api_key(self, key_id: str) -> ApiKey | None: ...

    def list_api_keys(self, environment_id: str) -> list[ApiKey]:
        """The environment's keys that are not revoked, oldest first, without secrets."""
        ...

    def revoke_api_key(self, key_id: str, *, actor: str = Actor.SYSTEM) -> None:
        """Raises ``NotFoundError`` for an unknown or already revoked key."""
        ...

    # segments
    def put_segment(
        self,
        organization_id: str,
        key: str,
        user_identifiers: Sequence[str],
        *,
        actor: str = Actor.SYSTEM,
    ) -> tuple[Segment, bool]:
        """Create or replace; duplicates count once. Returns the segment and whether it is new."""
        ...

    def get_segment(self, organization_id: str, key: str) -> Segment | None: ...

    def segment_members(self, organization_id: str, key: str) -> list[str] | None: ...

    def list_segments(self, organization_id: str) -> list[Segment]: ...

    def delete_segment(self, organization_id: str, key: str, *, actor: str = Actor.SYSTEM) -> None:
        """Raises ``ConflictError`` while a flag's SEGMENT rule names the segment."""
        ...

    # flags
    def put_flag(
        self,
        environment_id: str,
        key: str,
        enabled: bool,
        archived: bool,
        rules: Sequence[Rule],
        *,
        meta: FlagMeta | None = None,
        actor: str = Actor.SYSTEM,
    ) -> tuple[FlagRecord, bool]:
        """Create or replace. Returns the flag and whether it was created. ``meta`` None keeps
        the flag's lifecycle metadata as it is (the defaults for a new flag)."""
        ...

    def get_flag(self, environment_id: str, key: str) -> FlagRecord | None: ...

    def list_flags(self, environment_id: str) -> list[FlagRecord]: ...

    def delete_flag(self, environment_id: str, key: str, *, actor: str = Actor.SYSTEM) -> None:
        """Its rollout goes with it."""
        ...

    # audit log
    def list_audit(self, organization_id: str, limit: int = 1000) -> list[AuditRecord]:
        """Newest first."""
        ...

    def get_audit(self, audit_id: str) -> AuditRecord | None: ...

    def restore(self, audit_id: str, *, actor: str = Actor.SYSTEM) -> AuditRecord:
        """Put the record's target back as it was before that change; returns the restore's
        own record. ``ConflictError`` for a target that cannot be restored, or that already is
        as it was (``sql_audit`` lists what can be)."""
        ...

    def restore_refusals(self, records: Iterable[AuditRecord]) -> dict[str, ControlPlaneError]:
        """Why ``restore`` would refuse each of these records now, by record id (a record
        that can be restored is absent): the restore's own checks, against the targets as
        they are, writing nothing. What a page offers; the restore itself checks again."""
        ...

    # guarded rollouts
    def start_rollout(
        self, environment_id: str, flag_key: str, plan: RolloutPlan, *, actor: str = Actor.SYSTEM
    ) -> Rollout:
        """Replace any rollout of the flag; its first percentage rule goes to the first step
        (``ConflictError`` without one)."""
        ...

    def get_rollout(self, environment_id: str, flag_key: str) -> Rollout | None: ...

    def running_rollouts(self) -> list[Rollout]: ...

    def stop_rollout(
        self, environment_id: str, flag_key: str, *, actor: str = Actor.SYSTEM
    ) -> None:
        """Forget the rollout; the flag stays at its percentage."""
        ...

    def note_rollout(
        self,
        environment_id: str,
        flag_key: str,
        step: int,
        guard: JsonDocument | None,
        waiting_reason: str | None,
    ) -> bool:
        """Record the guardian's latest evidence on ``step`` (``guard``) and, when the step's
        time has passed without a decision, that it waits and why (the first wait's time is
        kept); False when the rollout is no longer running at that step. Not audited: nothing
        in the control plane changes."""
        ...

    def decide_rollout(
        self,
        environment_id: str,
        flag_key: str,
        step: int,
        action: RolloutAction,
        reason: str,
        statistics: JsonDocument | None,
        *,
        guard: JsonDocument | None = None,
    ) -> Rollout | None:
        """Apply the guardian's decision on ``step``, keeping ``guard`` (its evidence) as the
        rollout's latest; None (nothing changed) when the rollout is no longer running at that
        step."""
        ...

    # scheduled changes
    def create_schedule(
        self, environment_id: str, flag_key: str, at: float, body: FlagBody, *,
        actor: str = Actor.SYSTEM,
    ) -> Schedule: ...  # fmt: skip

    def list_schedules(self, environment_id: str, flag_key: str) -> list[Schedule]: ...

    def cancel_schedule(
        self, environment_id: str, flag_key: str, schedule_id: str, *, actor: str = Actor.SYSTEM
    ) -> None:
        """Only a pending schedule can be cancelled (else ``NotFoundError``)."""
        ...

    def apply_due_schedules(self, now: float) -> list[Schedule]:
        """Apply the pending schedules due at ``now`` (unix seconds); safe from every worker."""
        ...

    # webhooks and their outbox
    def create_webhook(
        self, organization_id: str, url: str, events: list[str], *, actor: str = Actor.SYSTEM
    ) -> CreatedWebhook: ...

    def list_webhooks(self, organization_id: str) -> list[Webhook]: ...

    def delete_webhook(self, webhook_id: str, *, actor: str = Actor.SYSTEM) -> None: ...

    def due_deliveries(
        self, now: float, limit: int = 100, *, claim_for_s: float | None = None
    ) -> list[Delivery]: ...

    def release_deliveries(self, seqs: list[int], now: float) -> None: ...

    def pending_deliveries(self) -> int: ...

    def record_delivery(
        self, seq: int, now: float, *, error: str | None, retry_at: float | None
    ) -> None: ...

    def record_usage_threshold(
        self, organization_id: str, month: str, percent: int, evaluations: int, limit: int
    ) -> bool:
        """Queue ``usage.threshold`` unless already announced for that month; True if new."""
        ...

    # what workers poll and load
    # the ledger of local grants (contract section 4; ``sql_grants``)
    def note_grants_reported(
        self, reported: Sequence[tuple[LocalGrant, int]]
    ) -> tuple[LocalGrant, GrantState] | None:
        """Each grant's ids reported up to ``through``; all or nothing: the first grant whose
        ids were given back is returned with its state, and nothing is recorded."""
        ...

    def give_back_grant(self, grant: LocalGrant, unused: int, now: float) -> GrantState | None:
        """None once recorded; else the state that refuses it. ``GrantTooOld`` past the
        window."""
        ...

    def undo_give_back(self, grant: LocalGrant) -> None: ...

    def config_version(self) -> int: ...

    def read_config(self, known_segments: Mapping[SegmentId, int]) -> ConfigSnapshot:
        """A consistent snapshot; members only of segments whose version is not as known."""
        ...

    # deployment secrets
    def signing_key(self) -> bytes:
        """32 random bytes, created once and shared by every worker (signs evaluation ids)."""
        ...

    def admin_token_hash(self) -> str | None: ...

    def set_admin_token_hash(self, token_sha256_hex: str) -> None: ...

    def close(self) -> None: ...


RESTORERS = frozenset(
    {"flag", "organization", "environment", "apiKey", "schedule", "webhook", "segment", "rollout"}
)
"""The target kinds ``restore`` knows (``AuditMixin._restorers``)."""


def can_restore(record: AuditRecord) -> bool:
    """Whether ``restore`` may put this record's target back, judged from the record alone:
    false for a kind without a restore, the creation of an organization or environment, and a
    webhook's deletion. (A segment change made before its members were kept, or a target
    already as it was, is only known by trying.)"""
    kind = record.target.partition(":")[0]
    if kind not in RESTORERS:
        return False
    if kind in ("organization", "environment"):
        return record.before is not None
    if kind == "webhook":
        return record.before is None
    return True
