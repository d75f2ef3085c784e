"""The two engines (`training.engine`), callbacks and early stopping.

The trainer-level tests train the same trial on both engines and continue a fit-engine trial
from its checkpoint; the searches go through `hpo.cli.main`, the entry point of `python -m
hpo`, in this process (no second TensorFlow import). Data: a few hundred rows of
tests/loss_tasks.py; one architecture per search, so each engine traces once."""


import numpy as np
import pytest

from hpo.config import DataConfig, TrainingConfig
from hpo.jobs import TrainTask
from hpo.study import Study
from tests.support import engine_tasks, loss_tasks
from tests.support.cli import hpo_here, search_args, write_experiment
from tests.support.experiments import ENGINES_BINARY

# Slow (searches through the CLI and trials trained on both engines): left out of `-m "not slow"`.
pytestmark = pytest.mark.slow


def search(tmp_path, capsys, *overrides, text=ENGINES_BINARY):
    study_dir = tmp_path / "study"
    done = hpo_here(capsys, *search_args(write_experiment(tmp_path, text), study_dir, *overrides))
    return done.returncode, done.stdout + done.stderr, study_dir


def finished(study_dir):
    study = Study.open(study_dir, read_only=True)
    trials = study.trials()
    return study, trials, {t.trial_id: [m for _, _, m in study.epochs(t.trial_id)] for t in trials}


# --- one trial, both engines ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def binary_data():
    from hpo.data import split
    x, y, _ = loss_tasks.binary(samples=320)
    data = split("binary", "", x, y, DataConfig(dataset="binary", validation_split=0.25, test_split=0.0), seed=0)
    return type(data)(**{**data.__dict__, "num_classes": 2})


def trainer(data, engine, **training):
    from hpo.training.trainer import Trainer
    training = TrainingConfig(engine=engine, compile="graph", loss="binary_crossentropy",
                              metrics=("accuracy", "auc"), batch_size=32, **training)
    return Trainer(data, loss_tasks.sigmoid_mlp, training, {"units": 16}, "/device:CPU:0")


def task(tmp_path, name, start=0, end=3, checkpoint_in=None):
    return TrainTask(trial_id=1, config={"learning_rate": 0.02}, start_epoch=start, end_epoch=end, seed=7,
                     checkpoint_out=str(tmp_path / f"{name}.npz"), checkpoint_in=checkpoint_in, objective="val_auc")


def test_the_same_trial_on_both_engines_reaches_the_same_loss(binary_data, tmp_path):
    """Same seeded weights, same batches in the same order (the study's epoch order), the same
    Keras optimizer with the same hyperparameters, the same loss and metric objects: the two
    engines differ only in how float32 sums are ordered (Keras's loss tracker against our
    per-call sum), rounding at about 1e-7 per step. Over 21 Adam steps that stays far
    below the 1e-4 asked here; a real difference (a batch, a step, a learning rate, a
    from_logits) moves the loss by 1e-2 or more."""
    compiled = [r.metrics for r in trainer(binary_data, "compiled").run(task(tmp_path, "compiled"))]
    fit = [r.metrics for r in trainer(binary_data, "fit").run(task(tmp_path, "fit"))]
    assert len(compiled) == len(fit) == 3
    for a, b in zip(compiled, fit):
        for name in ("loss", "accuracy", "auc", "val_loss", "val_accuracy", "val_auc"):
            assert b[name] == pytest.approx(a[name], rel=1e-4, abs=1e-6), name
    assert fit[-1]["val_loss"] < fit[0]["val_loss"]       # it learns


def test_a_promotion_on_the_fit_engine_continues_the_optimizer_state(binary_data, tmp_path):
    """Epochs 1-3 in one job equal epoch 1, then 2-3 continued from its checkpoint; the same
    continuation from a checkpoint whose optimizer state is zeroed does not."""
    fit = trainer(binary_data, "fit")
    straight = [r.metrics for r in fit.run(task(tmp_path, "straight"))]
    list(fit.run(task(tmp_path, "first", end=1)))
    continued = [r.metrics for r in fit.run(task(tmp_path, "continued", 1, 3, str(tmp_path / "first.npz")))]
    assert [r["loss"] for r in continued] == pytest.approx([r["loss"] for r in straight[1:]], rel=1e-5)

    with np.load(tmp_path / "first.npz") as stored:
        arrays = dict(stored)
    assert arrays["o0"] == 8                           # Adam's step count: 8 steps of 32 from 240 rows
    zeroed = {k: (np.zeros_like(v) if k.startswith("o") else v) for k, v in arrays.items()}
    np.savez(tmp_path / "zeroed.npz", **zeroed)
    restarted = [r.metrics for r in fit.run(task(tmp_path, "restarted", 1, 3, str(tmp_path / "zeroed.npz")))]
    assert abs(restarted[-1]["loss"] - straight[-1]["loss"]) > 1e-3


@pytest.mark.parametrize("engine", ["compiled", "fit"])
def test_a_keras_learning_rate_schedule_steers_both_engines(binary_data, tmp_path, engine):
    """Keras's LearningRateScheduler sets `model.optimizer.learning_rate` in on_epoch_begin:
    the compiled engine's model has the optimizer that trains it too, and the step reads the
    new rate (the first epoch trains exactly as without the callback, the second does not)."""
    plain = trainer(binary_data, engine)
    scheduled = trainer(binary_data, engine, callbacks=("tests.support.engine_tasks:halve_learning_rate",))
    without = [r.metrics for r in plain.run(task(tmp_path, "plain", end=2))]
    with_schedule = [r.metrics for r in scheduled.run(task(tmp_path, "scheduled", end=2))]
    assert [m["learning_rate"] for m in with_schedule] == pytest.approx([0.02, 0.01])
    assert with_schedule[0]["loss"] == pytest.approx(without[0]["loss"], rel=1e-6)
    assert abs(with_schedule[1]["loss"] - without[1]["loss"]) > 1e-4


@pytest.mark.parametrize("engine", ["compiled", "fit"])
def test_a_promotion_continues_at_the_learning_rate_a_callback_left_it(binary_data, tmp_path, engine):
    """The checkpoint keeps the optimizer's rate as the parent's last epoch left it: epochs 2-3
    continued from epoch 1 train as epochs 2-3 of one job, not from the config's rate again."""
    scheduled = trainer(binary_data, engine, callbacks=("tests.support.engine_tasks:halve_learning_rate_each_epoch",))
    straight = [r.metrics for r in scheduled.run(task(tmp_path, "straight"))]
    list(scheduled.run(task(tmp_path, "first", end=1)))
    continued = [r.metrics for r in scheduled.run(task(tmp_path, "continued", 1, 3, str(tmp_path / "first.npz")))]
    assert [m["learning_rate"] for m in straight] == pytest.approx([0.01, 0.005, 0.0025])
    assert [m["learning_rate"] for m in continued] == pytest.approx([0.005, 0.0025])
    assert [m["loss"] for m in continued] == pytest.approx([m["loss"] for m in straight[1:]], rel=1e-5)


def test_a_failure_on_the_fit_engine_is_recorded_with_its_error(binary_data, tmp_path):
    from hpo.jobs import TrialDone
    from hpo.training.trainer import Trainer

    training = TrainingConfig(loss="binary_crossentropy", metrics=("auc",), batch_size=32, compile="graph")
    failing = Trainer(binary_data, engine_tasks.failing_step_mlp, training, {}, "/device:CPU:0")
    events = list(failing.trial_events(task(tmp_path, "failing")))
    assert isinstance(events[-1], TrialDone) and events[-1].epochs_trained == 0
    assert "this train_step refuses to train" in events[-1].error and events[-1].traceback
    # The engine and its reason travel to the driver on the TrialDone, failed or not.
    assert events[-1].engine == "fit" and "overrides train_step" in events[-1].engine_reason


def test_the_driver_logs_each_engine_and_reason_once_whichever_backend_trained_it():
    """A local or Dask worker's own log stays in its process; the line the user reads comes
    from the TrialDone in the driver."""
    import logging

    from hpo.driver.runner import EngineLines
    from hpo.jobs import TrialDone

    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    # A handler of its own: an in-process CLI run earlier in this process may have stopped the
    # hpo loggers propagating to the root logger, which caplog listens on.
    logger = logging.getLogger("hpo.driver.runner")
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.DEBUG
    try:
        lines = EngineLines()
        for trial_id, engine, reason in [(0, "compiled", "auto: plain"), (1, "compiled", "auto: plain"),
                                         (2, "fit", "auto: the model overrides train_step"), (3, None, None)]:
            lines.say(TrialDone(trial_id=trial_id, epochs_trained=1, engine=engine, engine_reason=reason))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    said = [r.getMessage() for r in records if r.levelname == "INFO"]
    assert said == ["trial 0 (and others like it) trains with the compiled engine: auto: plain",
                    "trial 2 (and others like it) trains with the fit engine: auto: the model overrides train_step"]
    assert sum("trial 1: compiled engine" in r.getMessage() for r in records) == 1


# --- searches through the CLI ----------------------------------------------------------------------

def test_the_fit_engine_ranks_a_sigmoid_classifier_by_val_auc_with_promotions(tmp_path, capsys):
    """Hyperband over the fit engine: promotions continue from checkpoints, every metric is in
    the study and TensorBoard, and the trial's value is its last val_auc."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    code, out, study_dir = search(tmp_path, capsys, "training.engine=fit", "search.algorithm=hyperband",
                                  "search.min_budget=1", "search.max_budget=3", "search.max_trials=4")
    assert code == 0, out[-3000:]
    study, trials, epochs = finished(study_dir)
    assert all(t.state.value == "complete" for t in trials)
    promoted = [t for t in trials if t.lineage != t.trial_id]
    assert promoted, "hyperband promoted nothing"
    for trial in trials:
        last = epochs[trial.trial_id][-1]
        assert trial.value == pytest.approx(last["val_auc"])
        assert {"loss", "accuracy", "auc", "val_loss", "val_accuracy", "val_auc"} <= set(last)
    for trial in promoted:
        first_epoch = epochs[trial.trial_id][0]
        # Continued, not restarted: it starts where its parent's weights left it.
        assert first_epoch["loss"] < epochs[trial.lineage][0]["loss"]
    assert max(t.value for t in trials) > 0.85
    log = (study_dir / "hpo.log").read_text()
    assert "trains with the fit engine: training.engine is fit" in log
    run = EventAccumulator(str(study_dir / "tensorboard" / f"trial_{promoted[0].lineage:04d}"),
                           size_guidance={"scalars": 0, "tensors": 0}).Reload()
    assert {"val_auc", "auc", "val_loss"} <= set(run.Tags()["scalars"]) | set(run.Tags()["tensors"])


def test_auto_sends_a_model_with_its_own_train_step_to_fit(tmp_path, capsys):
    # The builder is imported by its reference, tests.support.engine_tasks: the module imported here.
    traced = engine_tasks.TRACED_TRAIN_STEPS
    traced.clear()
    code, out, study_dir = search(tmp_path, capsys, "model.builder=tests.support.engine_tasks:custom_step_mlp")
    assert code == 0, out[-3000:]
    _, trials, epochs = finished(study_dir)
    assert [t.state.value for t in trials] == ["complete"]
    assert traced, "Keras's fit never ran the model's train_step"
    assert trials[0].value == pytest.approx(epochs[trials[0].trial_id][-1]["val_auc"])
    log = (study_dir / "hpo.log").read_text()
    assert "trains with the fit engine: auto: the model overrides train_step" in log


@pytest.mark.parametrize("engine", ["compiled", "fit"])
def test_a_callback_stops_a_trial_inside_its_budget(tmp_path, capsys, engine):
    """The callback sets model.stop_training after the second epoch of four: the trial
    completes with two epochs, ranked by its last val_auc."""
    code, out, study_dir = search(tmp_path, capsys, f"training.engine={engine}", "search.max_budget=4",
                                  "search.min_budget=4",
                                  "training.callbacks=[tests.support.engine_tasks:stop_after_two]")
    assert code == 0, out[-3000:]
    _, trials, epochs = finished(study_dir)
    (trial,) = trials
    assert trial.state.value == "complete" and trial.epochs_trained == 2
    assert len(epochs[trial.trial_id]) == 2
    assert trial.value == pytest.approx(epochs[trial.trial_id][-1]["val_auc"])
    assert "stopped after epoch 2 of 4: a callback set model.stop_training" in (study_dir / "hpo.log").read_text()


def test_early_stopping_stops_a_trial_that_no_longer_improves(tmp_path, capsys):
    """min_delta far above any change in val_loss: epoch 1 sets the best, epoch 2 does not
    beat it by min_delta, and patience 1 stops the trial there."""
    code, out, study_dir = search(tmp_path, capsys, "search.max_budget=5", "search.min_budget=5",
                                  "training.early_stopping={monitor: val_loss, patience: 1, min_delta: 100}")
    assert code == 0, out[-3000:]
    _, trials, epochs = finished(study_dir)
    (trial,) = trials
    assert trial.state.value == "complete" and trial.epochs_trained == 2
    assert "early stopping: val_loss has not improved" in (study_dir / "hpo.log").read_text()


def test_a_callback_that_hooks_batches_is_called_for_every_batch(binary_data, tmp_path):
    """Keras calls batch hooks once per execution of `steps_per_execution` steps; with a
    callback that hooks batches, the fit engine runs one step per execution, as `fit` does by
    default: 240 rows at batch 32 are batches 0-7 each epoch."""
    engine_tasks.RecordBatches.seen.clear()
    hooked = trainer(binary_data, "auto", callbacks=("tests.support.engine_tasks:record_batches",))
    reports = list(hooked.run(task(tmp_path, "hooked", end=2)))
    assert [r.epoch for r in reports] == [1, 2]
    assert engine_tasks.RecordBatches.seen == list(range(8)) * 2


def test_auto_names_each_reason_the_compiled_engine_cannot_serve():
    from hpo.training.engines import choose_engine

    training = TrainingConfig(loss="mse", metrics=("mae",))
    two_inputs = engine_tasks.two_input_model({}, (4,), 1)
    assert choose_engine(two_inputs, training).reason == "auto: the model has 2 inputs"
    plain = loss_tasks.linear_output_mlp({}, (4,), 1)
    assert choose_engine(plain, training).engine == "compiled"
    # Epoch-level callbacks run on the compiled engine; batch-level ones need fit.
    assert choose_engine(plain, training, [engine_tasks.stop_after_two()]).engine == "compiled"
    choice = choose_engine(plain, training, [engine_tasks.count_batches()])
    assert choice.engine == "fit" and "CountBatches hook into batches" in choice.reason
