"""A trial's seed decides its draws even while another thread draws from Python's `random`
(a Dask worker's event loop does, for heartbeat jitter and comm back-off)."""

import random
import threading
import time

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
