"""Shared by every test folder: the repository root on sys.path (so `tests.support` and
`hpo` import from this checkout) and the fixtures more than one folder uses. Nothing here
imports TensorFlow at import time: tests/unit must run without it."""

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Three test processes, each with its CLI and worker processes, run TensorFlow and numpy at
# once on a machine of a few cores. Left alone, each sizes its thread pools for the whole
# machine and the pools fight over the cores, which costs CPU time: one thread per pool is the
# cheaper setting on a machine of two cores (benchmarks/RESULTS.md, "The test suite"). Tests
# that size pools themselves (the local and Dask workers) still do; what a test asserts does
# not depend on it.
for _pool in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")
# XLA's LLVM back end at its lowest optimisation level, for this process and every CLI and worker
# process a test starts: the tests' programs run a few steps each, so the machine code's speed
# does not matter, while optimising it is about half of what an XLA compilation costs here.
# XLA's own passes, the fusion decisions tests read from the HLO included, run as before; the
# trainers add their multi-output fusion option to these flags as for a user, and the process
# that checks a user's first compilation (tests/support/tensorflow_process.py) starts without them.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
# Compiled modules are kept (`__pycache__`, ignored by git) even where the environment says
# not to write them (PYTHONDONTWRITEBYTECODE): the suite starts dozens of CLI and worker
# processes, each of which would otherwise compile hpo's modules from source again, and pytest
# keeps its rewritten test modules only when bytecode may be written.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOGICAL_CPUS = 2


@pytest.fixture(scope="session")
def tf_logical_cpus():
    """TensorFlow with the CPU split into LOGICAL_CPUS logical devices, as GPU slots would be.

    This must happen before TensorFlow initialises its devices, and any in-process search
    initialises them, so tests/training and tests/e2e use it for every test (their
    conftest.py), and it runs once per test process, before the first of them. It also requests XLA's
    multi-output fusion, as a Trainer does when it starts: XLA reads its flags at the
    process's first compilation, and tests that compile XLA before making a trainer would
    otherwise decide for every later test whether Adam runs in one pass."""
    from hpo.training.xla_fusion import request_multi_output_fusion
    request_multi_output_fusion()
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(LOGICAL_CPUS)])
    except RuntimeError:
        pass  # already initialised by an earlier test in this process
    return tf


@pytest.fixture
def space_dict():
    return {
        "layers": {"type": "int", "low": 1, "high": 3},
        "units": {"type": "int", "low": 32, "high": 512, "log": True},
        "dropout": {"type": "float", "low": 0.0, "high": 0.5},
        "learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
        "optimizer": {"type": "choice", "values": ["adam", "sgd"]},
        "momentum": {"type": "float", "low": 0.0, "high": 0.99, "when": {"optimizer": "sgd"}},
    }


@pytest.fixture(scope="session")
def digits():
    """sklearn's 8x8 digits, split 70/20/10: the small real dataset trainer tests share."""
    from hpo.config import DataConfig
    from hpo.data import load_dataset
    return load_dataset(DataConfig(dataset="digits", validation_split=0.2, test_split=0.1), seed=0)


def pytest_collection_finish(session):
    """Freeze what collection loaded (TensorFlow, Keras and every test module: millions of
    objects) out of the garbage collector's sight. Keras's `clear_session` and Keras Tuner
    call `gc.collect()` for every model they build, and Python's own full collections come
    round as tests allocate; each one would walk that whole heap, which costs a third of a
    second a time here. What tests create later is collected as before."""
    import gc
    gc.collect()
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Run the long tests first: with xdist, a long test drawn last keeps one worker busy while
    the others sit idle, and the suite's wall time is that tail. tests/e2e first (each starts
    processes and trains), then the rest marked slow, then the quick ones, which fill the gaps.
    The sort is stable, so each group keeps its collection order (every xdist worker must
    collect the same order)."""
    def weight(item) -> int:
        if "tests/e2e/" in item.nodeid:
            return 0
        return 1 if item.get_closest_marker("slow") else 2
    items.sort(key=weight)
