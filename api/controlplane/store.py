"""The control-plane store, composed of its slices: the one place that lists them.

``ControlPlaneStore`` is the interface every backend implements, each slice's ``Protocol``
side by side; ``SqlControlPlaneStore`` implements it once in SQL, each slice's mixin on the
shared ``SqlSlice``, and two backends give it transactions: ``SqliteControlPlaneStore``, the
embedded default, and ``PostgresControlPlaneStore``, shared by every host of a cluster. A new
slice (``api.controlplane.resources``) is one line in each class below; its restorer and its
error codes are found from the composed class (``resources.audit.restorer_names``,
``ErrorCode``).

Validation of shapes (JSON types, lengths) belongs to the admin API; the store enforces what
needs the data: uniqueness, existence, plan limits, and that a SEGMENT rule names an existing
segment. It reports those with the errors of ``api.controlplane.errors``: codes and values, no
words, no HTTP and no driver's exception (the admin API words them, and maps them to 400, 404,
409 and 503).
"""

from __future__ import annotations

from typing import Protocol

from api.controlplane.errors import CodeCatalogue
from api.controlplane.resources.api_keys import ApiKeySql, ApiKeyStore
from api.controlplane.resources.audit import AuditSql, AuditStore
from api.controlplane.resources.code_references import CodeReferenceSql, CodeReferenceStore
from api.controlplane.resources.deployment import DeploymentSql, DeploymentStore
from api.controlplane.resources.environments import EnvironmentSql, EnvironmentStore
from api.controlplane.resources.flags import FlagSql, FlagStore
from api.controlplane.resources.grants import GrantSql, GrantStore
from api.controlplane.resources.metrics import MetricSql, MetricStore
from api.controlplane.resources.organizations import (
    MAX_MONTHLY_LIMIT,
    OrganizationSql,
    OrganizationStore,
)
from api.controlplane.resources.rollouts import RolloutSql, RolloutStore
from api.controlplane.resources.schedules import ScheduleSql, ScheduleStore
from api.controlplane.resources.segments import SegmentSql, SegmentStore
from api.controlplane.resources.snapshot import SnapshotSql, SnapshotStore
from api.controlplane.resources.stale_flags import StaleFlagSql, StaleFlagStore
from api.controlplane.resources.webhooks import WebhookSql, WebhookStore
from api.controlplane.sql_slice import SqlSlice

__all__ = ["MAX_MONTHLY_LIMIT", "ControlPlaneStore", "ErrorCode", "SqlControlPlaneStore"]


class ControlPlaneStore(
    OrganizationStore,
    EnvironmentStore,
    ApiKeyStore,
    SegmentStore,
    FlagStore,
    AuditStore,
    RolloutStore,
    ScheduleStore,
    WebhookStore,
    GrantStore,
    SnapshotStore,
    DeploymentStore,
    CodeReferenceStore,
    StaleFlagStore,
    MetricStore,
    Protocol,
):
    """Organizations, environments, API keys, segments and flags, with a change counter; and
    their history (contract section 10): audit log, rollouts, schedules, webhooks.

    Every write that can change evaluation or authentication increases ``config_version()``,
    which is what each worker's ``ConfigCache`` polls. Every write takes ``actor`` (who makes
    it) and records its audit record, and queues the webhook events it raises, in the same
    transaction as the change.
    """

    def close(self) -> None: ...


class SqlControlPlaneStore(
    OrganizationSql,
    EnvironmentSql,
    ApiKeySql,
    SegmentSql,
    FlagSql,
    AuditSql,
    RolloutSql,
    ScheduleSql,
    WebhookSql,
    GrantSql,
    SnapshotSql,
    DeploymentSql,
    CodeReferenceSql,
    StaleFlagSql,
    MetricSql,
    SqlSlice,
):
    """``ControlPlaneStore`` on a SQL ``backend`` (``sql_backend``), whose schema it brings up
    to date at once. Every change writes its audit record (and queues its webhook events) in
    its own transaction."""


ErrorCode = CodeCatalogue.of(SqlControlPlaneStore)
"""Every code the store raises, each slice's own (``errors.ErrorCode`` is this)."""
