"""Send a promotion to the worker that trained its parent, when that worker can take it.

Each worker keeps the compiled programs of the architectures it trained
(`hpo.training.program_cache.ProgramCache`), but a worker process cannot lend them to another:
a traced TensorFlow function and its variables live in one process's runtime. A promotion
(a task that continues its parent from `checkpoint_in`) that lands on the worker whose cache
holds its architecture skips the build, the trace and the graph optimisation, and only
restores the checkpoint; on any other worker it pays all of them again, measured at
1.0-1.9 s against 0.02-0.2 s on this 2-core CPU for the main job's CNNs
(`benchmarks/startup_profile.py`).

The choice only breaks ties: among the workers with the fewest tasks (the executor keeps
every worker busy first), the parent's is preferred. So a promotion never waits for its
worker, and a worker never idles for one.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable, Sequence, TypeVar

W = TypeVar("W")

# Checkpoints remembered: far more than the trials in flight between a parent's end and its
# promotion (a Hyperband rung), and a few hundred bytes each.
REMEMBERED = 4096


class WorkerAffinity:
    """Which worker wrote each checkpoint; the preferred worker for a task that reads one."""

    def __init__(self, remembered: int = REMEMBERED):
        self.remembered = remembered
        self._writers: OrderedDict[str, Hashable] = OrderedDict()
        self.hits = 0        # promotions sent to their parent's worker
        self.misses = 0      # promotions whose parent's worker was gone or had more tasks

    def wrote(self, checkpoint: str, worker: Hashable) -> None:
        """`worker` trains the task that writes `checkpoint`."""
        self._writers[checkpoint] = worker
        self._writers.move_to_end(checkpoint)
        while len(self._writers) > self.remembered:
            self._writers.popitem(last=False)

    def forget(self, worker: Hashable) -> None:
        """A worker that was replaced: its programs are gone with its process."""
        for checkpoint in [c for c, w in self._writers.items() if w == worker]:
            del self._writers[checkpoint]

    def choose(self, candidates: Sequence[W], load: Sequence[int], checkpoint_in: str | None,
               key=lambda worker: worker) -> W:
        """Among `candidates` (with `load[i]` tasks each), one of the least loaded: the one that
        wrote `checkpoint_in` if it is among them, else the first."""
        fewest = min(load)
        least = [c for c, n in zip(candidates, load) if n == fewest]
        if checkpoint_in is None:
            return least[0]
        writer = self._writers.get(checkpoint_in)
        for candidate in least:
            if writer is not None and key(candidate) == writer:
                self.hits += 1
                return candidate
        self.misses += 1
        return least[0]
