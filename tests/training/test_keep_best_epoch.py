"""`training.keep_best_epoch`: a trial scored by its best epoch, whose state it keeps beside its
last epoch's, on the compiled engine alone and fused."""

import json

import keras
import numpy as np
import pytest

from hpo.cli.best_model import export_best_model
from hpo.study import Study
from hpo.study.store import trial_checkpoint
from hpo.training.best_epoch import best_epoch_path
from hpo.training.checkpoint import checkpoint_epoch
from tests.support.cli import SMOKE, hpo_here

pytestmark = pytest.mark.slow

EPOCHS = 6
# SGD at a high rate on a small MLP: validation accuracy goes up and down, so trials often
# peak before their last epoch.
BUMPY = ["--set", "space={learning_rate: {type: float, low: 1.5, high: 3.0}}",
         "--set", "model.params={layers: 1, units: 16}", "--set", "training.optimizer=sgd",
         "--set", "search.algorithm=random", "--set", f"search.min_budget={EPOCHS}",
         "--set", f"search.max_budget={EPOCHS}", "--set", "search.max_trials=4", "--set", "training.compile=graph",
         "--set", "training.keep_best_epoch=true"]


def _search(capsys, study_dir, *extra):
    done = hpo_here(capsys, "search", SMOKE, "--study-dir", str(study_dir), *BUMPY, *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    study = Study.open(study_dir, read_only=True)
    try:
        return [(t, [(epoch, metrics) for _, epoch, metrics in study.epochs(t.trial_id)]) for t in study.trials()]
    finally:
        study.close()


def _weights(path) -> list:
    with np.load(path) as stored:
        return [stored[name] for name in stored.files if name.startswith("w")]


def _assert_scored_by_best_epochs(study_dir, trials) -> int:
    """Each trial's value and metrics are its best epoch's, its checkpoint its last epoch's and
    its best-epoch file that epoch's state; returns how many trials peaked before the end."""
    peaked_early = 0
    for trial, epochs in trials:
        accuracies = [metrics["val_accuracy"] for _, metrics in epochs]
        best_epoch = epochs[int(np.argmax(accuracies))][0]
        assert trial.state.value == "complete" and trial.value == max(accuracies)
        assert trial.metrics["val_accuracy"] == trial.value          # the row holds the best epoch's metrics
        checkpoint = trial_checkpoint(study_dir, trial.trial_id)
        assert checkpoint_epoch(checkpoint) == EPOCHS                 # a promotion would continue from here
        assert checkpoint_epoch(best_epoch_path(checkpoint)) == best_epoch
        peaked_early += best_epoch < EPOCHS
    return peaked_early


def test_each_trial_is_scored_by_its_best_epoch_and_keeps_that_epochs_state(tmp_path, capsys):
    alone = _search(capsys, tmp_path / "alone")
    assert _assert_scored_by_best_epochs(tmp_path / "alone", alone), \
        "no trial peaked before its last epoch: the test's curves are too smooth"
    # The exported model holds the best epoch's weights, not the last epoch's.
    early = next(t for t, epochs in alone if max(epochs, key=lambda e: e[1]["val_accuracy"])[0] < EPOCHS)
    checkpoint = trial_checkpoint(tmp_path / "alone", early.trial_id)
    exported = export_best_model(tmp_path / "alone", tmp_path / "best.keras", trial_id=early.trial_id)
    weights = [w.numpy() for w in keras.models.load_model(exported.path).trainable_weights]
    best, last = _weights(best_epoch_path(checkpoint)), _weights(checkpoint)
    assert all(any(np.array_equal(w, b) for b in best) for w in weights)
    assert not all(any(np.array_equal(w, b) for b in last) for w in weights)
    # Trained four at a time in one program (rates this high make the fused and unfused curves
    # drift apart in the last bits, so each search is checked on its own).
    fused = _search(capsys, tmp_path / "fused", "--set", "training.fuse=4")
    assert {json.dumps(m.get("fused_trials")) for _, epochs in fused for _, m in epochs} == {"4.0"}
    _assert_scored_by_best_epochs(tmp_path / "fused", fused)
