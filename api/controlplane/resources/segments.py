"""The segments slice: its codes, its part of the store, its SQL and its restore.

A segment is a named set of user identifiers in an organization, with (contract 12, since
migration 0010) the identifiers it excludes and its conditions on a user's attributes, named
by flags' rules (a SEGMENT rule, a PERCENTAGE rule within a segment). The audit record of a
change keeps its sizes and conditions; the members and excluded members it had before each
change are kept in ``segment_history`` (members since migration 0003, the rest since 0010),
which is what a restore puts back.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import NamedTuple, Protocol

import msgspec
from flagsight_core.conditions import Condition, conditions_from_json
from flagsight_core.contract import KEY_PATTERN, MAX_SEGMENT_SIZE

from api.controlplane import documents
from api.controlplane.changes import Actor, AuditRecord
from api.controlplane.errors import (
    ConflictError,
    ConflictReason,
    InvalidError,
    NotFoundError,
    Resource,
)
from api.controlplane.model import Segment
from api.controlplane.resources.audit import Restore, not_restorable, restores
from api.controlplane.sql_backend import Connection, Row
from api.controlplane.sql_slice import SqlSlice


class SegmentCode(StrEnum):
    SEGMENT_NOT_FOUND = "segment_not_found"
    """``NotFoundError``: details["identifier"] is the key the caller gave."""
    SEGMENT_IN_USE = "segment_in_use"
    """``ConflictError``: ``segment`` is named by a rule of ``flag`` in ``environment`` (its
    key)."""
    SEGMENT_MEMBERS_NOT_KEPT = "segment_members_not_kept"
    """A restore refused (``ConflictReason.NOT_RESTORABLE``): the change was made before the
    members were kept."""
    SEGMENT_STILL_ABSENT = "segment_still_absent"
    """A restore that would change nothing (``ConflictReason.NOTHING_TO_RESTORE``)."""
    # InvalidError: details["field"] is the store's field at fault
    SEGMENT_KEY_MALFORMED = "segment_key_malformed"
    SEGMENT_TOO_LARGE = "segment_too_large"


def segment_of(row: Row) -> Segment:
    return Segment(
        row["organization_id"], row["key"], row["size"], row["updated_at"],
        row["excluded_size"], conditions_from_json(msgspec.json.decode(row["conditions"])),
    )  # fmt: skip


def segment_keys_named(rules_text: str) -> set[str]:
    """The segments a flag's rules (their JSON, as stored) name: a rule's ``segment`` (a
    SEGMENT rule's, a PERCENTAGE rule's within a segment), as ``ruleset.named_segments``."""
    return {
        r["segment"] for r in msgspec.json.decode(rules_text) if isinstance(r.get("segment"), str)
    }


def conditions_text(conditions: Sequence[Condition]) -> str:
    """Conditions as stored: their JSON array (``Condition.to_json``)."""
    return msgspec.json.encode([c.to_json() for c in conditions]).decode()


_SUMMARY = "organization_id, key, size, updated_at, excluded_size, conditions"
"""The columns of a segment's summary (``segment_of``): all but its identifiers."""
_SEGMENT_BY_KEY = f"SELECT {_SUMMARY} FROM segments WHERE organization_id = ? AND key = ?"
"""One key, one segment: read outside a transaction (``get_*``) and inside the caller's."""


def _distinct(identifiers: Sequence[str], field_name: str) -> list[str]:
    """The identifiers once each, in the order first given; ``InvalidError`` past the size
    (``field_name``: which list, ``user_identifiers`` or ``excluded_user_identifiers``)."""
    distinct = list(dict.fromkeys(identifiers))
    if len(distinct) > MAX_SEGMENT_SIZE:
        raise InvalidError(
            SegmentCode.SEGMENT_TOO_LARGE, field_name, count=len(distinct),
            maximum=MAX_SEGMENT_SIZE,
        )  # fmt: skip
    return distinct


class _Lists(NamedTuple):
    """A segment's identifiers as stored: JSON arrays of distinct identifiers."""

    members: bytes
    excluded: bytes


class SegmentStore(Protocol):
    def put_segment(
        self,
        organization_id: str,
        key: str,
        user_identifiers: Sequence[str],
        *,
        excluded_user_identifiers: Sequence[str] = (),
        conditions: Sequence[Condition] = (),
        actor: str = Actor.SYSTEM,
    ) -> tuple[Segment, bool]:
        """Create or replace the whole segment (its lists and conditions: what is not given
        is empty); duplicates count once. Returns the segment and whether it is new."""
        ...

    def get_segment(self, organization_id: str, key: str) -> Segment | None: ...

    def segment_members(self, organization_id: str, key: str) -> list[str] | None: ...

    def segment_excluded(self, organization_id: str, key: str) -> list[str] | None:
        """The identifiers the segment excludes, in the order first given (None: no such
        segment)."""
        ...

    def list_segments(self, organization_id: str) -> list[Segment]: ...

    def delete_segment(self, organization_id: str, key: str, *, actor: str = Actor.SYSTEM) -> None:
        """Raises ``ConflictError`` while a flag's SEGMENT rule names the segment."""
        ...


class SegmentSql(SqlSlice):
    """Segments in SQL (see ``SegmentStore``)."""

    codes = SegmentCode

    def put_segment(
        self,
        organization_id: str,
        key: str,
        user_identifiers: Sequence[str],
        *,
        excluded_user_identifiers: Sequence[str] = (),
        conditions: Sequence[Condition] = (),
        actor: str = Actor.SYSTEM,
    ) -> tuple[Segment, bool]:
        if not KEY_PATTERN.fullmatch(key):
            raise InvalidError(SegmentCode.SEGMENT_KEY_MALFORMED, "key", value=key)
        members = _distinct(user_identifiers, "user_identifiers")
        excluded = _distinct(excluded_user_identifiers, "excluded_user_identifiers")
        segment = Segment(
            organization_id, key, len(members), self._now(), len(excluded), tuple(conditions)
        )
        with self._transaction(write=True) as conn:
            self._require_organization(conn, organization_id)
            record = self._write_segment(
                conn, segment, _Lists(msgspec.json.encode(members), msgspec.json.encode(excluded)),
                actor=actor, action="segment.put",
            )  # fmt: skip
        return segment, record.before is None

    @staticmethod
    def _segment_in(conn: Connection, organization_id: str, key: str) -> Segment | None:
        row = conn.execute(_SEGMENT_BY_KEY, (organization_id, key)).fetchone()
        return segment_of(row) if row else None

    def _write_segment(
        self,
        conn: Connection,
        segment: Segment,
        lists: _Lists,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Create or replace ``segment`` with ``lists`` (its members and excluded members,
        JSON arrays) and its conditions inside the caller's write transaction: audit the
        change, keep the lists it had (``_keep_members``) and bump the version, so every
        worker serves the new segment within a poll. Putting a segment and restoring one both
        come here."""
        organization_id, key = segment.organization_id, segment.key
        before = self._segment_in(conn, organization_id, key)
        record = self._audit(
            conn, organization_id, actor, action, f"segment:{organization_id}/{key}",
            documents.segment(before) if before else None, documents.segment(segment),
            restored_from,
        )  # fmt: skip
        self._keep_members(conn, record, organization_id, key)
        version = self._bump(conn)
        conn.execute(
            "INSERT INTO segments (organization_id, key, size, members, updated_at, version,"
            " excluded_size, excluded, conditions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (organization_id, key) DO UPDATE SET size = excluded.size,"
            " members = excluded.members, updated_at = excluded.updated_at,"
            " version = excluded.version, excluded_size = excluded.excluded_size,"
            " excluded = excluded.excluded, conditions = excluded.conditions",
            (
                organization_id, key, segment.size, lists.members, segment.updated_at, version,
                segment.excluded_size, lists.excluded, conditions_text(segment.conditions),
            ),
        )  # fmt: skip
        conn.execute(
            "UPDATE organizations SET version = ? WHERE id = ?", (version, organization_id)
        )
        return record

    @staticmethod
    def _keep_members(
        conn: Connection, record: AuditRecord, organization_id: str, key: str
    ) -> None:
        """Copy the segment's lists and conditions as they are now (NULL: there is no such
        segment) into ``segment_history`` under ``record``, the change about to be made: the
        audit record keeps only the sizes, and a restore needs the identifiers. Copied inside
        the database, so a large segment never passes through Python for it."""
        conn.execute(
            "INSERT INTO segment_history (audit_id, organization_id, key, members, excluded,"
            " conditions) SELECT ?, ?, ?, s.members, s.excluded, s.conditions"
            " FROM (SELECT 1 AS one) AS o LEFT JOIN segments s"
            " ON s.organization_id = ? AND s.key = ?",
            (record.id, organization_id, key, organization_id, key),
        )

    def get_segment(self, organization_id: str, key: str) -> Segment | None:
        row = self._fetchone(_SEGMENT_BY_KEY, (organization_id, key))
        return segment_of(row) if row else None

    def segment_members(self, organization_id: str, key: str) -> list[str] | None:
        row = self._fetchone(
            "SELECT members FROM segments WHERE organization_id = ? AND key = ?",
            (organization_id, key),
        )
        return msgspec.json.decode(row[0]) if row else None

    def segment_excluded(self, organization_id: str, key: str) -> list[str] | None:
        row = self._fetchone(
            "SELECT excluded FROM segments WHERE organization_id = ? AND key = ?",
            (organization_id, key),
        )
        return msgspec.json.decode(row[0]) if row else None

    def list_segments(self, organization_id: str) -> list[Segment]:
        rows = self._fetchall(
            f"SELECT {_SUMMARY} FROM segments WHERE organization_id = ? ORDER BY key",
            (organization_id,),
        )
        return [segment_of(row) for row in rows]

    def delete_segment(self, organization_id: str, key: str, *, actor: str = Actor.SYSTEM) -> None:
        with self._transaction(write=True) as conn:
            self._delete_segment(conn, organization_id, key, actor=actor, action="segment.deleted")

    def _delete_segment(
        self,
        conn: Connection,
        organization_id: str,
        key: str,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Delete inside the caller's write transaction, refused while a flag's rule names the
        segment; its members are kept (``_keep_members``). Deleting a segment and restoring
        its creation both come here."""
        before = self._segment_in(conn, organization_id, key)
        if before is None:
            raise NotFoundError(SegmentCode.SEGMENT_NOT_FOUND, Resource.SEGMENT, key)
        self._check_segment_unused(conn, organization_id, key)
        record = self._audit(
            conn, organization_id, actor, action, f"segment:{organization_id}/{key}",
            documents.segment(before), None, restored_from,
        )  # fmt: skip
        self._keep_members(conn, record, organization_id, key)
        conn.execute(
            "DELETE FROM segments WHERE organization_id = ? AND key = ?", (organization_id, key)
        )
        conn.execute(
            "UPDATE organizations SET version = ? WHERE id = ?",
            (self._bump(conn), organization_id),
        )
        return record

    @staticmethod
    def _check_segment_unused(conn: Connection, organization_id: str, key: str) -> None:
        users = conn.execute(
            "SELECT e.key AS environment, f.key AS flag, f.rules FROM flags f"
            " JOIN environments e ON e.id = f.environment_id"
            " WHERE e.organization_id = ? ORDER BY e.rowid, f.key",
            (organization_id,),
        ).fetchall()
        for row in users:
            if key in segment_keys_named(row["rules"]):
                raise ConflictError(
                    SegmentCode.SEGMENT_IN_USE, ConflictReason.SEGMENT_IN_USE, segment=key,
                    flag=row["flag"], environment=row["environment"],
                )  # fmt: skip

    @restores("segment")
    def _restore_segment(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """Put the segment as it was before that change back: its members, excluded members
        and conditions (``segment_history``), with its ``updatedAt`` then; a change kept
        before migration 0010 puts back its members alone (segments had neither exclusions
        nor conditions then). A creation is undone by deleting the segment, refused (as a
        deletion is) while a flag's rule names it."""
        organization_id, _, key = ident.partition("/")
        kept = conn.execute(
            "SELECT members, excluded, conditions FROM segment_history WHERE audit_id = ?",
            (record.id,),
        ).fetchone()
        if kept is None:
            raise not_restorable(record, SegmentCode.SEGMENT_MEMBERS_NOT_KEPT)
        if kept["members"] is None:
            if self._segment_in(conn, organization_id, key) is None:
                raise ConflictError(
                    SegmentCode.SEGMENT_STILL_ABSENT, ConflictReason.NOTHING_TO_RESTORE,
                    segment=key,
                )  # fmt: skip
            self._check_segment_unused(conn, organization_id, key)
            return lambda actor: self._delete_segment(
                conn, organization_id, key, actor=actor, action="restore", restored_from=record.id
            )
        before = record.before  # the segment as it was: it existed, its members were kept
        conditions = conditions_from_json(msgspec.json.decode(kept["conditions"] or "[]"))
        segment = Segment(
            organization_id, key, before["size"], before["updatedAt"],
            before.get("excludedSize", 0), conditions,
        )  # fmt: skip
        excluded = b"[]" if kept["excluded"] is None else bytes(kept["excluded"])
        lists = _Lists(bytes(kept["members"]), excluded)
        return lambda actor: self._write_segment(
            conn, segment, lists, actor=actor, action="restore", restored_from=record.id
        )
