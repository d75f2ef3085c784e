"""Streamed tf.data splits train a batch at a time: a train split larger than the memory the
test allows trains without ever being gathered into one array."""

import dataclasses
import threading
import time
import tracemalloc

import numpy as np
import pytest

from hpo.config import DataConfig, TrainingConfig
from hpo.data import load_dataset
from hpo.jobs import TrainTask
from hpo.models import get_builder
from tests.support import data_tasks

MIB = 2 ** 20
TOTAL = data_tasks.BIG_FEATURES * 4 * data_tasks.BIG_EXAMPLES      # bytes in the train split
LIMIT = TOTAL // 2                                                 # what streaming may hold at once


class PeakRss:
    """The process's peak resident memory above where it started, sampled every 5 ms."""

    def __init__(self):
        import psutil
        self.process = psutil.Process()
        self.start = self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def grown(self) -> int:
        return self.peak - self.start


CONFIG = {"layers": 1, "units": 16, "dropout": 0.0, "learning_rate": 1e-3, "batch_size": 25}


def train(dataset, tmp_path, epochs):
    from hpo.training.trainer import Trainer
    trainer = Trainer(dataset, get_builder("mlp"), TrainingConfig(compile="graph", steps_per_call=4), {},
                      "/device:CPU:0")
    return list(trainer.run(TrainTask(trial_id=0, config=CONFIG, start_epoch=0, end_epoch=epochs, seed=1,
                                      checkpoint_out=str(tmp_path / "c.npz"))))


@pytest.fixture(scope="module")
def warm_trainer_code(tmp_path_factory):
    """Trace the streamed step's Keras and TensorFlow code once on a small stream, so the
    memory measured below is the data's and not the first trace's."""
    train(load_dataset(DataConfig(dataset="tests.support.data_tasks:big_stream_splits", options={"examples": 100})),
          tmp_path_factory.mktemp("warm"), 1)


@pytest.mark.slow
def test_a_stream_larger_than_the_memory_limit_trains_without_being_materialised(tmp_path, warm_trainer_code):
    data_tasks.PULLED[0] = 0
    tracemalloc.start()
    try:
        with PeakRss() as rss:
            dataset = load_dataset(DataConfig(dataset="tests.support.data_tasks:big_stream_splits"), seed=0)
            loaded = data_tasks.PULLED[0]
            reports = train(dataset, tmp_path, epochs=2)
        _, python_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert dataset.streamed and dataset.examples("train") == data_tasks.BIG_EXAMPLES
    # Loading read one checking batch (plus what prefetching ran ahead), not the split.
    assert loaded < data_tasks.BIG_EXAMPLES
    # Two epochs read the split twice, every example, a batch at a time.
    assert data_tasks.PULLED[0] - loaded >= 2 * data_tasks.BIG_EXAMPLES
    assert [r.epoch for r in reports] == [1, 2] and reports[-1].metrics["val_accuracy"] > 0.9
    # Neither Python's allocations (the generator's arrays) nor the process ever held the split.
    assert python_peak < LIMIT, f"Python allocations peaked at {python_peak / MIB:.0f} MiB"
    assert rss.grown < LIMIT, f"resident memory grew {rss.grown / MIB:.0f} MiB; the split is {TOTAL / MIB:.0f} MiB"


def test_both_forms_of_training_data_give_whole_batches_in_calls_and_as_datasets():
    """In memory and streamed, an epoch is the same number of whole batches, whether read as
    the compiled step's calls or as the `tf.data` datasets a `model.fit` engine takes."""
    from hpo.training.training_data import epoch_batches

    stream, in_memory, x_train = _both_forms()
    arrays_y = load_dataset(DataConfig(dataset="tests.support.data_tasks:array_splits")).y_train
    for data in (in_memory, stream):
        calls = list(data.train_calls(data_seed=3, epoch=1, batch_size=16, steps_per_call=2))
        assert [steps for _, steps in calls] == [2, 2, 1]                  # 80 // 16 = 5 whole batches
        batches = list(data.epoch_dataset(data_seed=3, epoch=1, batch_size=16))
        assert [int(x.shape[0]) for x, _ in batches] == [16] * 5
        assert sum(int(x.shape[0]) for x, _ in data.validation_dataset(8)) == 20
    # In memory, the datasets follow the study's shuffle; streamed, the split's own order.
    order = epoch_batches(3, 1, 80, 16)
    _, first_y = next(iter(in_memory.epoch_dataset(data_seed=3, epoch=1, batch_size=16)))
    np.testing.assert_array_equal(first_y.numpy(), arrays_y[order[0]])
    stream_x, _ = next(iter(stream.epoch_dataset(data_seed=3, epoch=1, batch_size=16)))
    np.testing.assert_array_equal(stream_x.numpy(), x_train[:16])


def test_every_example_trains_each_epoch_where_the_batch_size_does_not_divide_the_split():
    """80 examples at batch size 24: four batches as `model.fit` counts them, the last one
    filled up with examples already seen that epoch, so every example trains each epoch (a
    dropped remainder left the tail of an unshuffled stream untrained for ever)."""
    streamed, in_memory, x_train = _both_forms()
    for data in (in_memory, streamed):
        calls = list(data.train_calls(data_seed=3, epoch=1, batch_size=24, steps_per_call=3))
        assert [steps for _, steps in calls] == [3, 1]
        batches = list(data.epoch_dataset(data_seed=3, epoch=1, batch_size=24))
        assert [tuple(x.shape)[:1] for x, _ in batches] == [(24,)] * 4
        if data is in_memory:
            seen = {int(i) for call, _ in calls for i in call.numpy().ravel()}
            assert seen == set(range(80))
            seen_by_fit = {tuple(row) for x, _ in batches for row in x.numpy()}
        else:
            seen = {tuple(row) for (x, _), _ in calls for row in x.numpy().reshape(-1, 6)}
            assert seen == {tuple(row) for row in x_train}
            seen_by_fit = {tuple(row) for x, _ in batches for row in x.numpy()}
        assert seen_by_fit == {tuple(row) for row in x_train}


def _both_forms():
    import tensorflow as tf

    from hpo.data import StreamedSplit
    from hpo.training.training_data import device_data

    arrays = load_dataset(DataConfig(dataset="tests.support.data_tasks:array_splits"))      # 80 train, 20 validation
    streams = {name: StreamedSplit(tf.data.Dataset.from_tensor_slices((x, y)), len(x), (6,), (), "int32")
               for name, (x, y) in (("train", (arrays.x_train, arrays.y_train)),
                                    ("validation", (arrays.x_val, arrays.y_val)))}
    streamed = dataclasses.replace(arrays, x_train=None, y_train=None, x_val=None, y_val=None, x_test=None, y_test=None,
                                   streams=streams)
    return device_data(streamed, "/device:CPU:0"), device_data(arrays, "/device:CPU:0"), arrays.x_train


@pytest.mark.slow
@pytest.mark.parametrize("targets, loss, metric", [("onehot", "categorical_crossentropy", "accuracy"),
                                                   ("multilabel", "binary_crossentropy", "binary_accuracy"),
                                                   ("float", "mse", "mae")])
def test_streamed_targets_of_every_kind_train_with_their_loss(tmp_path, targets, loss, metric):
    from hpo.training.trainer import Trainer

    dataset = load_dataset(DataConfig(dataset="tests.support.data_tasks:stream_splits", options={"targets": targets}),
                           class_labels=False)
    trainer = Trainer(dataset, get_builder("mlp"), TrainingConfig(compile="graph", loss=loss, metrics=(metric,)), {},
                      "/device:CPU:0")
    reports = list(trainer.run(TrainTask(trial_id=0, config={**CONFIG, "batch_size": 16}, start_epoch=0, end_epoch=2,
                                         seed=1, checkpoint_out=str(tmp_path / "c.npz"), objective=f"val_{metric}")))
    assert [r.epoch for r in reports] == [1, 2]
    assert all(np.isfinite(r.metrics[name]) for r in reports for name in ("loss", "val_loss", f"val_{metric}"))


def test_fusion_refuses_streamed_data_and_its_trials_train_unfused(tmp_path):
    from hpo.fusion import with_fusion
    from hpo.jobs import TrialDone
    from hpo.training.trainer import Trainer

    trainer = Trainer(load_dataset(DataConfig(dataset="tests.support.data_tasks:stream_splits")), get_builder("mlp"),
                      TrainingConfig(compile="graph", fuse=2), {}, "/device:CPU:0")
    fusing = with_fusion(trainer, 2)
    assert "streamed by tf.data" in fusing.refusal
    tasks = [TrainTask(trial_id=i, config={**CONFIG, "batch_size": 16, "learning_rate": rate}, start_epoch=0,
                       end_epoch=1, seed=i, checkpoint_out=str(tmp_path / f"{i}.npz"))
             for i, rate in enumerate((1e-3, 3e-3))]
    ends = [e for e in fusing.run_group(tasks) if isinstance(e, TrialDone)]
    assert [(e.trial_id, e.epochs_trained, e.error) for e in ends] == [(0, 1, None), (1, 1, None)]
