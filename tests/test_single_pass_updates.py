"""Adam(W) in one pass over memory under XLA (and the fused engine's SGD with momentum:
tests/test_fused.py): Keras's update to float rounding, one fused loop, and Keras's own
form wherever XLA would not fuse it."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hpo.training.xla_fusion import OPT_OUT, OPTION, request_multi_output_fusion

ROOT = Path(__file__).resolve().parents[1]


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


def run_python(code: str) -> str:
    """`code` in a fresh interpreter, without the XLA_FLAGS this process's trainers set."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**env, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_xla_fuses_the_update_into_one_loop_once_a_trainer_has_started():
    """The option is requested when a Trainer starts (importing the engine changes nothing):
    a trainer made before the process's first XLA compilation gets the one-loop update."""
    assert run_python("from hpo.config import TrainingConfig\n"
                      "from hpo.data import load_dataset\n"
                      "from hpo.config import DataConfig\n"
                      "from hpo.models import get_builder\n"
                      "from hpo.training.trainer import Trainer\n"
                      "data = load_dataset(DataConfig(dataset='digits'))\n"
                      "Trainer(data, get_builder('mlp'), TrainingConfig(), {}, '/device:CPU:0')\n"
                      "from hpo.training.xla_fusion import fuses_adam_in_one_loop\n"
                      "print(fuses_adam_in_one_loop('/device:CPU:0'))") == "True"


def test_a_process_that_compiled_xla_first_keeps_keras_form():
    """XLA read its flags before the engine could add the option: no fused loop, so the
    three-loop form (faster then) is kept."""
    assert run_python("import tensorflow as tf\n"
                      "tf.function(lambda x: x * 2, jit_compile=True)(tf.ones(3))\n"
                      "from hpo.training.xla_fusion import single_pass_update\n"
                      "print(single_pass_update('xla', '/device:CPU:0'))") == "False"
