"""`hpo.training.best_epoch`: which epoch is a trial's best, and where its state is kept
(the epoch loop and the export read these; the trainer's side: tests/training/test_keep_best_epoch.py)."""

import math
from pathlib import Path

import pytest

from hpo.jobs import TrainTask
from hpo.metric_names import beats
from hpo.study.store import trial_checkpoint
from hpo.training.best_epoch import BestEpochs, MissingCheckpoint, best_epoch_path, model_checkpoint


def task(trial_id: int, keep: bool = True, maximize: bool = True) -> TrainTask:
    return TrainTask(trial_id=trial_id, config={}, start_epoch=0, end_epoch=5, seed=0,
                     checkpoint_out=f"/study/checkpoints/trial_{trial_id:04d}.npz", objective="val_accuracy",
                     keep_best_epoch=keep, maximize=maximize)


def test_a_trials_checkpoint_is_trial_nnnn_npz_in_the_study_folders_checkpoints():
    """The study folder's layout (docs/ARCHITECTURE.md, "Study folder"); every other test asks
    `trial_checkpoint` or `Study.checkpoint` for the path."""
    assert trial_checkpoint("/s", 7) == Path("/s/checkpoints/trial_0007.npz")
    assert trial_checkpoint(Path("/s"), 12345) == Path("/s/checkpoints/trial_12345.npz")


def test_the_best_epoch_file_sits_beside_the_checkpoint():
    assert best_epoch_path("/s/checkpoints/trial_0007.npz") == Path("/s/checkpoints/trial_0007.best.npz")


def test_a_model_comes_from_the_best_epoch_file_when_there_is_one(tmp_path):
    checkpoint = tmp_path / "trial_0001.npz"
    checkpoint.write_bytes(b"")
    assert model_checkpoint(checkpoint) == checkpoint
    best_epoch_path(checkpoint).write_bytes(b"")
    assert model_checkpoint(checkpoint) == best_epoch_path(checkpoint)


def test_a_model_without_either_checkpoint_is_missing_and_named_by_its_last_epochs_file(tmp_path):
    checkpoint = tmp_path / "trial_0001.npz"
    with pytest.raises(MissingCheckpoint) as missing:
        model_checkpoint(checkpoint)
    assert missing.value.path == checkpoint and str(checkpoint) in str(missing.value)
    # A best-epoch file alone still holds the model.
    best_epoch_path(checkpoint).write_bytes(b"")
    assert model_checkpoint(checkpoint) == best_epoch_path(checkpoint)


def test_a_value_beats_the_best_so_far_in_its_direction_and_only_when_finite():
    assert beats(0.5, None, maximize=True) and beats(0.5, math.nan, maximize=False)
    assert beats(0.6, 0.5, maximize=True) and not beats(0.6, 0.5, maximize=False)
    assert not beats(0.5, 0.5, maximize=True)                      # a tie keeps the earlier epoch
    assert not beats(None, None, maximize=True) and not beats(math.inf, 0.5, maximize=True)


def test_each_trial_improves_on_its_own_best_in_its_own_direction():
    best = BestEpochs([task(0), task(1, maximize=False), task(2, keep=False)], [[], [], []])
    assert best.active
    assert best.improved([{"val_accuracy": 0.5}, {"val_accuracy": 0.5}, {"val_accuracy": 0.5}]) == [0, 1]
    assert best.improved([{"val_accuracy": 0.6}, {"val_accuracy": 0.6}, {"val_accuracy": 0.9}]) == [0]
    assert best.improved([{"val_accuracy": 0.6}, {"val_accuracy": 0.4}, {"val_accuracy": 0.9}]) == [1]
    # A missing or non-finite objective improves nothing; a trial that keeps no best epoch
    # records its last value.
    assert best.improved([{"val_accuracy": math.nan}, {}, {"val_accuracy": 0.1}]) == []
    assert [best.objective(i, 0.05) for i in range(3)] == [0.6, 0.4, 0.05]


def test_a_resumed_attempts_replayed_epochs_count_towards_its_best():
    replayed = [[(1, {"val_accuracy": 0.7}), (2, {"val_accuracy": 0.65})]]
    best = BestEpochs([task(0)], replayed)
    assert best.improved([{"val_accuracy": 0.68}]) == []         # below the replayed epoch 1
    assert best.improved([{"val_accuracy": 0.72}]) == [0]
    assert best.objective(0, 0.6) == 0.72


def test_nothing_is_tracked_when_no_trial_keeps_its_best_epoch():
    assert not BestEpochs([task(0, keep=False)], [[]]).active
