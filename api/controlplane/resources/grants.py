"""The local grants slice: the ledger of local grants (contract section 4), what was reported
under each grant of quota to a local SDK, and what was given back. Not audited: it changes
nothing an administrator made, so it has no restore.

A grant's block of ids is signed (``flagsight_core.ids``), so the service knows its size and
time without a lookup; what it cannot know from the block is what happened to it since. One
row per grant, written by the first report or give-back that names it, keeps that:
``reported_through`` (the highest index reported, plus one) and ``returned`` (NULL until the
grant is given back). Three rules follow, each checked in the write transaction that changes
the row, so two workers or hosts cannot both pass it:

- a grant is given back once;
- never more than ``granted - reported_through``;
- no id given back (an index at or past ``granted - returned``) is reported afterwards.

Rows are kept for ``GIVE_BACK_WINDOW_S`` after the grant; an older grant can no longer be
given back (``GrantTooOld``), so a deleted row cannot be given back twice.

The ledger lives in the control plane (SQLite on one host, PostgreSQL for several) rather
than in the meter, because both meters would otherwise need a second store of their own;
``api.serving.local`` gives the quota back to the meter after the ledger recorded it, and
undoes the record when the meter cannot take it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from api.controlplane.sql_backend import Connection
from api.controlplane.sql_slice import SqlSlice

GIVE_BACK_WINDOW_S = 62 * 86400
"""How long after a grant its quota can be given back: the month it was granted in and at
least the whole of the next."""


@dataclass(frozen=True, slots=True)
class LocalGrant:
    """A grant as its signed block says: ``count`` ids from ``id_prefix``, made at ``granted_at``
    (Unix seconds) for ``organization_id``."""

    id_prefix: str
    organization_id: str
    count: int
    granted_at: int


@dataclass(frozen=True, slots=True)
class GrantState:
    """What the ledger holds for a grant: why it refused a report or a give-back."""

    granted: int
    reported_through: int
    returned: int | None


class GrantTooOld(ValueError):
    """The grant is past ``GIVE_BACK_WINDOW_S``: its ledger row may be gone."""


_STATE = "SELECT granted, reported_through, returned FROM local_grants WHERE id_prefix = ?"
_NEW = (
    "INSERT INTO local_grants"
    " (id_prefix, organization_id, granted, granted_at, reported_through, returned)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)


def _state(conn: Connection, id_prefix: str) -> GrantState | None:
    row = conn.execute(_STATE, (id_prefix,)).fetchone()
    return None if row is None else GrantState(row[0], row[1], row[2])


def _note_reported(conn: Connection, grant: LocalGrant, through: int) -> None:
    state = _state(conn, grant.id_prefix)
    if state is None:
        conn.execute(
            _NEW,
            (grant.id_prefix, grant.organization_id, grant.count, grant.granted_at, through, None),
        )
    elif state.returned is not None and through > state.granted - state.returned:
        raise _Refused(grant, state)
    elif through > state.reported_through:
        conn.execute(
            "UPDATE local_grants SET reported_through = ? WHERE id_prefix = ?",
            (through, grant.id_prefix),
        )


class GrantStore(Protocol):
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


class GrantSql(SqlSlice):
    """The grant ledger in SQL (see ``GrantStore``)."""

    def note_grants_reported(
        self, reported: Sequence[tuple[LocalGrant, int]]
    ) -> tuple[LocalGrant, GrantState] | None:
        """Record that each grant's ids were reported up to ``through`` (an index + 1).

        All or nothing: the first grant whose reported ids include one given back is returned
        with its state, and nothing is recorded."""
        try:
            with self._transaction(write=True) as conn:
                for grant, through in reported:
                    _note_reported(conn, grant, through)
        except _Refused as refused:
            return refused.grant, refused.state
        return None

    def give_back_grant(self, grant: LocalGrant, unused: int, now: float) -> GrantState | None:
        """Record that ``unused`` of the grant's quota is given back; None when recorded, else
        the state that refuses it (given back already, or more than was not reported).

        Raises ``GrantTooOld`` past the window. Rows past the window are deleted here."""
        if grant.granted_at < now - GIVE_BACK_WINDOW_S:
            raise GrantTooOld(grant.id_prefix)
        with self._transaction(write=True) as conn:
            conn.execute(
                "DELETE FROM local_grants WHERE granted_at < ?", (int(now - GIVE_BACK_WINDOW_S),)
            )
            state = _state(conn, grant.id_prefix)
            if state is None:
                conn.execute(
                    _NEW,
                    (grant.id_prefix, grant.organization_id, grant.count, grant.granted_at,
                     0, unused),
                )  # fmt: skip
                return None
            if state.returned is not None or unused > state.granted - state.reported_through:
                return state
            conn.execute(
                "UPDATE local_grants SET returned = ? WHERE id_prefix = ?",
                (unused, grant.id_prefix),
            )
        return None

    def undo_give_back(self, grant: LocalGrant) -> None:
        """Forget the grant's give-back (the meter could not take the quota back)."""
        with self._transaction(write=True) as conn:
            conn.execute(
                "UPDATE local_grants SET returned = NULL WHERE id_prefix = ?", (grant.id_prefix,)
            )


class _Refused(Exception):
    """Unwinds ``note_grants_reported``'s transaction (rolled back) with what refused it."""

    def __init__(self, grant: LocalGrant, state: GrantState):
        super().__init__(grant.id_prefix)
        self.grant, self.state = grant, state
