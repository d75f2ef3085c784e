"""The example notebook, executed for real: progress shows in the cell's output, results come back
as a DataFrame, plot() draws."""

import os
from pathlib import Path

import nbclient
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]

NOTEBOOK = ROOT / "examples" / "keras_tuner_notebook.ipynb"

# A notebook session as users have them: build_model defined in a cell, searched with two
# workers, the cell edited and run again. Cell i's outputs are read below by its index.
REDEFINED_CELLS = [
    """import keras
from sklearn.datasets import load_digits
import hpo.keras_tuner as kt
x, y = load_digits(return_X_y=True)
x = (x / 16.0).astype("float32")
data = dict(x=x[:200], y=y[:200], validation_data=(x[200:300], y[200:300]), epochs=1, verbose=0)""",
    """def build_model(hp):
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(hp.Choice("units", [16, 32])),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model""",
    """tuner = kt.RandomSearch(build_model, objective="val_accuracy", max_trials=2, workers=2,
                        directory="runs", project_name="cells")
tuner.search(**data)
print("first", sorted(t.status for t in tuner.oracle.trials.values()))
import multiprocessing.forkserver
print("workers fork from a server that imported", multiprocessing.forkserver._forkserver._preload_modules)""",
    """def build_model(hp):      # the cell, edited: other widths
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(hp.Choice("units", [48, 64])),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model""",
    """try:
    kt.RandomSearch(build_model, objective="val_accuracy", max_trials=2, workers=2, directory="runs",
                    project_name="cells").search(**data)
except ValueError as error:
    print("refused:", error)""",
    """tuner = kt.RandomSearch(build_model, objective="val_accuracy", max_trials=2, workers=2, directory="runs",
                        project_name="cells", overwrite=True)
tuner.search(**data)
trials = tuner.oracle.trials.values()
print("afresh", sorted(t.status for t in trials), {t.hyperparameters.values["units"] for t in trials} <= {48, 64})""",
]


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


def stream_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o["output_type"] == "stream")


@pytest.mark.slow
def test_a_build_model_redefined_in_a_cell_is_refused_with_the_differences_or_searched_afresh(tmp_path,
                                                                                                monkeypatch):
    """With workers=2 the cell's function travels to the workers by value: the first search
    trains the first definition; the edited cell is refused on the same study, with the
    differences; overwrite=True searches the new definition, in the workers."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in REDEFINED_CELLS])
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    cells = notebook.cells
    assert "first ['COMPLETED', 'COMPLETED']" in stream_text(cells[2])
    # The kernel's __main__ imports no TensorFlow: without the preload each worker would
    # import it itself, seconds of CPU a worker.
    assert "workers fork from a server that imported ['hpo.executors.worker_preload']" in stream_text(cells[2])
    refused = stream_text(cells[4])
    assert refused.startswith("refused: RandomSearch(): the study in runs/cells was run with different settings")
    assert "space.units.values: [16, 32] -> [48, 64]" in refused
    assert "Pass overwrite=True to start a new study there" in refused
    assert "afresh ['COMPLETED', 'COMPLETED'] True" in stream_text(cells[5])      # the new widths only
    assert list((tmp_path / "runs").glob("cells.old-*"))          # the first study, moved aside
