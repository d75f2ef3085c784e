"""`training.fuse: auto`: the group size comes from memory and a measured probe."""

import keras
import pytest

from hpo.config import TrainingConfig
from hpo.fusion import group_size as fuse_size
from hpo.fusion.group_size import (
    AUTO_CEILING,
    CPU_ONE_THREAD_PROVISIONAL_MAX_MACS,
    CPU_PROVISIONAL_MAX_MACS,
    PROVISIONAL_K,
    bytes_per_trial,
    macs_per_example,
    memory_cap,
    probe_sizes,
    provisional_k,
    smallest_near_best,
)
from hpo.jobs import TrainTask
from hpo.models import get_builder


@pytest.mark.parametrize("curve, expected", [
    ({1: 1.0, 2: 0.6, 4: 0.45, 8: 0.43}, 4),     # 8 is only 5% better than 4
    ({1: 1.0, 2: 0.95}, 1),                      # fusing does not pay at all
    ({1: 1.0, 2: 0.96, 4: 0.5, 8: 0.28}, 8),     # not convex: a flat first doubling does not stop the probe
    ({1: 1.0}, 1),
])
def test_the_group_size_is_the_smallest_within_ten_percent_of_the_best(curve, expected):
    assert smallest_near_best(curve) == expected


def test_probes_double_up_to_the_memory_cap_and_the_candidates():
    assert probe_sizes(cap=32, candidates=5) == [2, 4, 8]
    assert probe_sizes(cap=4, candidates=30) == [2, 4]
    assert probe_sizes(cap=32, candidates=2) == [2]
    assert probe_sizes(cap=1, candidates=8) == []


def test_memory_caps_the_group_at_a_share_of_free_memory():
    assert memory_cap(per_trial=100 << 20, free_bytes=1 << 30) == 2           # 256 MiB / 100 MiB
    assert memory_cap(per_trial=1 << 30, free_bytes=1 << 30) == 1             # never below one trial
    assert memory_cap(per_trial=1, free_bytes=1 << 40) == AUTO_CEILING
    assert memory_cap(per_trial=1 << 20, free_bytes=None) == AUTO_CEILING     # unknown: the OOM fallback guards


def test_a_trials_bytes_count_parameters_and_activations():
    inputs = keras.Input((10,))
    hidden = keras.layers.Dense(20)(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3)(hidden))
    parameters = 10 * 20 + 20 + 20 * 3 + 3
    activations = 10 + 20 + 3           # per example: the input layer's, then each Dense's output
    assert bytes_per_trial(model, batch_size=16) == 4 * (5 * parameters + 3 * 16 * activations)


def test_multiply_adds_count_dense_kernels_and_each_output_position_of_a_convolution():
    inputs = keras.Input((8, 8, 1))
    conv = keras.layers.Conv2D(4, 3, padding="same")(inputs)               # 8 x 8 positions x (3 x 3 x 1 x 4)
    pooled = keras.layers.Flatten()(keras.layers.MaxPooling2D()(conv))     # 4 x 4 x 4 = 64 features
    model = keras.Model(inputs, keras.layers.Dense(10)(keras.layers.Dense(32)(pooled)))
    assert macs_per_example(model) == 8 * 8 * 3 * 3 * 1 * 4 + 64 * 32 + 32 * 10


def dense_model(units):
    inputs = keras.Input((784,))
    return keras.Model(inputs, keras.layers.Dense(10)(keras.layers.Dense(units)(inputs)))


def test_unmeasured_groups_of_compute_bound_models_do_not_fuse_on_a_cpu():
    small, big = dense_model(128), dense_model(1024)
    assert macs_per_example(small) < CPU_PROVISIONAL_MAX_MACS < macs_per_example(big)
    assert provisional_k(small, "/device:CPU:0", cpu_threads=2) == PROVISIONAL_K
    assert provisional_k(big, "/device:CPU:0", cpu_threads=2) == 1
    assert provisional_k(big, "/job:localhost/replica:0/task:0/device:GPU:1") == PROVISIONAL_K   # a GPU fills up


def test_a_one_thread_cpu_worker_fuses_unmeasured_only_small_models():
    """A `local` or `dask` worker on a 2-core machine runs its kernels on one thread: no idle
    core for a fused step to fill, so only models whose steps are mostly fixed work fuse
    before a probe has measured them."""
    tiny, mlp_2x128 = dense_model(32), dense_model(128)
    assert macs_per_example(tiny) < CPU_ONE_THREAD_PROVISIONAL_MAX_MACS < macs_per_example(mlp_2x128)
    assert provisional_k(tiny, "/device:CPU:0", cpu_threads=1) == PROVISIONAL_K
    assert provisional_k(mlp_2x128, "/device:CPU:0", cpu_threads=1) == 1
    assert provisional_k(mlp_2x128, "/device:CPU:0", cpu_threads=2) == PROVISIONAL_K
    assert provisional_k(mlp_2x128, "/device:GPU:0", cpu_threads=1) == PROVISIONAL_K
    assert fuse_size.kernel_threads() >= 1


MLP = {"layers": 2, "units": 32, "batch_size": 64, "dropout": 0.1}


def make_trainer(digits):
    from hpo.training.trainer import Trainer
    return Trainer(digits, get_builder("mlp"), TrainingConfig(compile="graph"), {}, "/device:CPU:0")


def tasks(tmp_path, n, epochs):
    return [TrainTask(trial_id=i, config={**MLP, "learning_rate": 1e-3 * (i + 1)}, start_epoch=0, end_epoch=epochs,
                      seed=i, checkpoint_out=str(tmp_path / f"t{i}.npz"), objective="val_accuracy")
            for i in range(n)]


@pytest.mark.slow
def test_auto_probes_once_per_architecture_and_keeps_its_choice(digits, tmp_path):
    from hpo.fusion.group_trainer import FusingTrainer, group_size

    trainer = FusingTrainer(make_trainer(digits), "auto")
    group = tasks(tmp_path, 6, epochs=100)        # 6 x 100 x 19 steps: enough work to repay a probe
    k = group_size(trainer, group)
    [choice] = trainer.decisions.choices.values()
    assert sorted(choice.per_trial_ms) == [1, 2, 4, 8]         # 8: the first doubling that holds all 6
    assert all(ms > 0 for ms in choice.per_trial_ms.values())
    assert choice.k == k == smallest_near_best(choice.per_trial_ms) and not choice.settled
    programs = len(trainer.programs)
    assert group_size(trainer, group) == k and len(trainer.programs) == programs    # no second probe


def test_auto_respects_the_memory_cap_and_skips_the_probe_for_short_work(digits, tmp_path, monkeypatch):
    import hpo.fusion.group_trainer as fused_trainer

    trainer = fused_trainer.FusingTrainer(make_trainer(digits), "auto")
    per_trial = bytes_per_trial(trainer.trainer.build_model(MLP, 0), 64)
    monkeypatch.setattr(fused_trainer, "free_memory", lambda device: 3 * per_trial / fuse_size.MEMORY_SHARE)
    short = tasks(tmp_path, 8, epochs=1)
    assert PROVISIONAL_K > 3
    assert fused_trainer.group_size(trainer, short) == 3       # short work: provisional K, capped by memory
    assert not trainer.decisions.choices                        # ... and nothing measured


def test_free_memory_is_known_on_the_cpu():
    assert fuse_size.free_memory("/device:CPU:0") > 0


def test_short_work_on_a_compute_bound_model_trains_unfused_on_a_cpu(digits, tmp_path):
    from hpo.fusion.group_trainer import FusingTrainer, group_size

    trainer = FusingTrainer(make_trainer(digits), "auto")
    wide = [TrainTask(trial_id=i, config={**MLP, "units": 1024, "learning_rate": 1e-3}, start_epoch=0, end_epoch=1,
                      seed=i, checkpoint_out=str(tmp_path / f"w{i}.npz"), objective="val_accuracy") for i in range(4)]
    assert group_size(trainer, wide) == 1
    assert not trainer.decisions.choices
    assert group_size(trainer, tasks(tmp_path, 4, epochs=1)) == PROVISIONAL_K     # the narrow MLP still fuses
