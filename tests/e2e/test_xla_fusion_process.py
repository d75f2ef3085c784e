"""XLA reads its flags at a process's first compilation, so whether Adam(W) updates in one
fused loop is decided per process: checked in fresh interpreters (the update itself:
tests/training/test_single_pass_updates.py)."""

import os
import subprocess
import sys

from tests.support.cli import ROOT


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
