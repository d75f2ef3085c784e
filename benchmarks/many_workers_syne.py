"""Syne Tune's schedulers in Syne Tune's own simulator, on `many_workers.py`'s problems.

    nice -n 19 .venv-bench-syne/bin/python benchmarks/many_workers_syne.py --seeds 1 --cache /tmp/many-workers
    nice -n 19 .venv-bench-syne13/bin/python benchmarks/many_workers_syne.py --seeds 1 --cache /tmp/many-workers \
        --searchers "syne hyperband-promotion syne mobster syne hyper-tune syne dyhpo"
    nice -n 19 .venv-bench/bin/python benchmarks/many_workers.py --seeds 1 --cache /tmp/many-workers --cached \
        "syne asha syne hyperband syne bohb syne hyperband-promotion syne mobster syne hyper-tune syne dyhpo"

(the problem, time and seed options the same in all three). Syne Tune 0.16 needs numpy 2 and a
venv of its own (`.venv-bench-syne`); the schedulers it no longer has (pause and resume:
promotion-type Hyperband, MOBSTER, Hyper-Tune, DyHPO; gone from 0.14 on) run on Syne Tune 0.13
(`.venv-bench-syne13`); `benchmarks/setup_bench_env.sh` makes both. The last command reads every
run from the cache and reports them beside hpo's searchers and the other peers. The problems,
their costs, T1, the time windows, the stop at the 1-worker run's final regret, the seeds and
the cache keys are `many_workers.py`'s own (imported).

How Syne Tune runs here: its `Tuner` with `n_workers=W`, over its `UserBlackboxBackend` (the
simulator backend for a `Blackbox` given in code) and its `SimulatorCallback`. The `Blackbox`
(`problem_blackbox`) is the problem's learning curve: the loss and the seconds from scratch at
every integer fidelity (LCBench's epochs 1..52, the surrogate's cumulative `time`; MFHartmann's
z 1..100, z * 2**u seconds). The simulator starts a trial at fidelity 1 and reports every
fidelity at the time its cost says. Charges:
- 0.16's schedulers stop trials (no pause and resume): a trial is charged its cost up to the
  fidelity it was stopped at, epoch by epoch;
- 0.13's pause a trial at a rung and resume it from its checkpoint (the backend's
  `support_checkpointing`): a resumed job is charged time(b) - time(a) from rung a to b, as
  hpo's promotions are.
Syne's own delays stay (0.05 s from a start, a report, a stop). Two settings differ from
Syne's defaults, both so that its figures measure the scheduler and not this machine:
- the Tuner looks at its workers every `--poll` simulated seconds (default 0.5; Syne's default
  is 5, longer than a rung-0 job of LCBench, which would leave workers idle for most of it):
  a worker whose trial ended waits for the next look;
- the backend does not add the real seconds spent outside it (the scheduler, the Tuner's
  bookkeeping) to the simulated clock, as hpo's simulated executor does not (`--real-time`
  keeps Syne's default). The scheduler's real time is reported as the decision time instead.

Schedulers, eta 3:
- 0.16 (grace period round(min_budget), so rungs at 2, 6, 18 epochs on LCBench and 4, 12, 36
  on MFHartmann, where hpo's are 2, 6, 17 and 4, 11, 33):
  - `syne asha`: `ASHA`, stopping type, one bracket, random configurations;
  - `syne hyperband`: `ASHA` with four brackets (asynchronous Hyperband, stopping type);
  - `syne bohb`: `BOHB`, Syne's KDE searcher over asynchronous successive halving (stopping);
- 0.13 (at hpo's rung levels):
  - `syne hyperband-promotion`: `HyperbandScheduler`, promotion type, four brackets, random;
  - `syne mobster`: `MOBSTER`, promotion type, its default multi-task GP;
  - `syne hyper-tune`: `HyperTune`, promotion type, four brackets, its default GPs;
  - `syne dyhpo`: `DyHPO`, at its own linear rungs (every 2 fidelities from the first rung).

What is recorded, as for every run of `many_workers.py`: the incumbent (the best loss observed
at the highest rung level or full fidelity any trial reached; its exact value at the full
fidelity), in simulated time; utilisation (each job holds its worker from its start to its
last report, or to the stop or pause the scheduler sent after its report; a worker whose job
ended is idle until the Tuner's next look); decisions (the scheduler's real seconds in suggest
and its callbacks since the previous suggest, one per job started or resumed).
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

from benchmarks.many_workers import (  # noqa: E402
    ETA,
    Incumbent,
    Run,
    SimProblem,
    arguments,
    collect,
    report,
    setting,
)
from benchmarks.published_problems import fidelity_of  # noqa: E402

# Syne Tune 0.16's multi-fidelity baselines (.venv-bench-syne), all of the stopping type.
SCHEDULERS = ("syne asha", "syne hyperband", "syne bohb")
# Syne Tune 0.13's (.venv-bench-syne13): pause and resume, which 0.14 on no longer has.
SCHEDULERS_013 = ("syne hyperband-promotion", "syne mobster", "syne hyper-tune", "syne dyhpo")
MAX_RESOURCE = "epochs"  # 0.13's promotion: the config key that tells a job where to pause
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


def hpo_rungs(problem: SimProblem) -> list[int]:
    """hpo's rung levels below the full budget, as fidelities (2, 6, 17 on LCBench)."""
    levels = int(math.floor(math.log(problem.max_budget / problem.min_budget, ETA) + 1e-9))
    return [fidelity_of(problem.min_budget * ETA ** k) for k in range(levels)]


def scheduler_for(name: str, problem: SimProblem, seed: int):
    if name in SCHEDULERS_013:
        return scheduler_013(name, problem, seed)
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
    raise ValueError(f"unknown Syne Tune scheduler {name!r}; known: {', '.join(SCHEDULERS + SCHEDULERS_013)}")


def rung_levels(name: str, problem: SimProblem) -> list[int]:
    """The fidelities a scheduler decides at, below the full one."""
    if name in SCHEDULERS:
        grace = max(1, int(round(problem.min_budget)))
        return [grace * ETA ** k for k in range(12) if grace * ETA ** k < problem.fidelities]
    if name == "syne dyhpo":
        return list(range(hpo_rungs(problem)[0], problem.fidelities, 2))
    return hpo_rungs(problem)


def scheduler_013(name: str, problem: SimProblem, seed: int):
    """Syne Tune 0.13's pause-and-resume schedulers, at hpo's own rung levels (DyHPO at its
    linear ones: every 2 fidelities from the first rung), eta 3, Syne's default models."""
    from syne_tune.optimizer.baselines import MOBSTER, DyHPO, HyperTune
    from syne_tune.optimizer.schedulers import HyperbandScheduler
    rungs = rung_levels(name, problem)
    space = dict(syne_space(problem), **{MAX_RESOURCE: problem.fidelities})
    common = dict(metric="loss", resource_attr="epoch", max_resource_attr=MAX_RESOURCE, mode="min",
                  random_seed=seed)
    quiet = {"debug_log": False}
    if name == "syne hyperband-promotion":
        return HyperbandScheduler(space, searcher="random", type="promotion", rung_levels=rungs,
                                  brackets=len(rungs) + 1, search_options=quiet, **common)
    if name == "syne mobster":
        return MOBSTER(space, type="promotion", rung_levels=rungs, search_options=quiet, **common)
    if name == "syne hyper-tune":
        return HyperTune(space, type="promotion", rung_levels=rungs, brackets=len(rungs) + 1,
                         search_options=quiet, **common)
    return DyHPO(space, grace_period=rungs[0], rung_increment=2, search_options=quiet, **common)


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

    resumes = name in SCHEDULERS_013
    backend = Backend(blackbox=blackbox, elapsed_time_attr="elapsed_time", tuner_sleep_time=poll,
                      max_resource_attr=MAX_RESOURCE if resumes else None)
    clock = backend.time_keeper
    delays = backend.simulator_config
    rungs = set(rung_levels(name, problem)) | {problem.fidelities}
    incumbent = Incumbent(problem.exact)
    spent: dict[str, Any] = {"pending": 0.0, "decisions": []}
    # trial id -> its jobs (a start, and a resume for each promotion): [start, end]; an end of
    # None is a job still running
    held: dict[int, list[list[float | None]]] = {}
    state = {"reached": None, "out": False}

    class Watch(TunerCallback):
        def on_start_trial(self, trial):
            held.setdefault(trial.trial_id, []).append([clock.time() + delays.delay_start, None])

        def on_resume_trial(self, trial):
            self.on_start_trial(trial)

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
            if decision in (SchedulerDecision.STOP, SchedulerDecision.PAUSE):
                # A job stopped at its own last fidelity ended with its report; one stopped
                # before it trained on until the stop reached it.
                last = int(result["epoch"]) >= int(trial.config.get(MAX_RESOURCE, problem.fidelities))
                held[trial.trial_id][-1][1] = result[ST_TUNER_TIME] if last else clock.time() + delays.delay_stop

        def on_trial_complete(self, trial, result):
            job = held[trial.trial_id][-1]
            if job[1] is None:
                job[1] = result[ST_TUNER_TIME]

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
    busy = sum(max(0.0, min(end if stop is None else stop, end) - start)
               for jobs in held.values() for start, stop in jobs)
    return Run(trace=incumbent.trace, end=end, window=window, utilisation=busy / (workers * end) if end else 1.0,
               decisions=spent["decisions"], trials=len(held), wall=time.perf_counter() - started,
               reached=state["reached"],
               extra={"poll": poll, "real_time": real_time, "jobs": sum(len(jobs) for jobs in held.values())})


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
