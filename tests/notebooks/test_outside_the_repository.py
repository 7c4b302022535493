"""notebooks/insights.ipynb opened outside the repository (issue 12): its first cell says what
to set (FLAGSIGHT_DATA_DIR) instead of failing with a bare StopIteration."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "insights.ipynb"


def test_opened_outside_the_repository_it_names_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "insights.ipynb"
    shutil.copy(NOTEBOOK, copy)
    monkeypatch.delenv("FLAGSIGHT_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    notebook = nbformat.read(copy, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    with pytest.raises(CellExecutionError) as failed:
        client.execute()
    assert failed.value.ename == "RuntimeError", failed.value.ename
    assert "FLAGSIGHT_DATA_DIR" in failed.value.evalue
    assert "StopIteration" not in str(failed.value)
    assert os.environ.get("FLAGSIGHT_DATA_DIR") is None
