"""Code references (contract 14) in the store, on both backends: an upload replaces one
repository's references, keeps the others', and summarises per flag what a lifecycle shows."""

from __future__ import annotations

import time

import pytest

from api.controlplane.errors import NotFoundError
from api.controlplane.resources.code_references import CodeReference, LocatedReference


def _refs(*triples: tuple[str, str, int]) -> list[CodeReference]:
    return [CodeReference(key, path, line) for key, path, line in triples]


def test_an_upload_is_summarised_per_flag_and_listed_by_file(store, environment) -> None:
    scan = store.put_code_references(
        environment.id, "acme/shop", "abc123",
        _refs(("checkout", "src/a.py", 3), ("checkout", "src/b.py", 9), ("beta", "x.py", 1),
              ("checkout", "src/a.py", 3)),
    )  # fmt: skip
    assert (scan.repository, scan.revision, scan.count) == ("acme/shop", "abc123", 3)
    summaries = store.code_reference_summaries(environment.id)
    assert summaries == {
        "checkout": {"count": 2, "scannedAt": scan.scanned_at, "repository": "acme/shop"},
        "beta": {"count": 1, "scannedAt": scan.scanned_at, "repository": "acme/shop"},
    }
    assert store.code_references(environment.id, "checkout") == [
        LocatedReference("acme/shop", "abc123", scan.scanned_at, "src/a.py", 3),
        LocatedReference("acme/shop", "abc123", scan.scanned_at, "src/b.py", 9),
    ]


def test_a_new_scan_replaces_its_repository_and_keeps_the_others(store, environment) -> None:
    store.put_code_references(environment.id, "web", None, _refs(("checkout", "a.ts", 1)))
    store.put_code_references(environment.id, "api", "r1", _refs(("checkout", "b.py", 2)))
    assert store.code_reference_summaries(environment.id)["checkout"]["count"] == 2
    time.sleep(0.002)  # scans are kept to the millisecond: this one must be the newest
    latest = store.put_code_references(environment.id, "web", "r2", [])
    summary = store.code_reference_summaries(environment.id)["checkout"]
    assert summary == {"count": 1, "scannedAt": latest.scanned_at, "repository": "web"}
    assert [ref.repository for ref in store.code_references(environment.id, "checkout")] == ["api"]
    assert [(s.repository, s.count) for s in store.code_scans(environment.id)] == [
        ("web", 0),
        ("api", 1),
    ]


def test_many_references_are_kept_whole(store, environment) -> None:
    refs = _refs(*[(f"flag-{i % 7}", f"src/f{i}.py", i + 1) for i in range(2_345)])
    assert store.put_code_references(environment.id, "big", None, refs).count == 2_345
    summaries = store.code_reference_summaries(environment.id)
    assert sum(s["count"] for s in summaries.values()) == 2_345


def test_an_unknown_environment_is_not_found(store) -> None:
    with pytest.raises(NotFoundError):
        store.put_code_references("env_0000000000000000", "r", None, [])
