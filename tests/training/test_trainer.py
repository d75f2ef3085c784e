"""The Keras trainer on real TensorFlow, small data."""

import numpy as np
import pytest

from hpo.config import TrainingConfig
from hpo.errors import TrialFailed
from hpo.jobs import TrainTask
from hpo.models import get_builder

CONFIG = {"layers": 1, "units": 32, "dropout": 0.0, "learning_rate": 3e-3, "batch_size": 64}


def make_trainer(digits, device="/device:CPU:0", builder="mlp", **training):
    from hpo.training.trainer import Trainer
    return Trainer(digits, get_builder(builder), TrainingConfig(**training), {}, device)


def task(tmp_path, start, end, name, checkpoint_in=None, config=CONFIG, **kw):
    return TrainTask(trial_id=0, config=config, start_epoch=start, end_epoch=end, seed=11,
                     checkpoint_out=str(tmp_path / f"{name}.npz"), checkpoint_in=checkpoint_in, **kw)


def checkpoint(path):
    with np.load(path) as data:
        n = sum(1 for k in data.files if k.startswith("w"))
        return [data[f"w{i}"] for i in range(n)], int(data["o0"])   # o0: optimizer iterations


def test_reports_every_epoch_with_metrics(digits, tmp_path):
    reports = list(make_trainer(digits).run(task(tmp_path, 0, 3, "a")))
    assert [r.epoch for r in reports] == [1, 2, 3]
    assert set(reports[0].metrics) >= {"loss", "accuracy", "val_loss", "val_accuracy", "learning_rate"}
    assert reports[-1].metrics["val_accuracy"] > 0.5         # digits is easy: this is learning
    assert reports[-1].metrics["learning_rate"] == pytest.approx(3e-3)


def test_continuation_equals_training_straight_through(digits, tmp_path):
    trainer = make_trainer(digits)
    straight = list(trainer.run(task(tmp_path, 0, 4, "straight")))
    first = list(trainer.run(task(tmp_path, 0, 2, "first")))
    second = list(trainer.run(task(tmp_path, 2, 4, "second", checkpoint_in=str(tmp_path / "first.npz"))))
    assert [r.epoch for r in second] == [3, 4]
    steps_per_epoch = -(-len(digits.x_train) // CONFIG["batch_size"])      # the last batch filled up
    w_first, it_first = checkpoint(tmp_path / "first.npz")
    w_second, it_second = checkpoint(tmp_path / "second.npz")
    w_straight, it_straight = checkpoint(tmp_path / "straight.npz")
    assert it_first == 2 * steps_per_epoch
    assert it_second == it_straight == 4 * steps_per_epoch      # optimizer iterations keep counting
    for a, b in zip(w_second, w_straight):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # The continued loss does not jump back to a fresh model's first-epoch loss.
    assert second[0].metrics["loss"] < first[0].metrics["loss"] * 0.8
    assert second[0].metrics["loss"] == pytest.approx(straight[2].metrics["loss"], rel=1e-3)


def test_a_rerun_picks_up_from_its_own_progress_checkpoint(digits, tmp_path):
    trainer = make_trainer(digits, checkpoint_seconds=0)
    straight = list(trainer.run(task(tmp_path, 0, 5, "straight")))
    interrupted = trainer.run(task(tmp_path, 0, 5, "rerun"))
    first_two = [next(interrupted), next(interrupted)]     # the attempt dies after epoch 2
    interrupted.close()
    _, iterations = checkpoint(tmp_path / "rerun.npz")
    assert iterations == 2 * -(-len(digits.x_train) // CONFIG["batch_size"])
    rest = list(make_trainer(digits, checkpoint_seconds=0).run(task(tmp_path, 0, 5, "rerun")))  # a fresh process
    # Every checkpointed epoch's report is sent again (the driver may have missed any of them),
    # marked as replayed; training continues with epoch 3.
    assert [r.epoch for r in rest[:2]] == [1, 2] and all(r.replayed for r in rest[:2])
    assert [dict(r.metrics) for r in rest[:2]] == [dict(r.metrics) for r in first_two]
    assert [r.epoch for r in first_two + rest[2:]] == [1, 2, 3, 4, 5] and not any(r.replayed for r in rest[2:])
    assert rest[-1].metrics["loss"] == pytest.approx(straight[-1].metrics["loss"], rel=1e-3)
    for a, b in zip(checkpoint(tmp_path / "rerun.npz")[0], checkpoint(tmp_path / "straight.npz")[0]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_progress_checkpoints_can_be_turned_off_and_are_spaced_in_time(digits, tmp_path):
    for name, options in (("off", {"checkpoint_every": 0, "checkpoint_seconds": 0}), ("spaced", {})):
        interrupted = make_trainer(digits, **options).run(task(tmp_path, 0, 3, name))
        next(interrupted), next(interrupted)       # two ~30 ms epochs: under the default 10 s
        interrupted.close()
        assert not (tmp_path / f"{name}.npz").exists()


@pytest.mark.slow
def test_trial_runs_on_the_requested_logical_device(digits, tmp_path):
    import tensorflow as tf
    trainer = make_trainer(digits, device="/device:CPU:1")
    program = trainer.program_for(trainer.resolve(CONFIG), seed=0)
    assert all(v.value.device.endswith("CPU:1") for v in program.model.weights)
    assert all(v.value.device.endswith("CPU:1") for v in program.optimizer.optimizer.variables)
    assert trainer.data.x_train.device.endswith("CPU:1")
    list(trainer.run(task(tmp_path, 0, 1, "placed")))
    assert tf.config.list_logical_devices("CPU")[1].name.endswith("CPU:1")


def test_nan_loss_fails_the_trial(digits, tmp_path):
    exploding = {**CONFIG, "learning_rate": 1e12, "optimizer": "sgd"}
    with pytest.raises(TrialFailed, match="loss became nan|loss became inf"):
        list(make_trainer(digits).run(task(tmp_path, 0, 3, "nan", config=exploding)))


def test_builder_exception_fails_the_trial(digits, tmp_path):
    with pytest.raises(TrialFailed, match="model builder failed"):
        list(make_trainer(digits).run(task(tmp_path, 0, 1, "bad", config={**CONFIG, "activation": "nope"})))


@pytest.mark.parametrize("mode", ["graph", *(pytest.param(m, marks=pytest.mark.slow) for m in ("eager", "xla"))])
def test_every_compile_mode_trains(digits, tmp_path, mode):
    reports = list(make_trainer(digits, compile=mode).run(task(tmp_path, 0, 2, mode)))
    assert reports[-1].metrics["val_accuracy"] > 0.3


def test_cnn_builder_trains_on_8x8_images(digits, tmp_path):
    config = {"conv_layers": 2, "filters": 8, "dense_units": 32, "learning_rate": 3e-3, "batch_size": 64}
    reports = list(make_trainer(digits, builder="cnn").run(task(tmp_path, 0, 2, "cnn", config=config)))
    assert reports[-1].metrics["val_accuracy"] > 0.3


def test_tensorboard_curves_and_objective_are_written(digits, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    run = tmp_path / "tb" / "trial_0000"
    list(make_trainer(digits).run(task(tmp_path, 0, 2, "tb", tensorboard_run=str(run),
                                       hparams={"units": 32, "trial_id": "trial_0000"}, objective="val_accuracy")))
    events = EventAccumulator(str(run), size_guidance={"tensors": 0}).Reload()
    tags = events.Tags()["tensors"]
    assert {"val_accuracy", "loss", "hpo/objective"} <= set(tags)
    assert [e.step for e in events.Tensors("val_accuracy")] == [1, 2]


def test_a_progress_checkpoint_keeps_every_report_and_an_older_one_its_last(tmp_path):
    import json

    from hpo.training.checkpoint import save_arrays, stored_reports

    reports = [(1, {"loss": 0.9}), (2, {"loss": 0.5})]
    save_arrays(tmp_path / "new.npz", [np.zeros(2)], [np.zeros(1)], 2, durable=False, reports=reports)
    assert stored_reports(tmp_path / "new.npz") == reports
    # Written before every epoch was kept: its last epoch's metrics alone.
    meta = json.dumps({"epoch": 2, "n_weights": 1, "n_optimizer": 0, "metrics": {"loss": 0.5}}).encode()
    np.savez(tmp_path / "old.npz", w0=np.zeros(2), meta=np.frombuffer(meta, dtype=np.uint8))
    assert stored_reports(tmp_path / "old.npz") == [(2, {"loss": 0.5})]
    assert stored_reports(tmp_path / "missing.npz") == []
