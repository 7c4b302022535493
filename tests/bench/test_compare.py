"""``bench.compare``: a revision from its own worktree beside the working tree and the tight
reference, each measured in every round, and nothing left behind."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.compare import checkout, label, main, parse_args, remove_checkouts
from bench.servers import REPO
from tests.support.needs import needs_wrk

pytestmark = needs_wrk()


def _worktrees() -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(REPO), "worktree", "list", "--porcelain"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [line for line in out.splitlines() if line.startswith("worktree ")]


def test_a_revision_and_the_working_tree_are_measured_against_the_reference() -> None:
    before = _worktrees()
    echoed: list[str] = []
    quick = ["--rounds", "1", "--duration", "0.5", "--warmup", "0.2", "--connections", "2"]
    lines = main(["HEAD", ".", *quick], echo=echoed.append)
    assert echoed[0].startswith("round 1: tight reference ")
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in lines[2:]}
    assert list(rows) == ["tight reference", "HEAD", "."]
    assert rows["tight reference"][2].startswith("1.000 (1.000)")
    for name in ("HEAD", "."):
        median_ratio = float(rows[name][2].split(" ")[0])
        assert median_ratio > 0.1  # served: wrk saw no error, or main would have raised
        assert float(rows[name][3]) > 0  # CPU per request was charged
        assert float(rows[name][4].rstrip(" |")) > 0  # wrk's p99
    assert _worktrees() == before


def test_with_cluster_each_revision_is_a_host_of_the_cluster_mode() -> None:
    quick = ["--rounds", "1", "--duration", "0.5", "--warmup", "0.2", "--connections", "2"]
    lines = main([".", "--cluster", *quick], echo=lambda _: None)
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in lines[2:]}
    assert list(rows) == ["tight reference", ". (cluster host)"]
    assert float(rows[". (cluster host)"][2].split(" ")[0]) > 0.1  # served, on PostgreSQL


def test_a_revision_runs_from_its_own_worktree_with_its_native_module(tmp_path: Path) -> None:
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = checkout("HEAD", tmp_path / "tree")
    try:
        checked_out = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert tree != REPO and checked_out == head
        assert list((tree / "api" / "native").glob("_fastpath*.so"))
    finally:
        remove_checkouts([tree])
    assert not tree.exists()
    assert checkout(".", tmp_path / "unused") == REPO


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["HEAD", "--rounds", "0"])
    assert "--rounds must be at least 1" in capsys.readouterr().err


def test_full_commit_ids_are_shortened_in_the_tables() -> None:
    assert label("cbcdffc767ef3115188ba48abe27c06a6230030e") == "cbcdffc767ef"
    assert label("HEAD~1") == "HEAD~1"
    assert label(".") == "."
