"""notebooks/insights.ipynb runs top to bottom against a published warehouse, and the way
warehouse/README.md says to run it headless shows what it computes."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.pipelines.support import materialize_all

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "insights.ipynb"
DOCUMENTED = (
    "FLAGSIGHT_DATA_DIR=$PWD/var .venv/bin/jupyter nbconvert --to html --execute"
    " notebooks/insights.ipynb --output-dir var/reports"
)
"""The command warehouse/README.md gives (``jupyter execute`` ran it and showed nothing)."""


def run_notebook(lake_settings, monkeypatch, environment: str | None, flag: str | None) -> list:
    """The notebook's outputs, run on the fixture lake's warehouse with the given choice."""
    assert materialize_all(lake_settings).success
    return execute_notebook(lake_settings.data_dir, monkeypatch, environment, flag)


def execute_notebook(
    data_dir: Path, monkeypatch, environment: str | None, flag: str | None
) -> list:
    """The notebook's outputs, run top to bottom on ``data_dir``'s published warehouse."""
    monkeypatch.setenv("FLAGSIGHT_DATA_DIR", str(data_dir))
    for name, value in (("ENVIRONMENT", environment), ("FLAG", flag)):
        if value is None:
            monkeypatch.delenv(f"FLAGSIGHT_NOTEBOOK_{name}", raising=False)
        else:
            monkeypatch.setenv(f"FLAGSIGHT_NOTEBOOK_{name}", value)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    ).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the chart was drawn
    return outputs


def printed(outputs: list) -> str:
    """What the notebook's cells printed."""
    return " ".join(o.get("text", "") for o in outputs if o.output_type == "stream")


def test_notebook_runs_top_to_bottom(lake_settings, monkeypatch):
    outputs = run_notebook(lake_settings, monkeypatch, "env_00000000000000aa", "checkout")
    texts = " ".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "checkout" in texts and "treatment" in texts and "control" in texts
    assert "failureRate: difference" in printed(outputs)


@pytest.mark.parametrize(
    ("environment", "flag", "says"),
    [
        # only the flag chosen, and it has no arms (every evaluation was FLAG_NOT_FOUND)
        (None, "ghost-flag", "ghost-flag: no arms to compare"),
        # only the environment chosen: its busiest flag there
        ("env_00000000000000bb", None, "checkout at 50.0 %"),
        # the environment by its key, as a person knows it
        ("production", "checkout", "checkout at 50.0 %"),
    ],
)
def test_notebook_with_part_of_the_choice_or_a_flag_without_arms(
    lake_settings, monkeypatch, environment, flag, says
):
    outputs = run_notebook(lake_settings, monkeypatch, environment, flag)
    assert says in printed(outputs)


def test_the_documented_command_writes_a_page_with_the_tables_and_figures(
    lake_settings, tmp_path: Path
) -> None:
    assert DOCUMENTED in " ".join((REPO / "warehouse" / "README.md").read_text().split())
    assert materialize_all(lake_settings).success
    reports = tmp_path / "reports"
    setting, *command = shlex.split(DOCUMENTED.replace("var/reports", str(reports)))
    assert setting == "FLAGSIGHT_DATA_DIR=$PWD/var"  # here, the fixture lake's instead
    environment = {k: v for k, v in os.environ.items() if not k.startswith("FLAGSIGHT_NOTEBOOK")}
    ran = subprocess.run(
        command, cwd=REPO, env={**environment, "FLAGSIGHT_DATA_DIR": str(lake_settings.data_dir)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    page = reports / "insights.html"
    assert f"to {page}" in ran.stderr  # it says where the page is
    shown = page.read_text()
    figures = re.findall(r'<img [^>]*src="data:image/png;base64,', shown)
    assert len(figures) == 2  # the daily chart and the intervals, in the page
    assert "published at" in shown and "failureRate: difference" in shown
    assert "treatment" in shown and "control" in shown
