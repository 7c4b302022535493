"""The audit log's slice: reading it, and restoring a target to what a record's ``before``
says, itself as an audited change (action ``restore``, ``restoredFrom`` the record's id).

Each slice restores its own target kind: a method marked ``@restores("flag")`` beside its SQL,
found here by that mark in whatever store the slices are composed into, so this module names
no kind. What the slices restore (each one's method says how): a flag (created, changed or
deleted), an organization's plan and limit, an environment's name and insights switch, an API
key (its revocation taken back, or its creation undone by revoking it), a segment (its members
put back from ``segment_history``, or its creation undone by deleting it), a schedule (its
creation undone by cancelling it while it is pending, its cancellation by making it pending
again while its time is ahead), a rollout (stopped or held: back as it was) and a webhook's
creation (by deleting it). A kind no slice restores is refused with
``AuditCode.KIND_HAS_NO_RESTORE``; a slice refuses what it never restores (``not_restorable``).

A restorer first checks the target as it is now and then returns its write (``Restore``):
``restore`` applies it, ``restore_refusals`` only runs the checks (reading, in one
transaction), so what the dashboard offers and what a restore does are judged alike (a key
already revoked offers no undo of its creation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from functools import cache
from typing import Protocol, TypeVar

from api.controlplane.changes import Actor, AuditRecord
from api.controlplane.errors import (
    ConflictError,
    ConflictReason,
    ControlPlaneError,
    NotFoundError,
    Resource,
)
from api.controlplane.sql_backend import Connection
from api.controlplane.sql_history import audit_from_row
from api.controlplane.sql_slice import SqlSlice

AUDIT_PAGE = 1000

Restore = Callable[[str], AuditRecord]
"""A restore that has been checked against the target as it is now: called with the actor,
it writes (inside the same transaction) and returns the restore's own record."""

Restorer = Callable[[Connection, AuditRecord, str], Restore]
"""A kind's restorer, bound to the store: the record's target id (after ``kind:``) as third
argument; raises the ``ControlPlaneError`` that refuses the restore."""

_Method = TypeVar("_Method", bound=Callable[..., Restore])


class AuditCode(StrEnum):
    AUDIT_RECORD_NOT_FOUND = "audit_record_not_found"
    """``NotFoundError``: details["identifier"] is the id the caller gave."""
    KIND_HAS_NO_RESTORE = "kind_has_no_restore"
    """A restore refused (``ConflictReason.NOT_RESTORABLE``): no slice restores the kind of the
    record's target (audit_id, action and target name the record)."""


def restores(kind: str) -> Callable[[_Method], _Method]:
    """Mark a slice's method as the restorer of the records whose target is ``kind:...``
    (a ``Restorer`` once bound)."""

    def mark(method: _Method) -> _Method:
        method.restores_kind = kind  # type: ignore[attr-defined]
        return method

    return mark


@cache
def restorer_names(store: type) -> dict[str, str]:
    """Target kind -> the name of its restorer, for every slice composed into ``store``
    (``restores``); a kind two slices claim is an error."""
    found: dict[str, str] = {}
    for klass in store.__mro__:
        for name, value in vars(klass).items():
            kind = getattr(value, "restores_kind", None)
            if kind is None or found.get(kind) == name:
                continue
            if kind in found:
                raise TypeError(f"{store.__name__}: {found[kind]} and {name} both restore {kind}")
            found[kind] = name
    return found


def not_restorable(record: AuditRecord, code: str) -> ConflictError:
    """The refusal of a change its slice never restores (``code`` says why), naming the
    record."""
    return ConflictError(
        code, ConflictReason.NOT_RESTORABLE, audit_id=record.id, action=record.action,
        target=record.target,
    )  # fmt: skip


class AuditStore(Protocol):
    def list_audit(self, organization_id: str, limit: int = 1000) -> list[AuditRecord]:
        """Newest first."""
        ...

    def get_audit(self, audit_id: str) -> AuditRecord | None: ...

    def restore(self, audit_id: str, *, actor: str = Actor.SYSTEM) -> AuditRecord:
        """Put the record's target back as it was before that change; returns the restore's
        own record. ``ConflictError`` for a target that cannot be restored, or that already is
        as it was (each slice's restorer says what it can put back)."""
        ...

    def restore_refusals(self, records: Iterable[AuditRecord]) -> dict[str, ControlPlaneError]:
        """Why ``restore`` would refuse each of these records now, by record id (a record
        that can be restored is absent): the restore's own checks, against the targets as
        they are, writing nothing. What a page offers; the restore itself checks again."""
        ...


class AuditSql(SqlSlice):
    """The audit log in SQL (see ``AuditStore``)."""

    codes = AuditCode

    def list_audit(self, organization_id: str, limit: int = AUDIT_PAGE) -> list[AuditRecord]:
        rows = self._fetchall(
            "SELECT * FROM audit_log WHERE organization_id = ? ORDER BY seq DESC LIMIT ?",
            (organization_id, limit),
        )
        return [audit_from_row(row) for row in rows]

    def get_audit(self, audit_id: str) -> AuditRecord | None:
        row = self._fetchone("SELECT * FROM audit_log WHERE id = ?", (audit_id,))
        return audit_from_row(row) if row else None

    def restore(self, audit_id: str, *, actor: str = Actor.SYSTEM) -> AuditRecord:
        with self._transaction(write=True) as conn:
            row = conn.execute("SELECT * FROM audit_log WHERE id = ?", (audit_id,)).fetchone()
            if row is None:
                raise NotFoundError(
                    AuditCode.AUDIT_RECORD_NOT_FOUND, Resource.AUDIT_RECORD, audit_id
                )
            return self._checked_restore(conn, audit_from_row(row))(actor)

    def restore_refusals(self, records: Iterable[AuditRecord]) -> dict[str, ControlPlaneError]:
        with self._transaction(write=False) as conn:
            refusals = {}
            for record in records:
                try:
                    self._checked_restore(conn, record)
                except ControlPlaneError as exc:  # kept without the frames it was raised in
                    refusals[record.id] = exc.with_traceback(None)
            return refusals

    def _checked_restore(self, conn: Connection, record: AuditRecord) -> Restore:
        """The record's restore, checked against its target as it is now (the same checks
        whether it is then applied or only judged); the error that refuses it otherwise."""
        kind, _, ident = record.target.partition(":")
        restorer = self._restorers().get(kind)
        if restorer is None:
            raise not_restorable(record, AuditCode.KIND_HAS_NO_RESTORE)
        return restorer(conn, record, ident)

    def _restorers(self) -> dict[str, Restorer]:
        """Each restorable target kind's restorer, as the composed slices registered them."""
        return {kind: getattr(self, name) for kind, name in restorer_names(type(self)).items()}
