"""A SQLite control plane in a temporary directory, with one organization and environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from api.controlplane.model import Environment, Organization, Plan
from api.controlplane.sqlite_store import SqliteControlPlaneStore


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "controlplane.sqlite3"


@pytest.fixture
def store(store_path: Path) -> Iterator[SqliteControlPlaneStore]:
    store = SqliteControlPlaneStore(store_path)
    yield store
    store.close()


@pytest.fixture
def organization(store: SqliteControlPlaneStore) -> Organization:
    return store.create_organization("Acme", Plan.PRO)


@pytest.fixture
def environment(store: SqliteControlPlaneStore, organization: Organization) -> Environment:
    return store.create_environment(organization.id, "production", "Production", True)
