"""Syne Tune's schedulers in Syne Tune's own simulator, on `many_workers.py`'s problems.

    nice -n 19 .venv-bench-syne/bin/python benchmarks/many_workers_syne.py --seeds 1 --full-evals 60 \\
        --tasks "126025 126029 167149 167184" --cache /tmp/many-workers
    nice -n 19 .venv-bench/bin/python benchmarks/many_workers.py --seeds 1 --full-evals 60 \\
        --tasks "126025 126029 167149 167184" --cache /tmp/many-workers --cached "syne asha syne hyperband syne bohb"

Syne Tune (0.16) needs numpy 2 and a venv of its own (`.venv-bench-syne`, from
`benchmarks/setup_bench_env.sh`); the second command reads these runs from the cache and
reports them beside hpo's searchers and the other peers. The problems, their costs, T1, the
time windows, the stop at the 1-worker run's final regret, the seeds and the cache keys are
`many_workers.py`'s own (imported, not copied).

How Syne Tune runs here: its `Tuner` with `n_workers=W`, over its `UserBlackboxBackend` (the
simulator backend for a `Blackbox` given in code) and its `SimulatorCallback`. The `Blackbox`
(`ProblemBlackbox`) is the problem's learning curve: the loss and the seconds from scratch at
every integer fidelity (LCBench's epochs 1..52, the surrogate's cumulative `time`; MFHartmann's
z 1..100, z * 2**u seconds). The simulator starts a trial at fidelity 1 and reports every
fidelity at the time its cost says; a scheduler that stops the trial at a rung ends it there.
So a trial is charged its cost to the fidelity it was stopped at, incrementally, as hpo's
resumed promotions are (time(b) - time(a) from rung a to b); 0.16 has no pause-and-resume
scheduler, so nothing is ever resumed. Syne's own delays stay (0.05 s from a start, a report, a
stop). Two settings differ from Syne's defaults, both so that its figures measure the
scheduler and not this machine:
- the Tuner looks at its workers every `--poll` simulated seconds (default 0.5; Syne's default
  is 5, longer than a rung-0 job of LCBench, which would leave workers idle for most of it):
  a worker whose trial ended waits for the next look;
- the backend does not add the real seconds spent outside it (the scheduler, the Tuner's
  bookkeeping) to the simulated clock, as hpo's simulated executor does not (`--real-time`
  keeps Syne's default). The scheduler's real time is reported as the decision time instead.

Schedulers (Syne Tune 0.16's multi-fidelity baselines, eta 3, grace period round(min_budget):
rungs at 2, 6, 18 epochs on LCBench and 4, 12, 36 on MFHartmann, where hpo's are 2, 6, 17 and
4, 11, 33):
- `syne asha`: `ASHA`, stopping type, one bracket, random configurations;
- `syne hyperband`: `ASHA` with four brackets (asynchronous Hyperband, stopping type);
- `syne bohb`: `BOHB`, Syne's KDE searcher over asynchronous successive halving (stopping).
0.16 has no promotion-type Hyperband, MOBSTER, Hyper-Tune or DyHPO (they were in 0.13-0.14).

What is recorded, as for every run of `many_workers.py`: the incumbent (the best loss observed
at the highest rung level or full fidelity any trial reached; its exact value at the full
fidelity), in simulated time; utilisation (each trial holds its worker from its start to its
last report, or to the stop the scheduler sent after its report; a worker whose trial ended is
idle until the Tuner's next look); decisions (the scheduler's real seconds in suggest and its
callbacks since the previous trial started, one per trial started).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.many_workers import ETA, Incumbent, Run, SimProblem, arguments, collect, report, setting  # noqa: E402

SCHEDULERS = ("syne asha", "syne hyperband", "syne bohb")
DEFAULT_POLL = 0.5       # simulated seconds between the Tuner's looks at its workers


class _Reached(Exception):
    """The run's incumbent is as good as its target."""


def syne_space(problem: SimProblem) -> dict[str, Any]:
    from syne_tune.config_space import choice, lograndint, loguniform, randint, uniform
    space = {}
    for name, spec in problem.space.items():
        if spec["type"] == "choice":
            space[name] = choice(list(spec["values"]))
        elif spec["type"] == "int":
            space[name] = (lograndint if spec.get("log") else randint)(spec["low"], spec["high"])
        else:
            space[name] = (loguniform if spec.get("log") else uniform)(spec["low"], spec["high"])
    return space


def problem_blackbox(problem: SimProblem, run_seed: int):
    """The problem as a Syne Tune `Blackbox`: the loss and the elapsed seconds at every fidelity."""
    from syne_tune.blackbox_repository.blackbox import Blackbox
    from syne_tune.config_space import randint

    from benchmarks.searchers import typed

    class ProblemBlackbox(Blackbox):
        def __init__(self):
            super().__init__(configuration_space=syne_space(problem),
                             fidelity_space={"epoch": randint(1, problem.fidelities)},
                             objectives_names=["loss", "elapsed_time"])

        @property
        def fidelity_values(self) -> np.ndarray:
            return np.arange(1, problem.fidelities + 1)

        def _objective_function(self, configuration, fidelity=None, seed=None):
            # The run's seed, not Syne's per-query one: MFHartmann's noise follows the run.
            curve = np.array(problem.curve(typed(problem, configuration), run_seed), dtype=float)
            if fidelity is None:
                return curve
            return dict(zip(self.objectives_names, curve[int(fidelity["epoch"]) - 1]))

    return ProblemBlackbox()


def scheduler_for(name: str, problem: SimProblem, seed: int):
    from syne_tune.optimizer.baselines import ASHA, BOHB
    grace = max(1, int(round(problem.min_budget)))
    common = dict(config_space=syne_space(problem), metric="loss", time_attr="epoch", max_t=problem.fidelities,
                  do_minimize=True, random_seed=seed, grace_period=grace, reduction_factor=ETA)
    if name == "syne asha":
        return ASHA(**common)
    if name == "syne hyperband":
        brackets = int(math.floor(math.log(problem.max_budget / problem.min_budget, ETA) + 1e-9)) + 1
        return ASHA(brackets=brackets, **common)
    if name == "syne bohb":
        return BOHB(**common)
    raise ValueError(f"unknown Syne Tune scheduler {name!r}; known: {', '.join(SCHEDULERS)}")


def _timed(scheduler, spent: dict[str, Any]) -> None:
    """Count the scheduler's real seconds: each suggest closes one decision, holding the time
    its callbacks took since the previous one."""
    for method in ("suggest", "on_trial_add", "on_trial_result", "on_trial_complete", "on_trial_remove",
                   "on_trial_error"):
        inner = getattr(scheduler, method)

        def wrapped(*args, _inner=inner, _method=method, **kwargs):
            began = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                spent["pending"] += time.perf_counter() - began
                if _method == "suggest":
                    spent["decisions"].append(spent["pending"])
                    spent["pending"] = 0.0
        setattr(scheduler, method, wrapped)


def run_syne(problem: SimProblem, name: str, workers: int, seed: int, window: float, target: float | None,
             poll: float = DEFAULT_POLL, real_time: bool = False) -> Run:
    """One Syne Tune scheduler in Syne Tune's Tuner over its simulator backend."""
    from syne_tune import StoppingCriterion, Tuner
    from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback
    from syne_tune.blackbox_repository.simulated_tabular_backend import UserBlackboxBackend
    from syne_tune.constants import ST_TUNER_TIME
    from syne_tune.optimizer.scheduler import SchedulerDecision
    from syne_tune.tuner_callback import TunerCallback

    from benchmarks.searchers import typed

    logging.getLogger("syne_tune").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=FutureWarning)     # pandas, about Syne's KDE's sampling
    np.random.seed(seed)        # Syne Tune's bracket choice draws from numpy's global generator
    blackbox = problem_blackbox(problem, seed)

    class Backend(UserBlackboxBackend):
        def _advance_by_outside_time(self):
            if real_time:
                super()._advance_by_outside_time()

    backend = Backend(blackbox=blackbox, elapsed_time_attr="elapsed_time", tuner_sleep_time=poll)
    clock = backend.time_keeper
    delays = backend.simulator_config
    rungs = {int(round(problem.min_budget)) * ETA ** k for k in range(12)} | {problem.fidelities}
    incumbent = Incumbent(problem.exact)
    spent: dict[str, Any] = {"pending": 0.0, "decisions": []}
    held: dict[int, list[float]] = {}          # trial id -> [start, end]
    state = {"reached": None, "out": False}

    class Watch(TunerCallback):
        def on_start_trial(self, trial):
            held[trial.trial_id] = [clock.time() + delays.delay_start, math.inf]

        def on_fetch_status_results(self, trial_status_dict, new_results):
            # Results come trial by trial: the incumbent reads them in the order they happened.
            for trial_id, result in sorted(new_results, key=lambda r: r[1][ST_TUNER_TIME]):
                when = result[ST_TUNER_TIME]
                if when > window:
                    state["out"] = True
                    break
                epoch = int(result["epoch"])
                if epoch in rungs:
                    config = typed(problem, trial_status_dict[trial_id][0].config)
                    incumbent.finished(when, config, float(epoch), float(result["loss"]))
                    if target is not None and incumbent.value <= target + 1e-12:
                        state["reached"] = when
                        raise _Reached()

        def on_trial_result(self, trial, status, result, decision):
            if decision == SchedulerDecision.STOP:
                last = int(result["epoch"]) >= problem.fidelities
                held[trial.trial_id][1] = result[ST_TUNER_TIME] if last else clock.time() + delays.delay_stop

    class Until(StoppingCriterion):
        def __call__(self, status) -> bool:
            return state["out"] or clock.time() >= window

    scheduler = scheduler_for(name, problem, seed)
    _timed(scheduler, spent)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hpo-many-workers-syne-") as folder:
        os.environ["SYNETUNE_FOLDER"] = folder         # the Tuner's own files
        tuner = Tuner(trial_backend=backend, scheduler=scheduler, stop_criterion=Until(), n_workers=workers,
                      sleep_time=0, callbacks=[SimulatorCallback(), Watch()], save_tuner=False,
                      results_update_interval=1e9, print_update_interval=1e9, trial_backend_path=folder,
                      tuner_name="many-workers")
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                tuner.run()
            except _Reached:
                pass
    # Not the clock: stopping the trials left running moves it on by Syne's stop delays.
    end = state["reached"] if state["reached"] is not None else window
    busy = sum(max(0.0, min(stop, end) - start) for start, stop in held.values() if start < end)
    return Run(trace=incumbent.trace, end=end, window=window, utilisation=busy / (workers * end) if end else 1.0,
               decisions=spent["decisions"], trials=len(held), wall=time.perf_counter() - started,
               reached=state["reached"], extra={"poll": poll, "real_time": real_time})


def main() -> None:
    parser = arguments(__doc__.split("\n")[0], " ".join(SCHEDULERS))
    parser.add_argument("--poll", type=float, default=DEFAULT_POLL,
                        help="simulated seconds between the Tuner's looks at its workers")
    parser.add_argument("--real-time", action="store_true",
                        help="add the real seconds spent outside the backend to the simulated clock (Syne's default)")
    args = parser.parse_args()
    problems, searchers, workers, seeds = setting(args)
    if args.poll != DEFAULT_POLL or args.real_time:
        # Another setting is another peer: its runs must not meet the default's in the cache.
        searchers = [f"{s} (poll {args.poll:g}{', real time' if args.real_time else ''})" for s in searchers]

    def run(problem, searcher, w, seed, window, target):
        return run_syne(problem, searcher.split(" (")[0], w, seed, window, target, args.poll, args.real_time)

    runs = collect(problems, searchers, workers, seeds, args, run)
    report(problems, searchers, workers, seeds, runs, args)


if __name__ == "__main__":
    main()
