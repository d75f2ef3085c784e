"""Where a trial's start-up goes, and what reusing a warm program saves: time to the first step.

    python benchmarks/startup_profile.py            # ~1 minute on one core

One process on one thread (as one of the main job's two workers), the main job's data and
`experiments/mnist.yaml`'s training settings, with `steps_per_call` 1 so the first compiled
call is one step. "Time to first step" is the trial's `startup_seconds`: `Trainer.run`
entry to the end of that first call, less one step at the epoch's steady per-step time.
For the smallest, median and largest CNN of the main job's space (`roofline.space_cnns`),
each case three times:
- cold: a new architecture on this worker (build, stateless check, optimizer, trace, graph
  optimisation, the first step);
- warm new trial: another config of the same architecture (the cached program, weights
  re-initialised by assignment);
- warm promotion: the config continued from its checkpoint on the worker that trained it;
- cold promotion: the same continuation on a worker that has not seen the architecture
  (what a promotion sent to the other worker pays).
Prints medians in ms and the cold/warm ratios; phases of the cold case from timers around
the trainer's own methods.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 3
TRAINING = {"dropout": 0.1, "learning_rate": 2e-3, "optimizer": "adam", "batch_size": 64}


def main() -> None:
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from benchmarks.roofline import space_cnns
    from hpo.config import load_experiment
    from hpo.jobs import TrainTask
    from hpo.training import trainer as trainer_module
    from hpo.training.setup import trainer_for

    experiment = load_experiment(ROOT / "experiments" / "mnist.yaml", ["training.steps_per_call=1"])
    phases: dict[str, float] = {}
    _time_methods(trainer_module, phases)
    folder = Path(tempfile.mkdtemp(prefix="startup-profile-"))
    print(f"time to first step (ms, median of {REPEATS}), one thread; {cpu_description()}")
    print(f"{'cnn':<9} {'cold':>7} {'warm new':>9} {'warm promo':>11} {'cold promo':>11} {'cold/warm':>10}")
    trial = [0]

    def task(config, start=0, end=1, checkpoint_in=None, seed=1):
        trial[0] += 1
        return TrainTask(trial_id=trial[0], config=config, start_epoch=start, end_epoch=end, seed=seed,
                         checkpoint_out=str(folder / f"t{trial[0]}.npz"), checkpoint_in=checkpoint_in,
                         objective="val_accuracy", data_seed=0)

    def first_step(trainer, job) -> float:
        reports = list(trainer.run(job))
        return 1000 * reports[0].metrics["startup_seconds"]

    cold_phases: dict[str, list[dict[str, float]]] = {}
    for name, shape in space_cnns().items():
        config = {**shape, **TRAINING}
        rows: dict[str, list[float]] = {"cold": [], "warm new": [], "warm promo": [], "cold promo": []}
        for repeat in range(REPEATS):
            warm = trainer_for(experiment)
            phases.clear()
            parent = task(config, seed=10 + repeat)
            rows["cold"].append(first_step(warm, parent))
            cold_phases.setdefault(name, []).append(dict(phases))
            rows["warm new"].append(first_step(warm, task({**config, "dropout": 0.3}, seed=20 + repeat)))
            promotion = task(config, 1, 2, parent.checkpoint_out, seed=10 + repeat)
            rows["warm promo"].append(first_step(warm, promotion))
            other = trainer_for(experiment)
            rows["cold promo"].append(first_step(other, task(config, 1, 2, parent.checkpoint_out, seed=10 + repeat)))
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"{name:<9} {med['cold']:7.0f} {med['warm new']:9.0f} {med['warm promo']:11.0f} "
              f"{med['cold promo']:11.0f} {med['cold'] / med['warm new']:9.1f}x")
    print("cold start-up by phase (ms, median): " + "; ".join(
        f"{name}: " + ", ".join(f"{phase} {statistics.median(p.get(phase, 0.0) for p in runs):.0f}"
                                for phase in sorted({k for p in runs for k in p}))
        for name, runs in cold_phases.items()))


def _time_methods(trainer_module, phases: dict[str, float]) -> None:
    """Accumulate wall time spent in the trainer's start-up steps into `phases`."""
    def timed(owner, attribute, label):
        original = getattr(owner, attribute)

        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                phases[label] = phases.get(label, 0.0) + 1000 * (time.perf_counter() - started)
        setattr(owner, attribute, wrapper)

    trainer_class = trainer_module.Trainer
    timed(trainer_class, "build_model", "build")
    from hpo.training.fresh_weights import FreshWeights
    timed(FreshWeights, "verify", "stateless check")
    timed(trainer_class, "_compile", "optimizer+step objects")
    timed(trainer_module, "load_checkpoint", "checkpoint load")


if __name__ == "__main__":
    main()
