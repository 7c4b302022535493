"""What workers poll and load: the config version, and everything evaluation and
authentication need (organizations, environments, live API keys, flags, segments) read in one
consistent transaction. The per-worker ``ConfigCache`` (``cache``) is its reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import msgspec
from flagsight_core.conditions import Condition, conditions_from_json

from api.controlplane.model import Environment, FlagRecord, KeyContext, Organization
from api.controlplane.resources.environments import environment_of
from api.controlplane.resources.flags import flag_of
from api.controlplane.resources.organizations import organization_of
from api.controlplane.sql_backend import Connection
from api.controlplane.sql_slice import SqlSlice

SegmentId = tuple[str, str]
"""``(organization_id, segment_key)``."""


class SegmentConditions(NamedTuple):
    """What a segment with conditions adds to its members (contract 12)."""

    excluded: Sequence[str]
    """The identifiers it excludes."""
    conditions: tuple[Condition, ...]
    """Its conditions (never empty: a segment without any has no ``SegmentConditions``)."""


@dataclass(frozen=True)
class ConfigSnapshot:
    """Everything evaluation and authentication need, read in one consistent transaction.

    ``segment_members`` holds only the segments whose version differs from what the reader
    already has (see ``SnapshotStore.read_config``), and ``segment_conditions`` those of them
    that have conditions; ``segment_versions`` lists them all. (A segment without conditions
    is its members alone: its exclusions change no answer, so they are not read.)
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
    segment_conditions: Mapping[SegmentId, SegmentConditions] = field(default_factory=dict)


class SnapshotStore(Protocol):
    def config_version(self) -> int: ...

    def read_config(self, known_segments: Mapping[SegmentId, int]) -> ConfigSnapshot:
        """A consistent snapshot; members only of segments whose version is not as known."""
        ...


class SnapshotSql(SqlSlice):
    """The snapshot in SQL (see ``SnapshotStore``)."""

    def config_version(self) -> int:
        return self._fetchone("SELECT version FROM config_version")[0]

    def read_config(self, known_segments: Mapping[SegmentId, int]) -> ConfigSnapshot:
        with self._transaction(write=False) as conn:
            version = conn.execute("SELECT version FROM config_version").fetchone()[0]
            organizations = [
                organization_of(r) for r in conn.execute("SELECT * FROM organizations")
            ]
            env_rows = conn.execute(
                "SELECT e.*, CASE WHEN e.version > o.version THEN e.version ELSE o.version END"
                " AS answer_version FROM environments e"
                " JOIN organizations o ON o.id = e.organization_id"
            ).fetchall()
            keys = conn.execute(
                "SELECT k.id, k.key_sha256, k.environment_id, e.organization_id FROM api_keys k"
                " JOIN environments e ON e.id = k.environment_id WHERE k.revoked_at IS NULL"
            )
            api_keys = {
                row["key_sha256"]: KeyContext(
                    row["id"], row["environment_id"], row["organization_id"]
                )
                for row in keys
            }
            flags = [flag_of(row) for row in conn.execute("SELECT * FROM flags")]
            segment_versions: dict[SegmentId, int] = {
                (row[0], row[1]): row[2]
                for row in conn.execute("SELECT organization_id, key, version FROM segments")
            }
            changed = [sid for sid, v in segment_versions.items() if known_segments.get(sid) != v]
            members: dict[SegmentId, Sequence[str]] = {}
            conditions: dict[SegmentId, SegmentConditions] = {}
            for sid in changed:
                members[sid], found = _segment(conn, sid)
                if found is not None:
                    conditions[sid] = found
        return ConfigSnapshot(
            version=version,
            organizations=organizations,
            environments=[environment_of(row) for row in env_rows],
            api_keys=api_keys,
            flags=flags,
            environment_versions={row["id"]: row["answer_version"] for row in env_rows},
            segment_versions=segment_versions,
            segment_members=members,
            segment_conditions=conditions,
        )


def _segment(conn: Connection, segment: SegmentId) -> tuple[list[str], SegmentConditions | None]:
    """A segment's members, and its exclusions and conditions when it has conditions."""
    row = conn.execute(
        "SELECT members, conditions,"
        " CASE WHEN conditions = '[]' THEN NULL ELSE excluded END AS excluded"
        " FROM segments WHERE organization_id = ? AND key = ?",
        segment,
    ).fetchone()
    conditions = conditions_from_json(msgspec.json.decode(row["conditions"]))
    if not conditions:
        return msgspec.json.decode(row["members"]), None
    excluded = msgspec.json.decode(row["excluded"])
    return msgspec.json.decode(row["members"]), SegmentConditions(excluded, conditions)
