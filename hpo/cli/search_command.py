"""`hpo search`: check, lock, create or resume, run with progress, and summarise."""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from hpo.trial import config_text

if TYPE_CHECKING:
    from hpo.driver.completion import CompleteStudy

log = logging.getLogger("hpo.cli")


def cmd_search(args: argparse.Namespace) -> int:
    from rich.text import Text

    from hpo.config import load_experiment
    from hpo.config.yaml_source import from_override
    from hpo.driver.completion import complete_study
    from hpo.driver.console import console, search_progress, stdout
    from hpo.driver.preflight import preflight
    from hpo.driver.runner import SearchAborted, budget_given, build_keras_runner
    from hpo.errors import ConfigError
    from hpo.executors.worker_trainer import trainer_for_experiment
    from hpo.native_logs import import_tensorflow
    from hpo.study import ranking
    from hpo.study.resume import check_study_dir
    from hpo.study.searching import open_for_search

    # 1. Check everything: nothing exists on disk yet.
    experiment = load_experiment(args.experiment, args.overrides)
    study_dir = Path(args.study_dir) if args.study_dir else experiment.study_dir
    check_study_dir(study_dir, "--study-dir" if args.study_dir else experiment.source)
    import_tensorflow()
    try:
        findings = preflight(experiment)
    except ConfigError as err:
        raise from_override(err, args.experiment, args.overrides) from None
    # 2. The lock, then 3. create, move aside or resume (hpo.study.resume), logging to hpo.log.
    with open_for_search(experiment, study_dir, fresh=args.fresh, log_file=_log_file) as study:
        args.resolved_study_dir = study_dir
        log.info("study %s (%s, %s)", study_dir, experiment.search.algorithm, experiment.source)
        _keep_data_fingerprint(study, findings.data_fingerprint, experiment)
        # Inline, the trainer lives in this process: it trains on the data the pre-flight loaded.
        in_process = experiment.execution.backend == "inline"
        runner = build_keras_runner(experiment, study, output_names=findings.output_names,
                                    make_trainer=functools.partial(trainer_for_experiment, dataset=findings.dataset)
                                    if in_process else None)
        # The bar counts what ends the search: trials, or the epochs search.total_budget limits.
        by_epochs = experiment.search.max_trials is None and experiment.search.total_budget is not None
        total = experiment.search.total_budget if by_epochs else experiment.search.max_trials
        with search_progress("epochs" if by_epochs else "trials") as bar:
            done = (budget_given(study.trials(), runner.searcher) if by_epochs
                    else sum(1 for t in study.trials() if t.state.finished))
            # A study run before with a larger limit holds more than this run's total.
            goals = experiment.search.goals()
            best = None if goals.multi else ranking.best_in(study, goals)
            task = bar.add_task("search", total=max(total, done) if total is not None else None, completed=done,
                                best="-" if best is None or best.value is None else f"{best.value:.4f}")
            runner.on_progress = lambda p: bar.update(
                task, completed=p.budget_given if by_epochs else p.finished,
                best="-" if p.best_value is None else f"{p.best_value:.4f}")
            try:
                summary = runner.run()
            except SearchAborted as exc:
                console.print(Text(str(exc), style="bold red"))
                return 1
        _print_summary(study, experiment.search.objective, experiment.search.goals(), summary)
        complete = complete_study(summary, study.trials(), experiment.search, runner.searcher)
        if complete is not None:
            stdout.print(_complete_note(args, experiment, complete), highlight=False, markup=False)
        stdout.print(f"tensorboard --logdir {study.tensorboard_dir}", highlight=False)
        return 130 if summary.stopped_because == "interrupted" else 0


def _keep_data_fingerprint(study, fingerprint: str | None, experiment) -> None:
    """Record how the loader split its examples when the study starts; on a resume, say so if
    it now splits them otherwise (an unseeded shuffle, changed files): trials then compare
    across different data, and `hpo best --export` refuses to score on a test split the
    search may have trained on."""
    from hpo.data.dataset import same_split

    if fingerprint is None:
        return
    kept = study.data_fingerprint()
    if kept is None:
        study.record_data_fingerprint(fingerprint)
    elif same_split(kept, fingerprint) is False:
        log.warning("the loader %r now splits its examples otherwise than when this study started: its trials "
                    "were trained on other data; a loader must give the same examples on every call (seed its "
                    "shuffles)", experiment.data.dataset)


@contextlib.contextmanager
def _log_file(path: Path) -> Iterator[None]:
    """The study's hpo.log for `hpo search`: every record of the `hpo` loggers goes there too,
    beside the console."""
    from hpo.driver.console import log_to_file

    handler = log_to_file(path)
    try:
        yield
    finally:
        logging.getLogger("hpo").removeHandler(handler)
        handler.close()


def _complete_note(args: argparse.Namespace, experiment, complete: CompleteStudy) -> str:
    """What a rerun of a finished search says, instead of silently doing nothing, in YAML keys."""
    rerun = f"hpo search {args.experiment}" + (f" --study-dir {args.study_dir}" if args.study_dir else "")
    if complete.stopped_because == "max_trials" and complete.max_trials:
        return (f"the study is complete: it has run {max(complete.trials, complete.max_trials)} trials "
                f"(search.max_trials={complete.max_trials}). To extend it, run: {rerun} "
                f"--set search.max_trials={complete.next_max_trials}")
    if complete.stopped_because == "total_budget":
        return (f"the study is complete: its trials have been given {complete.budget_given:g} epochs, "
                f"search.total_budget={complete.total_budget:g}. To extend it, run: {rerun} "
                f"--set search.total_budget={complete.next_total_budget:g}")
    return (f"the study is complete: {experiment.search.algorithm} has no configuration left to try. "
            f"To search again, start a new study: {rerun} --fresh (the old one is kept beside it)")


def _print_summary(study, objective: str, goals, summary) -> None:
    from hpo.cli.tables import top_table
    from hpo.driver.console import stdout
    from hpo.study.ranking import violation
    trials = study.trials()
    counts = {}
    for t in trials:
        counts[t.state.value] = counts.get(t.state.value, 0) + 1
    stdout.print(f"stopped: {summary.stopped_because}; {summary.trials_finished_now} trial(s) finished in "
                 f"{summary.elapsed_seconds:.1f}s; study: " +
                 ", ".join(f"{n} {state}" for state, n in sorted(counts.items())), highlight=False)
    table = top_table(trials, objective, goals, stdout.width)
    if table is not None:
        stdout.print(table)
    if goals.multi:             # several objectives: no one trial is best, the front is the answer
        from hpo.study.pareto import pareto_set
        front = pareto_set(trials, goals)
        names = ", ".join(o.name for o in goals.objectives)
        if not front:
            stdout.print(f"Pareto front ({names}): no trial has completed", highlight=False)
        else:
            # With no feasible trial the front holds the least violating: said, as for one objective.
            infeasible = "" if any(m.feasible for m in front) else " (infeasible: no trial meets the constraints)"
            stdout.print(f"Pareto front ({names}): {len(front)} trial(s), "
                         f"{', '.join(str(m.trial_id) for m in front[:10])}{', ...' if len(front) > 10 else ''}"
                         f"{infeasible}; `hpo best` lists them", highlight=False)
    elif summary.best is not None:
        b = summary.best
        # The runner's best ranks feasible trials first: an infeasible one means none is feasible.
        infeasible = " (infeasible: no trial meets the constraints)" if violation(b, goals) else ""
        stdout.print(f"best: trial {b.trial_id}, {objective}={b.value:.4f} at budget {b.budget:g}{infeasible}, "
                     f"config {config_text(b.config)}", highlight=False)
