"""A trial's seed decides its draws even while another thread draws from Python's `random`
(a Dask worker's event loop does, for heartbeat jitter and comm back-off)."""

import random
import threading
import time

import numpy as np

from hpo.training.seeding import use_thread_private_python_random


def in_thread(work):
    """Run `work` in a fresh thread while a second thread keeps drawing from `random`."""
    result, stop = {}, threading.Event()

    def noise():
        while not stop.is_set():
            random.random()
            time.sleep(0.0001)

    def run():
        use_thread_private_python_random()
        result["value"] = work()

    drawer, worker = threading.Thread(target=noise), threading.Thread(target=run)
    drawer.start()
    try:
        worker.start()
        worker.join()
    finally:
        stop.set()
        drawer.join()
    return result["value"]


def test_a_thread_with_its_own_generator_draws_its_seeds_sequence_whatever_other_threads_draw():
    def draws():
        random.seed(7)
        out = []
        for _ in range(20):
            out.append(random.randint(1, 10**9))
            time.sleep(0.001)            # let the other thread run between draws
        return out

    expected = random.Random(7)
    assert in_thread(draws) == [expected.randint(1, 10**9) for _ in range(20)]
    # Threads without a generator of their own still share the process's one.
    shared_before = random.getstate()
    threading.Thread(target=random.random).start()
    time.sleep(0.05)
    assert random.getstate() != shared_before


def test_initial_weights_follow_the_trial_seed_while_another_thread_draws(digits):
    from hpo.config import TrainingConfig
    from hpo.models import get_builder
    from hpo.training.trainer import Trainer

    params = {"layers": 2, "units": 16, "dropout": 0.1, "learning_rate": 1e-3, "batch_size": 32}

    def weights():
        trainer = Trainer(digits, get_builder("mlp"), TrainingConfig(compile="graph"), {}, "/device:CPU:0")
        # Three seeds: a real build, a stateless one, then a learnt recipe's replay.
        return [[np.asarray(w) for w in trainer.fresh_weights(params, seed)] for seed in (3, 4, 5)]

    quiet = weights()
    noisy = in_thread(weights)
    for a, b in zip(quiet, noisy):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
