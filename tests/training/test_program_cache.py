"""A worker's bounded program cache on real TensorFlow: what an eviction frees, and that an
evicted architecture comes back as a new one."""

import gc
import weakref

import numpy as np
import pytest

from hpo.config import TrainingConfig
from hpo.jobs import TrainTask
from hpo.models import get_builder


def config(units, optimizer="adam"):
    return {"layers": 1, "units": units, "dropout": 0.1, "learning_rate": 3e-3, "batch_size": 64,
            "optimizer": optimizer, **({"momentum": 0.5} if optimizer == "sgd" else {})}


def make_trainer(digits, capacity):
    from hpo.training.trainer import Trainer
    return Trainer(digits, get_builder("mlp"), TrainingConfig(compile="graph"), {}, "/device:CPU:0",
                   cache_capacity=capacity)


def train(trainer, tmp_path, cfg, name, epochs=2):
    out = tmp_path / f"{name}.npz"
    task = TrainTask(trial_id=0, config=cfg, start_epoch=0, end_epoch=epochs, seed=5, checkpoint_out=str(out))
    reports = [{k: v for k, v in r.metrics.items() if not k.endswith("seconds")} for r in trainer.run(task)]
    with np.load(out) as data:
        weights = [data[k] for k in sorted(data.files) if k.startswith("w")]
    return reports, weights


def step_graphs(program):
    return [weakref.ref(f.graph) for f in program.train_steps._list_all_concrete_functions()]


@pytest.mark.slow
def test_the_cache_never_holds_more_than_its_bound_and_an_evicted_architecture_trains_as_a_fresh_one(
        digits, tmp_path):
    trainer = make_trainer(digits, capacity=2)
    first = train(trainer, tmp_path, config(16), "first")
    for units in (24, 40, 56):
        train(trainer, tmp_path, config(units), f"other{units}")
        assert len(trainer.programs) <= 2
    assert trainer.programs.evictions == 2
    misses = trainer.programs.misses
    again = train(trainer, tmp_path, config(16), "again")
    assert trainer.programs.misses == misses + 1          # evicted: built and traced anew
    fresh = train(make_trainer(digits, capacity=2), tmp_path, config(16), "fresh")
    assert again[0] == fresh[0] == first[0]
    for a, b in zip(again[1], fresh[1]):
        np.testing.assert_array_equal(a, b)


def test_a_cached_architecture_is_a_hit_and_is_not_traced_again(digits, tmp_path):
    trainer = make_trainer(digits, capacity=2)
    train(trainer, tmp_path, config(16), "a")
    traces, hits = trainer.traces, trainer.programs.hits
    train(trainer, tmp_path, {**config(16), "learning_rate": 1e-2}, "b")
    assert trainer.programs.hits == hits + 1 and trainer.traces == traces


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_an_evicted_program_frees_its_traced_step(digits, tmp_path, optimizer):
    """Nothing global (TensorFlow's gradient registry, Keras's state) keeps an evicted step's
    graph alive, so a search over many architectures does not grow with them."""
    trainer = make_trainer(digits, capacity=1)
    train(trainer, tmp_path, config(16, optimizer), "a", epochs=1)
    (key,) = trainer.programs.keys()
    graphs = step_graphs(trainer.programs.get(key))
    assert graphs and all(g() is not None for g in graphs)
    train(trainer, tmp_path, config(24, optimizer), "b", epochs=1)
    assert key not in trainer.programs
    gc.collect()
    assert [g() for g in graphs] == [None] * len(graphs)
