"""notebooks/insights.ipynb runs top to bottom against a published warehouse."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tests.pipelines.support import materialize_all

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "insights.ipynb"


def test_notebook_runs_top_to_bottom(lake_settings, monkeypatch):
    assert materialize_all(lake_settings).success
    monkeypatch.setenv("FLAGSIGHT_DATA_DIR", str(lake_settings.data_dir))
    monkeypatch.setenv("FLAGSIGHT_NOTEBOOK_ENVIRONMENT", "env_00000000000000aa")
    monkeypatch.setenv("FLAGSIGHT_NOTEBOOK_FLAG", "checkout")
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
    texts = " ".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "checkout" in texts and "treatment" in texts and "control" in texts
    assert "failure_rate: difference" in " ".join(
        o.get("text", "") for o in outputs if o.output_type == "stream"
    )
