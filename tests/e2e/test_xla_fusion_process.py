"""XLA reads its flags at a process's first compilation, so whether Adam(W) updates in one
fused loop is decided per process: checked in fresh interpreters (the update itself:
tests/training/test_single_pass_updates.py)."""

import pytest

from tests.support.tensorflow_process import TENSORFLOW_PROCESS_GROUP, fresh_python, tensorflow_then_xla

# One worker runs this module and test_native_logs.py: they share one TensorFlow process.
pytestmark = pytest.mark.xdist_group(TENSORFLOW_PROCESS_GROUP)


def run_python(code: str) -> str:
    """The last line `code` prints in a fresh interpreter (`fresh_python`)."""
    done = fresh_python(code, "3")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.decode().strip().splitlines()[-1]


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
    three-loop form (faster then) is kept. (The process imported TensorFlow the CLI's way
    first: test_native_logs.py reads that part of it.)"""
    done, _, (out, _) = tensorflow_then_xla()
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.strip().splitlines()[-1] == b"False"
