"""The stale flags slice (contract section 14): the webhook event ``flag.stale``, once per
flag and transition.

The pipeline decides every flag's lifecycle stage at each run and hands the store the flags
stale now (``announce_stale_flags``). The store keeps which it has announced: a flag stale now
and not announced is announced (its event queued in the same transaction that records it),
and a flag announced but no longer stale is forgotten, so that it is announced again if it
turns stale again. A run that fails halfway, or runs twice, announces nothing twice: the table
decides, not a comparison with the pipeline's previous run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from api.controlplane.changes import EventType
from api.controlplane.sql_slice import SqlSlice

FlagKey = tuple[str, str]
"""(environment id, flag key)."""


class StaleFlagStore(Protocol):
    def announce_stale_flags(self, stale: Mapping[FlagKey, Mapping[str, Any]]) -> list[FlagKey]:
        """``stale``: every flag stale now, (environment id, flag key) -> its ``lifecycle``
        document. Queues ``flag.stale`` for each not announced before, forgets those no
        longer stale; the flags announced now, sorted. Flags of unknown environments are
        left out."""
        ...


class StaleFlagSql(SqlSlice):
    """Stale flags in SQL (see ``StaleFlagStore``)."""

    def announce_stale_flags(self, stale: Mapping[FlagKey, Mapping[str, Any]]) -> list[FlagKey]:
        announced: list[FlagKey] = []
        with self._transaction(write=True) as conn:
            known = {
                (row["environment_id"], row["flag_key"])
                for row in conn.execute(
                    "SELECT environment_id, flag_key FROM stale_flags"
                ).fetchall()
            }
            for environment_id, flag_key in sorted(known - stale.keys()):
                conn.execute(
                    "DELETE FROM stale_flags WHERE environment_id = ? AND flag_key = ?",
                    (environment_id, flag_key),
                )
            for environment_id, flag_key in sorted(stale.keys() - known):
                environment = conn.execute(
                    "SELECT organization_id, key FROM environments WHERE id = ?",
                    (environment_id,),
                ).fetchone()
                if environment is None:
                    continue
                conn.execute(
                    "INSERT INTO stale_flags (environment_id, flag_key, since) VALUES (?, ?, ?)",
                    (environment_id, flag_key, self._now()),
                )
                self._emit(
                    conn, environment["organization_id"], EventType.FLAG_STALE,
                    {"environmentId": environment_id, "environmentKey": environment["key"],
                     "flagKey": flag_key,
                     "lifecycle": dict(stale[(environment_id, flag_key)])},
                )  # fmt: skip
                announced.append((environment_id, flag_key))
        return announced
