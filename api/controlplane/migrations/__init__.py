"""Schema migrations of the control plane: numbered ``NNNN_name.sql`` files, one folder per
backend (``sqlite/``, ``postgres/``), the same numbers for the same change in both.

Each backend applies what is missing, in number order, each file in its own transaction, and
records it in ``schema_migrations``; several processes (and hosts) may start at once, so each
backend serializes its runners on a lock and a runner re-reads what is applied under it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MIGRATIONS_DIR = Path(__file__).parent
SQLITE_MIGRATIONS = MIGRATIONS_DIR / "sqlite"
POSTGRES_MIGRATIONS = MIGRATIONS_DIR / "postgres"
_FILE_NAME = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    sql: str


def discover(directory: Path) -> list[Migration]:
    """Every migration file in ``directory``, in number order; numbers must be unique."""
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        match = _FILE_NAME.fullmatch(path.name)
        if match is None:
            raise ValueError(f"migration file name {path.name!r} is not NNNN_name.sql")
        number = int(match.group(1))
        if number in found:
            raise ValueError(f"two migrations are numbered {number:04d}")
        found[number] = Migration(number, match.group(2), path.read_text(encoding="utf-8"))
    return [found[n] for n in sorted(found)]
