"""What workers poll and load: the config version, and everything evaluation and
authentication need (organizations, environments, live API keys, flags, segments) read in one
consistent transaction. The per-worker ``ConfigCache`` (``cache``) is its reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from api.controlplane.model import Environment, FlagRecord, KeyContext, Organization
from api.controlplane.resources.environments import environment_of
from api.controlplane.resources.flags import flag_of
from api.controlplane.resources.organizations import organization_of
from api.controlplane.sql_backend import Connection
from api.controlplane.sql_slice import SqlSlice

SegmentId = tuple[str, str]
"""``(organization_id, segment_key)``."""


@dataclass(frozen=True)
class ConfigSnapshot:
    """Everything evaluation and authentication need, read in one consistent transaction.

    ``segment_members`` holds only the segments whose version differs from what the reader
    already has (see ``SnapshotStore.read_config``); ``segment_versions`` lists them all.
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
            members = {sid: _members(conn, sid) for sid in changed}
        return ConfigSnapshot(
            version=version,
            organizations=organizations,
            environments=[environment_of(row) for row in env_rows],
            api_keys=api_keys,
            flags=flags,
            environment_versions={row["id"]: row["answer_version"] for row in env_rows},
            segment_versions=segment_versions,
            segment_members=members,
        )


def _members(conn: Connection, segment: SegmentId) -> list[str]:
    row = conn.execute(
        "SELECT members FROM segments WHERE organization_id = ? AND key = ?", segment
    ).fetchone()
    return msgspec.json.decode(row[0])
