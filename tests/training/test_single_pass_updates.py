"""Adam(W) in one pass over memory under XLA (and the fused engine's SGD with momentum:
tests/training/test_fused.py): Keras's update to float rounding, one fused loop, and Keras's own
form wherever XLA would not fuse it. Whether a process gets the fused loop:
tests/e2e/test_xla_fusion_process.py."""

import numpy as np
import pytest

from hpo.training.xla_fusion import OPT_OUT, OPTION, request_multi_output_fusion


@pytest.mark.parametrize("flags, expected", [
    ("", f"--xla_backend_extra_options={OPTION}"),
    ("--xla_cpu_enable_fast_math=false", f"--xla_cpu_enable_fast_math=false --xla_backend_extra_options={OPTION}"),
    ("--xla_backend_extra_options=a=1 --xla_dump_to=/tmp/x",
     f"--xla_backend_extra_options=a=1,{OPTION} --xla_dump_to=/tmp/x"),
    (f"--xla_backend_extra_options={OPTION}", f"--xla_backend_extra_options={OPTION}"),
])
def test_the_option_joins_the_users_xla_flags(flags, expected):
    environ = {"XLA_FLAGS": flags} if flags else {}
    request_multi_output_fusion(environ)
    assert environ["XLA_FLAGS"] == expected


def test_the_option_can_be_declined():
    environ = {OPT_OUT: "0", "XLA_FLAGS": "--xla_dump_to=/tmp/x"}
    request_multi_output_fusion(environ)
    assert environ["XLA_FLAGS"] == "--xla_dump_to=/tmp/x"


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_single_pass_matches_keras_own_update(kind):
    """Same gradients into Keras's optimizer and ours, compiled with XLA: the slots agree and
    the weights differ by no more than float rounding."""
    import keras
    import tensorflow as tf

    from hpo.training.optimizers import TunableOptimizer

    rng = np.random.default_rng(0)
    start = rng.normal(size=(64, 32)).astype("float32")
    gradients = rng.normal(size=(20, 64, 32)).astype("float32")
    params = {"optimizer": kind, "learning_rate": 3e-3, "beta_1": 0.8, "weight_decay": 0.05}
    ours_variable, keras_variable = keras.Variable(start), keras.Variable(start)
    ours = TunableOptimizer(params, [ours_variable], single_pass=True).optimizer
    theirs = (keras.optimizers.AdamW(3e-3, weight_decay=0.05, beta_1=0.8) if kind == "adamw"
              else keras.optimizers.Adam(3e-3, beta_1=0.8))
    theirs.build([keras_variable])
    def compiled_step(optimizer, variable):
        return tf.function(lambda g: optimizer.apply([g], [variable]), jit_compile=True)

    for optimizer, variable in ((ours, ours_variable), (theirs, keras_variable)):
        step = compiled_step(optimizer, variable)
        for g in gradients:
            step(tf.constant(g))
    np.testing.assert_allclose(ours_variable.numpy(), keras_variable.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(ours_variable.numpy(), start, atol=1e-3)       # it did train
    for mine, keras_slot in ((ours._momentums[0], theirs._momentums[0]), (ours._velocities[0], theirs._velocities[0])):
        np.testing.assert_allclose(mine.numpy(), keras_slot.numpy(), rtol=1e-5, atol=1e-6)


def test_unfused_xla_programs_update_adam_in_one_pass_and_graph_programs_as_keras(digits):
    from hpo.config import TrainingConfig
    from hpo.models import get_builder
    from hpo.training.trainer import Trainer

    for mode in ("xla", "graph"):
        trainer = Trainer(digits, get_builder("mlp"), TrainingConfig(compile=mode), {}, "/device:CPU:0")
        for optimizer in ("adam", "adamw", "sgd"):
            params = {"layers": 1, "units": 16, "batch_size": 32, "optimizer": optimizer}
            program = trainer.program_for(trainer.resolve(params), seed=0)
            # Unfused SGD was slower in one pass (`single_pass_momentum`) and keeps Keras's form.
            assert program.optimizer.optimizer.single_pass == (mode == "xla" and optimizer != "sgd")
