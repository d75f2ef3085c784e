"""`hpo.optimize`: any objective, any of our searchers, the same study machinery as the CLI.

    import hpo

    def objective(config, budget):          # budget: epochs, trees, a data fraction, ...
        return (config["x"] - 2) ** 2 + 1 / budget

    result = hpo.optimize(objective, {"x": {"type": "float", "low": -5, "high": 10}},
                          searcher="bohb", min_budget=1, max_budget=27, max_trials=100)
    result.best_config, result.best_value

With `study_dir` the search is persisted in a study folder exactly like `hpo search`: run the
same call again and it resumes (finished trials kept, the searcher rebuilt by replay); `hpo
status DIR`, `hpo best DIR` and `hpo export DIR` work on it, and its hpo.log keeps every
message, failed trials' tracebacks included. A call whose space, searcher or budgets differ
from the stored study's is refused; `fresh=True` starts a new study there instead. Ctrl-C
stops the search once the study is safe and raises `KeyboardInterrupt`, as it stops a script.

Several objectives: `objectives=["error", {"name": "params", "direction": "minimize"}]` and
`constraints=["params <= 20000"]`, with an objective returning a dict of named values; the
result's `pareto` holds the Pareto set.

Bad arguments raise `UserInputError` naming the argument of `optimize` (not the YAML key
the CLI would name).
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from hpo.errors import ConfigError, ConfigTypeError, UserInputError
from hpo.objective.simulation import Simulation, SimulationReport, simulated_executor
from hpo.search.multiobjective.objectives import Goals, Objective, suggest
from hpo.space import SearchSpace
from hpo.study import TrialRow
from hpo.study.pareto import ParetoMember, pareto_set
from hpo.termination import interruption, stops_on_sigterm

if TYPE_CHECKING:
    from hpo.driver.completion import CompleteStudy

log = logging.getLogger("hpo.optimize")

DEFAULT_MAX_TRIALS = 100
# The experiment key each argument of `optimize` fills, to name the argument in errors.
ARGUMENT_KEYS = {"search.algorithm": "searcher", "search.min_budget": "min_budget",
                 "search.max_budget": "max_budget", "search.eta": "eta", "search.max_trials": "max_trials",
                 "search.time_limit": "time_limit", "search.total_budget": "total_budget",
                 "search.direction": "direction", "search.objective": "metric",
                 "search.options": "options", "seed": "seed", "execution.workers": "workers",
                 "output.dir": "study_dir", "search.max_consecutive_failures": "max_consecutive_failures",
                 "search.initial_configs": "initial_configs", "search.objectives": "objectives",
                 "search.constraints": "constraints"}


@dataclass(frozen=True)
class OptimizeResult:
    """With several objectives `best_*` are None and `pareto` holds the Pareto set; with one,
    `best_*` describe `hpo best`'s trial (feasible first where there are constraints) and
    `pareto` the best trial(s) at the largest budget reached."""

    best_config: dict[str, Any] | None
    best_value: float | None
    best_budget: float | None
    trials: list[TrialRow]              # every trial, in id order
    stopped_because: str                # 'max_trials', 'time_limit', 'total_budget', 'searcher finished',
    #                                     'max_consecutive_failures'
    study_dir: Path | None              # None when the study lived in a temporary folder
    objectives: tuple[Objective, ...] = ()
    pareto: tuple[ParetoMember, ...] = ()   # the front at the largest budget reached, by trial id
    simulation: SimulationReport | None = None   # with `simulate`: simulated time, utilisation

    def to_rows(self) -> list[dict[str, Any]]:
        """One flat dict per trial (config keys prefixed `config.`), for csv or a DataFrame."""
        rows = []
        for t in self.trials:
            row = {"trial_id": t.trial_id, "state": t.state.value, "budget": t.budget, "value": t.value,
                   "continues": t.continues, "bracket": t.bracket, "rung": t.rung, "error": t.error,
                   "duration_s": t.duration}
            row.update({f"config.{k}": v for k, v in t.config.items()})
            row.update({f"metric.{k}": v for k, v in t.metrics.items()})
            rows.append(row)
        return rows


@stops_on_sigterm
def optimize(objective: Callable[[Mapping[str, Any], float], Any], space: SearchSpace | Mapping[str, Any],
             searcher: str = "bohb", *, min_budget: float, max_budget: float, eta: float = 3,
             max_trials: int | None = None, time_limit: float | None = None, total_budget: float | None = None,
             direction: str | None = None,
             seed: int = 0, study_dir: str | Path | None = None, fresh: bool = False, workers: int = 1,
             metric: str = "objective", options: Mapping[str, Any] | None = None,
             initial_configs: list[Mapping[str, Any]] | None = None, objectives: Sequence[Any] | None = None,
             constraints: Sequence[str] | None = None, simulate: Simulation | None = None,
             max_consecutive_failures: int | None = None) -> OptimizeResult:
    """Minimise (or maximise) `objective(config, budget)` over `space`.

    `objective` returns a float, or a dict of metrics holding `metric`; an exception or a
    non-finite value fails that trial and the search goes on. `searcher`: 'random',
    'hyperband', 'asha', 'async_hyperband', 'bohb', 'async_bohb' or 'freeze_thaw'; `options` are its extra
    keyword arguments. `max_trials` counts jobs asked, promotions included (default 100
    when none of it, `time_limit` in seconds and `total_budget` is given). `total_budget`: the
    budget the whole search spends, a promotion counting what it adds; `hyperband` and `bohb`
    plan their last brackets for it. `workers` > 1 runs calls in a
    thread pool. With `study_dir` the search persists there and a repeated call resumes it;
    `fresh=True` moves a study already there aside (to `<study_dir>.old-<time>`) and starts anew.
    `initial_configs`: known-good configs, run first at the schedule's budgets.

    `objectives`: several values to optimise at once, each a name (direction inferred:
    accuracy-like names are maximised) or {"name", "direction"}; `objective` then returns a
    dict holding them. `constraints`: strings such as "params <= 20000" over the returned
    names; a trial breaking one is infeasible and ranks after every feasible one. The
    result's `pareto` is the Pareto set of the trials at the largest budget reached.

    `max_consecutive_failures`: the search stops after that many failed calls in a row (a
    broken objective; None: `search.max_consecutive_failures`' default), with `stopped_because`
    'max_consecutive_failures' and the trials so far.

    `simulate`: run on `workers` simulated workers, each trial taking the simulated seconds
    the objective returns beside its value (`hpo.objective.simulation`); `time_limit` is then in
    simulated seconds and the result's `simulation` says how busy the workers were.
    """
    # Imported here, not at the top: `import hpo` imports this module, and every CLI command
    # and library user would otherwise pay for the experiment, runner and executor modules.
    from hpo.config import experiment_from_dict
    from hpo.driver.completion import complete_study
    from hpo.driver.runner import SearchAborted, build_runner, searcher_for
    from hpo.executors.function import FunctionExecutor
    from hpo.study.searching import open_for_search

    _check_objective_and_fresh(objective, fresh, study_dir)
    _check_workers_and_simulate(workers, simulate)
    initial_configs = _check_containers(options, initial_configs, study_dir)
    if max_trials is None and time_limit is None and total_budget is None:
        max_trials = DEFAULT_MAX_TRIALS
    goals = _goals(objectives, constraints, metric, direction, options)
    if objectives is not None:
        metric, direction = goals.objectives[0].name, goals.objectives[0].direction
    direction = direction or "minimize"      # one objective: minimised unless told, whatever its name
    space_dict = space.to_dict() if isinstance(space, SearchSpace) else dict(space)
    name = getattr(objective, "__name__", "objective")
    raw = {
        "name": "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or "objective",
        "seed": seed,
        "space": space_dict,
        "search": {"algorithm": searcher, "objective": metric, "direction": direction,
                   "min_budget": min_budget, "max_budget": max_budget, "eta": eta,
                   "max_trials": max_trials, "time_limit": time_limit, "total_budget": total_budget,
                   **({} if max_consecutive_failures is None
                      else {"max_consecutive_failures": max_consecutive_failures}),
                   "options": dict(options or {}),
                   "initial_configs": [dict(c) for c in initial_configs or ()],
                   **(goals.to_dicts() if goals.ranked else {})},
        "execution": {"backend": "inline", "workers": workers},
    }
    try:
        experiment = experiment_from_dict(raw, source="hpo.optimize()", needs_data=False)
    except ConfigError as exc:
        raise _argument_error(exc) from None
    if study_dir is not None:
        from hpo.study.resume import check_study_dir
        try:
            check_study_dir(Path(study_dir), "hpo.optimize()", named_by="study_dir=")
        except ConfigError as exc:
            raise _argument_error(exc) from None
    if study_dir is not None and not fresh:
        _check_resumable(Path(study_dir), experiment)
    try:
        # The searcher, built once as the runner will build it: an option it refuses is
        # reported before any study folder exists (as `hpo search`'s pre-flight does).
        built = searcher_for(experiment)
    except ConfigError as exc:
        raise _argument_error(exc) from None
    if (simulate is not None and total_budget is not None and built.promotes
            and simulate.resumes != built.promotions_continue):
        # Both are the user's to set, and either may be what they mean; the budget and the
        # simulated time then count promotions differently, which they should know.
        if built.promotions_continue:
            log.warning("total_budget counts a promotion by what it adds (the searcher's promotions continue), "
                        "while Simulation(resumes=False) charges it its whole cost; for the two to agree, pass "
                        "simulate=hpo.Simulation(resumes=True), or options={'resumes': False} to bohb and async_bohb")
        else:
            log.warning("total_budget counts a promotion by its whole budget (the searcher's promotions train "
                        "afresh), while Simulation(resumes=True) charges it only what it adds; for the two to "
                        "agree, pass simulate=hpo.Simulation(resumes=False)")
    objective = _checked(objective, goals) if goals.ranked else objective
    executor = FunctionExecutor(objective, metric, workers=workers) if simulate is None else None
    with tempfile.TemporaryDirectory(prefix="hpo-optimize-") as scratch:
        folder = Path(study_dir) if study_dir is not None else Path(scratch) / "study"
        log_file = None          # a study folder of the caller's gets its hpo.log; a scratch one none
        if study_dir is not None:
            from hpo.driver.console import library_log_file
            log_file = library_log_file
        with open_for_search(experiment, folder, fresh=fresh, log_file=log_file) as study:
            runner = None
            try:
                if simulate is not None:
                    executor = simulated_executor(simulate, objective, metric, workers, study)
                runner = build_runner(experiment, study, executor, **_clock_of(executor),
                                      resumable=study_dir is not None)
                summary = runner.run()
            except ConfigError as exc:      # e.g. an option the searcher does not take
                raise _argument_error(exc) from None
            except SearchAborted as exc:    # the result keeps the trials so far (no study_dir: all there is)
                log.warning("%s; the result holds the %d trials so far", exc, len(study.trials()))
                summary = exc.summary
            trials = study.trials()
            complete = complete_study(summary, trials, experiment.search, runner and runner.searcher)
    if study_dir is not None and complete is not None:
        log.warning("%s", _complete_note(study_dir, complete))
    pareto = pareto_set(trials, goals)
    best = None if goals.multi else summary.best      # hpo.study.ranking's: feasible first, as `hpo best`
    result = OptimizeResult(best_config=dict(best.config) if best else None, best_value=best.value if best else None,
                            best_budget=best.budget if best else None, trials=trials,
                            stopped_because=summary.stopped_because,
                            study_dir=Path(study_dir) if study_dir is not None else None,
                            objectives=goals.objectives if objectives is not None else (),
                            pareto=pareto, simulation=executor.report() if simulate is not None else None)
    if summary.stopped_because == "interrupted":
        # The study is safe (and, in a scratch folder, gone): Ctrl-C stops the caller too, as it
        # stops a script or a notebook cell that loops over searches. What ran rides on it.
        if study_dir is not None:
            log.warning("search interrupted: the study in %s is saved; the same call resumes it", study_dir)
        else:
            finished = sum(t.state.value == "complete" for t in trials)
            so_far = (f"; the best so far: {result.best_value:.6g} at budget {result.best_budget:g}, "
                      f"{result.best_config}" if best is not None else "")
            log.warning("search interrupted after %d finished trials, kept in no study (no study_dir)%s; "
                        "the exception's .result holds them, and study_dir= keeps a search to resume",
                        finished, so_far)
        stop = interruption(summary.by_sigterm)
        stop.result = result
        raise stop
    return result


def _complete_note(study_dir, complete: CompleteStudy) -> str:
    """What a call on a study that had already run its search says, as `hpo search` says it."""
    done = f"the study in {study_dir} is complete, so nothing ran: the result is its stored trials"
    if complete.stopped_because == "max_trials":
        return (f"{done} ({max(complete.trials, complete.max_trials or 0)} of max_trials={complete.max_trials}); "
                f"to extend it, pass max_trials={complete.next_max_trials}")
    if complete.stopped_because == "total_budget":
        return (f"{done} (its trials were given {complete.budget_given:g} of total_budget={complete.total_budget:g}); "
                f"to extend it, pass total_budget={complete.next_total_budget:g}")
    return f"{done} (the searcher has no configuration left to try); fresh=True starts a new one beside it"


def _check_objective_and_fresh(objective: Any, fresh: Any, study_dir: Any) -> None:
    """Checked before anything runs: a value that is not callable would otherwise fail every
    trial until the failure limit stops the search, and `fresh` without a study folder would
    be silently meaningless (a search without one always starts anew)."""
    if not callable(objective):
        raise ConfigTypeError(f"expected a function objective(config, budget), got {type(objective).__name__} "
                              f"{objective!r}", source="hpo.optimize(), argument 'objective'")
    if not isinstance(fresh, bool):
        raise ConfigTypeError(f"expected True or False, got {type(fresh).__name__} {fresh!r}",
                              source="hpo.optimize(), argument 'fresh'")
    if fresh and study_dir is None:
        raise ConfigError("fresh=True moves a study in study_dir aside, and no study_dir was given "
                          "(a search without one always starts anew)", source="hpo.optimize(), argument 'fresh'")


def _check_workers_and_simulate(workers: Any, simulate: Any) -> None:
    """`workers` counts threads (or simulated workers), so it is a whole number >= 1 here:
    'auto', which the CLI resolves from the machine's devices, has no meaning for a thread
    pool of a Python function or for simulated workers."""
    if simulate is not None and not isinstance(simulate, Simulation):
        raise ConfigTypeError(f"expected an hpo.Simulation (for example hpo.Simulation(cost='cost')) or None, got "
                              f"{type(simulate).__name__} {simulate!r}", source="hpo.optimize(), argument 'simulate'")
    what = "simulated workers" if simulate is not None else "threads calling the objective"
    if not isinstance(workers, int) or isinstance(workers, bool):
        raise ConfigTypeError(f"expected a whole number >= 1 (the {what}), got {workers!r}",
                              source="hpo.optimize(), argument 'workers'")
    if workers < 1:
        raise ConfigError(f"expected a whole number >= 1 (the {what}), got {workers!r}",
                          source="hpo.optimize(), argument 'workers'")


def _check_containers(options: Any, initial_configs: Any, study_dir: Any) -> list | None:
    """The arguments read as containers or paths before the experiment is built, checked
    first, so that a wrong kind is named rather than failing inside `dict()` or `Path()`;
    returns `initial_configs` as a list (any iterable of dicts will do)."""
    def refuse(argument: str, expected: str, got: Any) -> None:
        raise ConfigTypeError(f"expected {expected}, got {type(got).__name__} {got!r}",
                              source=f"hpo.optimize(), argument {argument!r}")
    if options is not None and not isinstance(options, Mapping):
        refuse("options", "a dict of the searcher's keyword arguments", options)
    if study_dir is not None and not isinstance(study_dir, (str, os.PathLike)):
        refuse("study_dir", "a folder path (str or pathlib.Path)", study_dir)
    if initial_configs is None:
        return None
    expected = "a list of configs, each a dict of the space's parameters"
    if isinstance(initial_configs, (str, bytes, Mapping)) or not isinstance(initial_configs, Iterable):
        refuse("initial_configs", expected, initial_configs)
    configs = list(initial_configs)
    if not all(isinstance(c, Mapping) for c in configs):
        refuse("initial_configs", expected, configs)
    return configs


def _clock_of(executor) -> dict[str, Any]:
    clock = getattr(executor, "clock", None)
    return {"clock": clock} if clock is not None else {}


def _goals(objectives, constraints, metric: str, direction: str | None, options) -> Goals:
    """The objectives and constraints, checked: errors name the argument of `optimize`."""
    if objectives is not None:
        if metric != "objective":
            raise ConfigError("pass either metric (one objective) or objectives, not both",
                              source="hpo.optimize(), argument 'objectives'")
        if direction is not None:     # None, the default, is 'minimize' for one objective
            raise ConfigError("with objectives, give each its direction ({'name': ..., 'direction': ...}) "
                              "instead of the direction argument", source="hpo.optimize(), argument 'direction'")
    taken = sorted({"objectives", "constraints"} & set(options or {}))
    if taken:
        raise ConfigError(f"{taken[0]!r} is an argument of optimize, not a searcher option",
                          source="hpo.optimize(), argument 'options'")
    def refused(exc: Exception, argument: str) -> ConfigError:
        kind = ConfigTypeError if isinstance(exc, TypeError) else ConfigError
        return kind(str(exc), source=f"hpo.optimize(), argument {argument!r}")
    # Built in steps, so that an error names the argument it came from.
    if objectives is None:
        try:
            objectives = [Objective(metric, direction or "minimize")]
        except (TypeError, ValueError) as exc:      # Objective: a bad name is a TypeError, a bad direction not
            raise refused(exc, "metric" if isinstance(exc, TypeError) else "direction") from None
        argument = "metric"
    else:
        argument = "objectives"
    try:
        Goals.build(objectives)
    except (TypeError, ValueError) as exc:
        raise refused(exc, argument) from None
    try:
        return Goals.build(objectives, constraints)
    except (TypeError, ValueError) as exc:
        raise refused(exc, "constraints") from None


def _checked(objective: Callable[[Mapping[str, Any], float], Any], goals: Goals):
    """The objective, failing a trial whose result lacks an objective or a constraint's value
    with a message naming it (and the closest name it did return)."""
    needed = goals.required_names

    def checked(config: Mapping[str, Any], budget: float) -> Any:
        out = objective(config, budget)
        if not isinstance(out, Mapping):
            if goals.multi or any(c.name != goals.names[0] for c in goals.constraints):
                raise TypeError(f"the objective must return a dict holding {', '.join(needed)}, "
                                f"got {type(out).__name__} {out!r}")
            return out
        for name in needed:
            if name not in out:
                raise ValueError(f"the objective returned no {name!r}{suggest(name, map(str, out))}; "
                               f"it returned {', '.join(map(str, out))}")
        return out

    checked.__name__ = getattr(objective, "__name__", "objective")
    return checked


def _argument_error(exc: ConfigError) -> ConfigError:
    """The experiment's error, naming the argument of `optimize` that set the key
    (`hpo.config.validation.python_argument_error`)."""
    from hpo.config.validation import python_argument_error
    return python_argument_error(exc, ARGUMENT_KEYS, "hpo.optimize()")


def _check_resumable(folder: Path, experiment) -> None:
    """Refuse to resume a study run with another space, searcher or budgets, saying what to
    do in this API's terms (the CLI's message names its --fresh flag)."""
    # Imported here for start-up time, as in `optimize`.
    from hpo.study.resume import differences_blocking_resume

    blocking = differences_blocking_resume(folder, experiment)
    if blocking:
        raise UserInputError(
            f"{folder}: the study there was run with different settings, so resuming it would mix "
            f"incomparable trials. Differences (stored -> now):\n  " + "\n  ".join(blocking) +
            "\nPass fresh=True to start a new study there (the old one is moved aside to "
            f"{folder.name}.old-<time>), or another study_dir.")
