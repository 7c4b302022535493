"""notebooks/insights.ipynb runs top to bottom against a published warehouse."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.pipelines.support import materialize_all

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "insights.ipynb"


def run_notebook(lake_settings, monkeypatch, environment: str | None, flag: str | None) -> list:
    """The notebook's outputs, run on the fixture lake's warehouse with the given choice."""
    assert materialize_all(lake_settings).success
    monkeypatch.setenv("FLAGSIGHT_DATA_DIR", str(lake_settings.data_dir))
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


def _printed(outputs: list) -> str:
    return " ".join(o.get("text", "") for o in outputs if o.output_type == "stream")


def test_notebook_runs_top_to_bottom(lake_settings, monkeypatch):
    outputs = run_notebook(lake_settings, monkeypatch, "env_00000000000000aa", "checkout")
    texts = " ".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "checkout" in texts and "treatment" in texts and "control" in texts
    assert "failure_rate: difference" in _printed(outputs)


@pytest.mark.parametrize(
    ("environment", "flag", "printed"),
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
    lake_settings, monkeypatch, environment, flag, printed
):
    outputs = run_notebook(lake_settings, monkeypatch, environment, flag)
    assert printed in _printed(outputs)
