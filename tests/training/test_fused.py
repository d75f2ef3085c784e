"""Fused trials train exactly like the same trials one by one."""

import numpy as np
import pytest

from hpo.config import TrainingConfig
from hpo.fusion.group_trainer import FusedGroupFailed, FusingTrainer, group_key, train_fused
from hpo.jobs import TrainTask
from hpo.models import get_builder

# Slow (each test trains groups of trials twice, fused and one by one): left out of `-m "not slow"`.
pytestmark = pytest.mark.slow

MLP = {"layers": 2, "units": 32, "batch_size": 64}
CONFIGS = [{**MLP, "learning_rate": 3e-3, "dropout": 0.0}, {**MLP, "learning_rate": 1e-2, "dropout": 0.3},
           {**MLP, "learning_rate": 5e-4, "dropout": 0.1, "beta_1": 0.8}]


def make_trainer(digits, builder="mlp", **training):
    from hpo.training.trainer import Trainer
    return Trainer(digits, get_builder(builder), TrainingConfig(**{"compile": "graph", **training}), {},
                   "/device:CPU:0")


def fusing(trainer, fuse=4):
    return FusingTrainer(trainer, fuse)


def tasks_for(tmp_path, configs, tag, start=0, end=2, checkpoints_in=None):
    return [TrainTask(trial_id=i, config=c, start_epoch=start, end_epoch=end, seed=100 + i,
                      checkpoint_out=str(tmp_path / f"{tag}_{i}.npz"),
                      checkpoint_in=None if checkpoints_in is None else checkpoints_in[i], objective="val_accuracy")
            for i, c in enumerate(configs)]


def weights(path):
    with np.load(path) as data:
        return [data[k] for k in sorted(data.files) if k != "meta"]


def assert_same(unfused, fused, tmp_path, tag_a, tag_b, n):
    for epoch_a, epoch_b in zip(unfused, fused):
        for a, b in zip(epoch_a, epoch_b):
            assert a.trial_id == b.trial_id and a.epoch == b.epoch
            for metric in ("loss", "accuracy", "val_loss", "val_accuracy"):
                assert b.metrics[metric] == pytest.approx(a.metrics[metric], rel=2e-4, abs=2e-5), metric
    for i in range(n):
        for a, b in zip(weights(tmp_path / f"{tag_a}_{i}.npz"), weights(tmp_path / f"{tag_b}_{i}.npz")):
            np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-5)


def run_unfused(trainer, tasks):
    per_trial = [list(trainer.run(t)) for t in tasks]
    return [list(epoch) for epoch in zip(*per_trial)]


# Under XLA, AdamW and not Adam: both update through `single_pass_adam`, AdamW with its decay
# term too (XLA compiles are the slow part; Adam's step without decay is the unfused one's too).
@pytest.mark.parametrize("optimizer, mode", [("adam", "graph"), ("adamw", "graph"), ("sgd", "graph"),
                                             ("adamw", "xla"), ("sgd", "xla")])
def test_fused_mlp_matches_trials_run_one_by_one(digits, tmp_path, optimizer, mode):
    """Under XLA both sides update in one pass (`single_pass_adam`, `single_pass_momentum`)."""
    configs = [{**c, "optimizer": optimizer, "momentum": 0.5 + 0.2 * i, "weight_decay": 0.01 * i}
               for i, c in enumerate(CONFIGS)]
    check_fused_mlp(digits, tmp_path, configs, mode)


# Each optimizer in graph mode; under XLA the variant with the most slots (XLA compiles are the
# slow part, and the fused update is the same code in both modes, only compiled differently).
@pytest.mark.parametrize("optimizer, mode", [({"optimizer": "rmsprop"}, "graph"),
                                             ({"optimizer": "rmsprop", "momentum": 0.6}, "graph"),
                                             ({"optimizer": "sgd", "nesterov": True}, "graph"),
                                             ({"optimizer": "rmsprop", "momentum": 0.6}, "xla")])
def test_fused_rmsprop_and_nesterov_match_trials_run_one_by_one(digits, tmp_path, optimizer, mode):
    """What Keras branches on in Python (RMSprop's momentum, SGD's nesterov) is one value for the
    whole group; rho, epsilon and SGD's momentum are per trial."""
    per_trial = [{"rho": 0.9, "epsilon": 1e-7}, {"rho": 0.8, "epsilon": 1e-5}, {"rho": 0.95, "epsilon": 1e-6}]
    configs = [{**c, **v, **optimizer} for c, v in zip(CONFIGS, per_trial)]
    if optimizer["optimizer"] == "sgd":
        configs = [{**c, "learning_rate": 10 * c["learning_rate"], "momentum": m}
                   for c, m in zip(configs, (0.5, 0.9, 0.0))]
    program = check_fused_mlp(digits, tmp_path, configs, mode)
    expected_slots = {"rmsprop": {"velocity"} | ({"momentum"} if "momentum" in optimizer else set()),
                      "sgd": {"momentum"}}[optimizer["optimizer"]]
    assert set(program.optimizer.slots) == expected_slots


def check_fused_mlp(digits, tmp_path, configs, mode):
    """Train `configs` one by one and fused; both must agree, trial by trial."""
    trainer = make_trainer(digits, compile=mode)
    fused_trainer = fusing(trainer)
    unfused = run_unfused(trainer, tasks_for(tmp_path, configs, "one"))
    fused = list(train_fused(fused_trainer, tasks_for(tmp_path, configs, "fused")))
    [program] = fused_trainer.programs.values()
    assert program.optimizer.single_pass == (mode == "xla")
    assert [len(epoch) for epoch in fused] == [3, 3]
    assert_same(unfused, fused, tmp_path, "one", "fused", 3)
    # Different hyperparameters really did train differently.
    assert len({round(r.metrics["loss"], 6) for r in fused[-1]}) == 3
    return program


def test_under_auto_compile_a_fused_group_measures_the_modes_on_its_work_together(digits, tmp_path, monkeypatch):
    """`compile: auto` measures graph mode against XLA only for work that repays it. A fused
    group counts all its trials' steps, as one job counts its own: here one trial is too
    little work and runs in the provisional mode unmeasured, while the group of three
    measures, records the choice and trains in the mode it chose."""
    import hpo.training.trainer as trainer_module

    trainer = make_trainer(digits, compile="auto")
    fused_trainer = fusing(trainer)
    one_job = trainer.job_steps(tasks_for(tmp_path, CONFIGS, "steps")[0], MLP["batch_size"])
    monkeypatch.setattr(trainer_module, "MIN_STEPS_TO_MEASURE", 2 * one_job)
    list(trainer.run(tasks_for(tmp_path, CONFIGS[:1], "alone")[0]))
    assert trainer.compile_choices.compile_choices() == {}
    list(train_fused(fused_trainer, tasks_for(tmp_path, CONFIGS, "group")))
    [(mode, detail)] = trainer.compile_choices.compile_choices().values()
    assert detail["measured"] and set(detail["step_call_ms"]) == {"graph", "xla"}
    [key] = fused_trainer.programs
    assert key[-1] == mode


# XLA takes the K-separate-convolutions path that `False` forces in graph mode; XLA's compile of
# a fused program is checked on the MLPs above (an XLA:CPU convolution compile costs ~15 CPU-s).
@pytest.mark.parametrize("mode, grouped_gradients", [("graph", None), ("graph", False)])
def test_fused_cnn_matches_trials_run_one_by_one(digits, tmp_path, monkeypatch, mode, grouped_gradients):
    """Two convolutions: the first is one wide convolution over the shared input; the second
    one grouped convolution in graph mode where the CPU can train it (oneDNN), else K
    separate ones, as always under XLA. `False` makes the CPU say it cannot, so a machine with
    oneDNN tests the other path too (one without it, such as an AVX2 AMD EPYC, takes it anyway:
    there a grouped convolution's gradient fails)."""
    from hpo.fusion import grouped_conv
    if grouped_gradients is not None:
        monkeypatch.setattr(grouped_conv, "_ANSWERS", {"CPU": grouped_gradients})
    configs = [{"conv_layers": 2, "filters": 8, "kernel_size": 3, "dense_units": 32, "batch_size": 32,
                "learning_rate": lr, "dropout": d} for lr, d in ((3e-3, 0.0), (1e-3, 0.25))]
    trainer = make_trainer(digits, "cnn", compile=mode)
    fused_trainer = fusing(trainer)
    unfused = run_unfused(trainer, tasks_for(tmp_path, configs, "one"))
    fused = list(train_fused(fused_trainer, tasks_for(tmp_path, configs, "fused")))
    assert_same(unfused, fused, tmp_path, "one", "fused", 2)


def test_the_grouped_convolution_question_is_asked_once_per_device_type(monkeypatch):
    """Logical CPUs share their kernels, so the answer for CPU:0 serves CPU:1; the real probe
    answers with a bool on this machine, whichever it is."""
    from hpo.fusion import grouped_conv
    monkeypatch.setattr(grouped_conv, "_ANSWERS", {})
    asked = []
    real_probe = grouped_conv._probe
    monkeypatch.setattr(grouped_conv, "_probe", lambda device: asked.append(device) or real_probe(device))
    answers = {grouped_conv.trains_grouped_convolutions(d) for d in ("/device:CPU:0", "/device:CPU:1", "cpu:0")}
    assert asked == ["/device:CPU:0"] and len(answers) == 1 and answers <= {True, False}


def build_normalised_mlp(config, input_shape, num_classes):
    """BatchNormalization after the first layer (per-trial batch statistics and moving
    averages), LayerNormalization after the second (per-sample, a per-trial scale).

    The first layer has no bias, as is usual before BatchNormalization: for a unit active on
    every row of a batch, its bias gradient is zero but for rounding, and Adam divides that
    noise by its own size into full-sized steps. With a bias, fused and unfused (whose sums
    round differently) once ended 7e-5 apart on one such unit, on a CPU without oneDNN; without
    it, every weight agrees to 1e-6."""
    import keras

    from hpo.models.layers import TunableDropout
    inputs = keras.Input(input_shape)
    x = keras.layers.Dense(32, activation="relu", use_bias=False)(keras.layers.Flatten()(inputs))
    x = TunableDropout(float(config.get("dropout", 0.0)))(keras.layers.BatchNormalization(momentum=0.9)(x))
    x = keras.layers.LayerNormalization()(keras.layers.Dense(16, activation="relu")(x))
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))


def build_normalised_cnn(config, input_shape, num_classes):
    """BatchNormalization on the raw images (before any weight layer) and after a convolution."""
    import keras

    from hpo.models.layers import TunableDropout
    inputs = keras.Input(input_shape)
    x = keras.layers.Reshape((*input_shape, 1))(inputs) if len(input_shape) == 2 else inputs
    x = keras.layers.BatchNormalization(center=False)(x)
    x = keras.layers.BatchNormalization(momentum=0.8)(keras.layers.Conv2D(8, 3, activation="relu")(x))
    x = TunableDropout(float(config.get("dropout", 0.0)))(keras.layers.Flatten()(keras.layers.MaxPooling2D()(x)))
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))


build_normalised_mlp.tunable_params = build_normalised_cnn.tunable_params = ("dropout",)


@pytest.mark.parametrize("builder", [build_normalised_mlp, build_normalised_cnn])
def test_fused_normalisation_keeps_per_trial_statistics_and_matches_one_by_one(digits, tmp_path, builder):
    from hpo.training.trainer import Trainer

    # (At 1e-2, float rounding that differs between the two programs grows visibly within an
    # epoch through the batch statistics; at these rates both agree to ~1e-6.)
    configs = [{"batch_size": 32, "learning_rate": lr, "dropout": d} for lr, d in ((3e-3, 0.0), (1e-3, 0.2))]
    trainer = Trainer(digits, builder, TrainingConfig(compile="graph"), {}, "/device:CPU:0")
    fused_trainer = fusing(trainer)
    unfused = run_unfused(trainer, tasks_for(tmp_path, configs, "one"))
    fused = list(train_fused(fused_trainer, tasks_for(tmp_path, configs, "fused")))
    assert_same(unfused, fused, tmp_path, "one", "fused", 2)
    # The moving averages (in the checkpoints) differ by trial: each saw its own activations.
    first, second = (weights(tmp_path / f"fused_{i}.npz") for i in range(2))
    assert any(a.shape == b.shape and not np.allclose(a, b) for a, b in zip(first, second))
    # A promotion continues from those checkpoints, moving averages included, fused or not.
    parents = [str(tmp_path / f"fused_{i}.npz") for i in range(2)]
    unfused = run_unfused(trainer, tasks_for(tmp_path, configs, "more_one", 2, 3, parents))
    fused = list(train_fused(fused_trainer, tasks_for(tmp_path, configs, "more_fused", 2, 3, parents)))
    assert_same(unfused, fused, tmp_path, "more_one", "more_fused", 2)


@pytest.mark.parametrize("optimizer", [{}, {"optimizer": "rmsprop", "momentum": 0.6}])
def test_a_fused_continuation_matches_an_unfused_one(digits, tmp_path, optimizer):
    """Checkpoints carry every slot both ways: fused out, unfused in, fused in again."""
    configs = [{**c, **optimizer} for c in CONFIGS]
    trainer = make_trainer(digits)
    fused_trainer = fusing(trainer)
    list(train_fused(fused_trainer, tasks_for(tmp_path, configs, "first", 0, 2)))
    parents = [str(tmp_path / f"first_{i}.npz") for i in range(3)]
    unfused = run_unfused(trainer, tasks_for(tmp_path, configs, "one", 2, 3, parents))
    fused = list(train_fused(fused_trainer, tasks_for(tmp_path, configs, "fused", 2, 3, parents)))
    assert_same(unfused, fused, tmp_path, "one", "fused", 3)


def test_a_fused_group_stopped_mid_way_resumes_from_its_progress_checkpoints(digits, tmp_path):
    trainer = make_trainer(digits, checkpoint_seconds=0)         # a progress checkpoint every epoch
    fused_trainer = fusing(trainer)
    whole = list(train_fused(fused_trainer, tasks_for(tmp_path, CONFIGS, "whole", 0, 4)))
    cut = train_fused(fused_trainer, tasks_for(tmp_path, CONFIGS, "cut", 0, 4))
    before = [next(cut), next(cut)]
    cut.close()                                                   # the worker dies after epoch 2
    resumed = list(train_fused(fused_trainer, tasks_for(tmp_path, CONFIGS, "cut", 0, 4)))
    # Every trial's epochs 1 and 2 are sent again (the driver may have missed any of them),
    # then 3 and 4 train.
    assert [[(r.trial_id, r.epoch, r.replayed) for r in reports] for reports in resumed] == \
        [[(i, epoch, True) for i in range(3) for epoch in (1, 2)], [(i, 3, False) for i in range(3)],
         [(i, 4, False) for i in range(3)]]
    assert [r.metrics for r in resumed[0]] == [before[epoch][i].metrics for i in range(3) for epoch in (0, 1)]
    assert_same(whole[2:], resumed[1:], tmp_path, "whole", "cut", 3)


@pytest.mark.parametrize("compile_seconds, programs", [(1e6, [3]), (0.0, [2, 3])])
def test_a_small_group_runs_in_a_bigger_program_when_that_is_cheaper(digits, tmp_path, compile_seconds, programs):
    """After a group of three, two trials of the architecture either take the cached 3-slot
    program, one slot spare (a compile would cost more), or get a program of their own; the
    two train as they would one by one either way."""
    from hpo.fusion.spare_slots import CallTimes

    trainer = make_trainer(digits)
    fused_trainer = fusing(trainer)
    list(train_fused(fused_trainer, tasks_for(tmp_path, CONFIGS, "three")))
    [three] = fused_trainer.programs.values()
    assert three.call_times.step > 0 and three.call_times.compile_seconds >= 0
    three.call_times = CallTimes(first_call=compile_seconds, first_steps=0, step_seconds=[1e-6])
    pair = CONFIGS[1:]
    fused = list(train_fused(fused_trainer, tasks_for(tmp_path, pair, "pair")))
    assert sorted(key[1] for key in fused_trainer.programs) == programs
    assert [[r.trial_id for r in epoch] for epoch in fused] == [[0, 1], [0, 1]]
    assert_same(run_unfused(trainer, tasks_for(tmp_path, pair, "one")), fused, tmp_path, "one", "pair", 2)


def test_groups_need_one_architecture_batch_and_epoch_range(digits, tmp_path):
    trainer = make_trainer(digits)
    fused_trainer = fusing(trainer)
    a, b, c = tasks_for(tmp_path, [CONFIGS[0], {**CONFIGS[1], "units": 48}, {**CONFIGS[2], "batch_size": 32}], "g")
    same_arch = tasks_for(tmp_path, CONFIGS, "h")
    assert len({group_key(trainer, t) for t in same_arch}) == 1
    assert len({group_key(trainer, t) for t in (a, b, c)}) == 3
    with pytest.raises(FusedGroupFailed, match="do not share"):
        list(train_fused(fused_trainer, [a, b]))


def test_a_diverging_member_fails_the_group(digits, tmp_path):
    configs = [{**CONFIGS[0], "optimizer": "sgd"}, {**CONFIGS[1], "optimizer": "sgd", "learning_rate": 1e9}]
    with pytest.raises(FusedGroupFailed, match=r"non-finite for trial\(s\) \[1\]"):
        list(train_fused(fusing(make_trainer(digits)), tasks_for(tmp_path, configs, "nan")))


def test_a_failed_fused_group_reruns_unfused_so_only_the_bad_trial_fails(digits, tmp_path):
    from hpo.executors.inline import InlineExecutor
    from hpo.jobs import TrialDone

    trainer = make_trainer(digits)
    executor = InlineExecutor(lambda: fusing(trainer), slots=4)
    configs = [{**CONFIGS[0], "optimizer": "sgd"}, {**CONFIGS[1], "optimizer": "sgd", "learning_rate": 1e9}]
    for task in tasks_for(tmp_path, configs, "fallback"):
        executor.submit(task)
    assert executor.free_slots() == 2 and sorted(executor.running()) == [0, 1]
    done = {}
    while executor.running():
        event = executor.next_event()
        if isinstance(event, TrialDone):
            done[event.trial_id] = event
    assert done[0].error is None and done[0].epochs_trained == 2
    assert "TrialFailed" in done[1].error and "loss became" in done[1].error


def test_normalisation_that_does_not_fuse_is_named():
    import keras

    from hpo.fusion.program import fusable

    def model(*layers):
        inputs = keras.Input((8, 8, 1))
        x = inputs
        for layer in layers:
            x = layer(x)
        return keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(x)))

    params = {"optimizer": "adam"}
    assert fusable(model(keras.layers.BatchNormalization(), keras.layers.LayerNormalization()), params) is None
    assert "over the last axis" in fusable(model(keras.layers.BatchNormalization(axis=1, name="bn")), params)
    assert "over the last axis" in fusable(model(keras.layers.LayerNormalization(axis=[1, 2])), params)
    assert "renormalisation" in fusable(model(keras.layers.BatchNormalization(renorm=True)), params)


def test_fused_programs_are_bounded_in_bytes_and_an_evicted_architecture_trains_the_same_again(
        digits, tmp_path, monkeypatch):
    """The fused cache keeps programs by the same rule as the unfused one (count and bytes of
    their variables, least recently used out): over its byte budget only the newest program
    stays, and an architecture that comes back is built again and trains as it did."""
    import hpo.fusion.group_trainer as group_trainer
    from hpo.fusion.group_trainer import fused_program_bytes

    monkeypatch.setattr(group_trainer, "DEFAULT_BUDGET_BYTES", 1)
    fused_trainer = fusing(make_trainer(digits))
    wide = [{**c, "units": 48} for c in CONFIGS[:2]]
    first = list(train_fused(fused_trainer, tasks_for(tmp_path, CONFIGS[:2], "first")))
    [program] = fused_trainer.programs.values()
    assert fused_program_bytes(program) > 2 * 32 * 64 * 4      # K stacked kernels at least
    list(train_fused(fused_trainer, tasks_for(tmp_path, wide, "wide")))
    assert len(fused_trainer.programs) == 1 and fused_trainer.programs.evictions == 1
    again = list(train_fused(fused_trainer, tasks_for(tmp_path, CONFIGS[:2], "again")))
    assert fused_trainer.programs.misses == 3 and fused_trainer.programs.evictions == 2
    assert_same(first, again, tmp_path, "first", "again", 2)
