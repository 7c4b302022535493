"""The organizations slice: its codes, its part of the store, its SQL and its restore.

An organization is created with a plan and a monthly evaluation limit (the plan's, or the one
enterprise chooses), and updated; it is never deleted, so its creation has no restore.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from api.controlplane import documents
from api.controlplane.changes import Actor, AuditRecord
from api.controlplane.errors import InvalidError, NotFoundError, Resource
from api.controlplane.model import PLAN_MONTHLY_LIMITS, Organization, Plan
from api.controlplane.resources.audit import Restore, not_restorable, restores
from api.controlplane.sql_backend import Connection, Row
from api.controlplane.sql_history import new_id
from api.controlplane.sql_slice import SqlSlice

MAX_MONTHLY_LIMIT = 10**15
LIMIT_FIELD = "monthly_evaluation_limit"
"""The field ``resolve_monthly_limit``'s refusals name (``InvalidError.field``)."""


class OrganizationCode(StrEnum):
    ORGANIZATION_NOT_FOUND = "organization_not_found"
    """``NotFoundError``: details["identifier"] is the id the caller gave."""
    ORGANIZATIONS_NEVER_DELETED = "organizations_never_deleted"
    """A restore of an organization's creation refused (``ConflictReason.NOT_RESTORABLE``)."""
    # InvalidError: details["field"] is ``LIMIT_FIELD``
    MONTHLY_LIMIT_OUT_OF_RANGE = "monthly_limit_out_of_range"
    MONTHLY_LIMIT_FIXED_BY_PLAN = "monthly_limit_fixed_by_plan"
    """Only enterprise chooses its limit; ``plan``'s is ``plan_limit``."""
    MONTHLY_LIMIT_REQUIRED = "monthly_limit_required"


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
            OrganizationCode.MONTHLY_LIMIT_OUT_OF_RANGE, LIMIT_FIELD, value=requested,
            maximum=MAX_MONTHLY_LIMIT,
        )  # fmt: skip
    plan_limit = PLAN_MONTHLY_LIMITS[plan]
    if plan_limit is not None:
        if requested is not None and requested != plan_limit:
            raise InvalidError(
                OrganizationCode.MONTHLY_LIMIT_FIXED_BY_PLAN, LIMIT_FIELD, value=requested,
                plan=plan.value, plan_limit=plan_limit,
            )  # fmt: skip
        return plan_limit
    if requested is not None:
        return requested
    if current is not None:
        return current.monthly_evaluation_limit
    raise InvalidError(OrganizationCode.MONTHLY_LIMIT_REQUIRED, LIMIT_FIELD, plan=plan.value)


def organization_of(row: Row) -> Organization:
    return Organization(row["id"], row["name"], Plan(row["plan"]), row["monthly_evaluation_limit"])


class OrganizationStore(Protocol):
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


class OrganizationSql(SqlSlice):
    """Organizations in SQL (see ``OrganizationStore``)."""

    codes = OrganizationCode

    def create_organization(
        self,
        name: str,
        plan: Plan,
        monthly_evaluation_limit: int | None = None,
        *,
        actor: str = Actor.SYSTEM,
    ) -> Organization:
        plan = Plan(plan)
        limit = resolve_monthly_limit(plan, monthly_evaluation_limit, None)
        organization = Organization(new_id("org_"), name, plan, limit)
        with self._transaction(write=True) as conn:
            conn.execute(
                "INSERT INTO organizations VALUES (?, ?, ?, ?, ?, ?)",
                (organization.id, name, plan.value, limit, self._now(), self._bump(conn)),
            )
            self._audit(
                conn, organization.id, actor, "organization.created",
                f"organization:{organization.id}", None, documents.organization(organization),
            )  # fmt: skip
        return organization

    def get_organization(self, organization_id: str) -> Organization | None:
        row = self._fetchone("SELECT * FROM organizations WHERE id = ?", (organization_id,))
        return organization_of(row) if row else None

    def list_organizations(self) -> list[Organization]:
        rows = self._fetchall("SELECT * FROM organizations ORDER BY rowid")
        return [organization_of(row) for row in rows]

    def update_organization(
        self,
        organization_id: str,
        *,
        plan: Plan | None = None,
        monthly_evaluation_limit: int | None = None,
        actor: str = Actor.SYSTEM,
    ) -> Organization:
        with self._transaction(write=True) as conn:
            row = conn.execute(
                "SELECT * FROM organizations WHERE id = ?", (organization_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(
                    OrganizationCode.ORGANIZATION_NOT_FOUND, Resource.ORGANIZATION,
                    organization_id,
                )  # fmt: skip
            current = organization_of(row)
            new_plan = current.plan if plan is None else Plan(plan)
            limit = resolve_monthly_limit(new_plan, monthly_evaluation_limit, current)
            conn.execute(
                "UPDATE organizations SET plan = ?, monthly_evaluation_limit = ?, version = ?"
                " WHERE id = ?",
                (new_plan.value, limit, self._bump(conn), organization_id),
            )
            updated = Organization(current.id, current.name, new_plan, limit)
            self._audit(
                conn, current.id, actor, "organization.updated", f"organization:{current.id}",
                documents.organization(current), documents.organization(updated),
            )  # fmt: skip
        return updated

    @staticmethod
    def _require_organization(conn: Connection, organization_id: str) -> None:
        if conn.execute("SELECT 1 FROM organizations WHERE id = ?", (organization_id,)).fetchone():
            return
        raise NotFoundError(
            OrganizationCode.ORGANIZATION_NOT_FOUND, Resource.ORGANIZATION, organization_id
        )

    @restores("organization")
    def _restore_organization(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """The plan and limit put back; a creation cannot be undone (organizations are never
        deleted)."""
        before = record.before
        if before is None:
            raise not_restorable(record, OrganizationCode.ORGANIZATIONS_NEVER_DELETED)
        row = conn.execute("SELECT * FROM organizations WHERE id = ?", (before["id"],)).fetchone()
        if row is None:
            raise NotFoundError(
                OrganizationCode.ORGANIZATION_NOT_FOUND, Resource.ORGANIZATION, before["id"]
            )
        current = organization_of(row)

        def write(actor: str) -> AuditRecord:
            conn.execute(
                "UPDATE organizations SET plan = ?, monthly_evaluation_limit = ?, version = ?"
                " WHERE id = ?",
                (before["plan"], before["monthlyEvaluationLimit"], self._bump(conn), current.id),
            )
            restored = Organization(
                current.id, current.name, Plan(before["plan"]), before["monthlyEvaluationLimit"]
            )
            return self._audit(
                conn, current.id, actor, "restore", record.target,
                documents.organization(current), documents.organization(restored), record.id,
            )  # fmt: skip

        return write
