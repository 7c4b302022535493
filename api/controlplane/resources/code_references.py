"""The code references slice (contract section 14): where source code names flags, as
``flagsight code-refs --upload`` last found them, per environment and repository.

An upload is a whole scan of one repository: it replaces that repository's references and
keeps the others', so several repositories can report on one environment. It is evidence, not
configuration: it changes no evaluation (the config version stays), and it is not audited (a
CI job uploading on every push would bury the changes people make; the latest scan, its
revision and its time are kept instead). References may name keys the environment has no
flag for (a flag deleted since the scan): they are kept, and shown with no flag.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from api.controlplane.sql_backend import Connection, Row
from api.controlplane.sql_slice import SqlSlice

INSERT_BATCH = 500
"""References written per statement: one round trip each for PostgreSQL, far below
SQLite's limit of bound parameters."""


@dataclass(frozen=True, slots=True)
class CodeReference:
    """One place a flag key is named: ``path`` relative to the scanned tree, ``line`` from 1."""

    flag_key: str
    path: str
    line: int


@dataclass(frozen=True, slots=True)
class CodeScan:
    """One repository's latest upload to an environment."""

    environment_id: str
    repository: str
    revision: str | None
    scanned_at: str  # ISO 8601 UTC
    count: int


@dataclass(frozen=True, slots=True)
class LocatedReference:
    """A reference with the scan it comes from (the cleanup view groups them by repository)."""

    repository: str
    revision: str | None
    scanned_at: str
    path: str
    line: int


def _scan_summary(scans: Sequence[Row], counts: dict[str, int]) -> dict[str, Any]:
    """A flag's ``codeReferences``: its count over every repository's latest scan, and the
    newest scan (a flag found nowhere still says when and where it was last looked for)."""
    newest = max(scans, key=lambda row: row["scanned_at"])
    return {
        "count": sum(counts.values()),
        "scannedAt": newest["scanned_at"],
        "repository": newest["repository"],
    }


class CodeReferenceStore(Protocol):
    def put_code_references(
        self,
        environment_id: str,
        repository: str,
        revision: str | None,
        references: Sequence[CodeReference],
    ) -> CodeScan:
        """Replace ``repository``'s references in the environment; ``NotFoundError`` for an
        unknown environment."""
        ...

    def code_reference_summaries(self, environment_id: str) -> dict[str, dict[str, Any]]:
        """Flag key -> ``{"count", "scannedAt", "repository"}`` for every key a scan found,
        and for no other; ``{}`` before the first upload."""
        ...

    def code_references(self, environment_id: str, flag_key: str) -> list[LocatedReference]:
        """Where the latest scans found the flag, by repository, path and line."""
        ...

    def code_scans(self, environment_id: str) -> list[CodeScan]:
        """Every repository's latest scan of the environment, newest first."""
        ...


class CodeReferenceSql(SqlSlice):
    """Code references in SQL (see ``CodeReferenceStore``)."""

    def put_code_references(
        self,
        environment_id: str,
        repository: str,
        revision: str | None,
        references: Sequence[CodeReference],
    ) -> CodeScan:
        unique = sorted(set(references), key=lambda ref: (ref.path, ref.line, ref.flag_key))
        scan = CodeScan(environment_id, repository, revision, self._now(), len(unique))
        with self._transaction(write=True) as conn:
            self._require_environment(conn, environment_id)
            conn.execute(
                "DELETE FROM code_references WHERE environment_id = ? AND repository = ?",
                (environment_id, repository),
            )
            conn.execute(
                "INSERT INTO code_reference_scans (environment_id, repository, revision,"
                " scanned_at) VALUES (?, ?, ?, ?) ON CONFLICT (environment_id, repository)"
                " DO UPDATE SET revision = excluded.revision, scanned_at = excluded.scanned_at",
                (environment_id, repository, revision, scan.scanned_at),
            )
            for start in range(0, len(unique), INSERT_BATCH):
                _insert(conn, environment_id, repository, unique[start : start + INSERT_BATCH])
        return scan

    def code_reference_summaries(self, environment_id: str) -> dict[str, dict[str, Any]]:
        with self._transaction(write=False) as conn:
            scans = conn.execute(
                "SELECT * FROM code_reference_scans WHERE environment_id = ?", (environment_id,)
            ).fetchall()
            counted = conn.execute(
                "SELECT flag_key, repository, count(*) AS n FROM code_references"
                " WHERE environment_id = ? GROUP BY flag_key, repository",
                (environment_id,),
            ).fetchall()
        counts: dict[str, dict[str, int]] = {}
        for row in counted:
            counts.setdefault(row["flag_key"], {})[row["repository"]] = int(row["n"])
        return {key: _scan_summary(scans, per_repo) for key, per_repo in counts.items()}

    def code_references(self, environment_id: str, flag_key: str) -> list[LocatedReference]:
        rows = self._fetchall(
            "SELECT r.repository, s.revision, s.scanned_at, r.path, r.line"
            " FROM code_references r JOIN code_reference_scans s"
            " ON s.environment_id = r.environment_id AND s.repository = r.repository"
            " WHERE r.environment_id = ? AND r.flag_key = ?"
            " ORDER BY r.repository, r.path, r.line",
            (environment_id, flag_key),
        )
        return [
            LocatedReference(
                row["repository"], row["revision"], row["scanned_at"], row["path"], row["line"]
            )
            for row in rows
        ]

    def code_scans(self, environment_id: str) -> list[CodeScan]:
        rows = self._fetchall(
            "SELECT s.*, (SELECT count(*) FROM code_references r"
            " WHERE r.environment_id = s.environment_id AND r.repository = s.repository) AS n"
            " FROM code_reference_scans s WHERE s.environment_id = ?"
            " ORDER BY s.scanned_at DESC, s.repository",
            (environment_id,),
        )
        return [
            CodeScan(
                row["environment_id"],
                row["repository"],
                row["revision"],
                row["scanned_at"],
                int(row["n"]),
            )  # fmt: skip
            for row in rows
        ]


def _insert(
    conn: Connection, environment_id: str, repository: str, batch: Sequence[CodeReference]
) -> None:
    values = ", ".join(["(?, ?, ?, ?, ?)"] * len(batch))
    params: list[Any] = []
    for ref in batch:
        params += [environment_id, repository, ref.flag_key, ref.path, ref.line]
    conn.execute(
        "INSERT INTO code_references (environment_id, repository, flag_key, path, line)"
        f" VALUES {values}",
        tuple(params),
    )
