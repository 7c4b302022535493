"""The control-plane store on each backend, with one organization and environment.

Every test that takes ``store`` runs twice: on SQLite (a file in a temporary directory) and on
PostgreSQL (a fresh database of the session's cluster). ``open_store()`` opens another store
on the same database: another worker, or another host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from api.controlplane.model import Environment, Organization, Plan
from api.controlplane.postgres_store import PostgresControlPlaneStore
from api.controlplane.sql_store import SqlControlPlaneStore
from api.controlplane.sqlite_store import SqliteControlPlaneStore

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "controlplane.sqlite3"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def open_store(
    backend: str, store_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[], SqlControlPlaneStore]]:
    if backend == "sqlite":
        make: Callable[[], SqlControlPlaneStore] = lambda: SqliteControlPlaneStore(store_path)  # noqa: E731
    else:
        url = request.getfixturevalue("postgres_url")
        make = lambda: PostgresControlPlaneStore(url)  # noqa: E731
    opened: list[SqlControlPlaneStore] = []

    def open_another() -> SqlControlPlaneStore:
        opened.append(make())
        return opened[-1]

    yield open_another
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[[], SqlControlPlaneStore]) -> SqlControlPlaneStore:
    return open_store()


@pytest.fixture
def organization(store: SqlControlPlaneStore) -> Organization:
    return store.create_organization("Acme", Plan.PRO)


@pytest.fixture
def environment(store: SqlControlPlaneStore, organization: Organization) -> Environment:
    return store.create_environment(organization.id, "production", "Production", True)
