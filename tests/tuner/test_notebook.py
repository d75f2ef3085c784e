"""The example notebook, executed for real: progress shows in the cell's output, results come back
as a DataFrame, plot() draws."""

import os
from pathlib import Path

import nbclient
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]

NOTEBOOK = ROOT / "examples" / "keras_tuner_notebook.ipynb"


@pytest.mark.slow
def test_a_notebook_shows_progress_and_reads_results_as_a_dataframe(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert notebook.cells[0].cell_type == "markdown"
    notebook.cells = notebook.cells[1:]          # the code cells, numbered as below
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    search_out = "".join(o.get("text", "") for o in notebook.cells[2].outputs if o["output_type"] == "stream")
    assert "[hpo] 6/6 trials finished, best val_accuracy" in search_out
    results = notebook.cells[3].outputs
    # One print can reach the notebook as several stream outputs (the kernel flushes on a timer).
    assert "rows 6 complete 6" in "".join(o.get("text", "") for o in results if o["output_type"] == "stream")
    assert any("text/html" in o.get("data", {}) for o in results)          # the DataFrame, rendered
    assert any("image/png" in o.get("data", {}) for o in notebook.cells[4].outputs)
    assert (tmp_path / "runs" / "notebook" / "study.sqlite").exists()
