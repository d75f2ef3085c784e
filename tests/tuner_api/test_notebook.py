"""A real notebook: progress shows in the cell's output, results come back as a DataFrame, plot() draws."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CELLS = [
    """import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import keras
from sklearn.datasets import load_digits
import hpo.keras_tuner as kt""",
    """def build_model(hp):
    model = keras.Sequential([keras.Input((64,)),
                              keras.layers.Dense(hp.Choice("units", [16, 32]), activation="relu"),
                              keras.layers.Dense(10)])
    model.compile(keras.optimizers.Adam(hp.Float("lr", 1e-3, 1e-2, sampling="log")),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model

x, y = load_digits(return_X_y=True)
x = (x / 16.0).astype("float32")""",
    """tuner = kt.Hyperband(build_model, objective="val_accuracy", max_epochs=3, seed=0,
                     directory="runs", project_name="notebook")
tuner.search(x[:600], y[:600], validation_data=(x[600:900], y[600:900]), batch_size=32)""",
    """frame = tuner.results.to_pandas()
print("rows", len(frame), "complete", (frame["state"] == "complete").sum())
frame.head(2)""",
    """ax = tuner.plot()""",
]


@pytest.mark.slow
def test_a_notebook_shows_progress_and_reads_results_as_a_dataframe(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    search_out = "".join(o.get("text", "") for o in notebook.cells[2].outputs if o["output_type"] == "stream")
    assert "[hpo] 6/6 trials finished, best val_accuracy" in search_out
    results = notebook.cells[3].outputs
    assert any("rows 6 complete 6" in o.get("text", "") for o in results)
    assert any("text/html" in o.get("data", {}) for o in results)          # the DataFrame, rendered
    assert any("image/png" in o.get("data", {}) for o in notebook.cells[4].outputs)
    assert (tmp_path / "runs" / "notebook" / "study.sqlite").exists()
