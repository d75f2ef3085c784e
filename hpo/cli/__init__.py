"""`python -m hpo ...`: search, status, best, export, report, tensorboard.

Exit codes: 0 success, 2 bad input (one paragraph, no traceback), 130 interrupted,
1 anything else (the traceback goes to the study's hpo.log, or to a file the message names).

`search` checks everything first (the experiment, then the pre-flight in hpo.preflight),
then takes the study's lock, and only then creates, moves or changes anything. The other
commands open the study read-only and never import code the study names unless the
user allows it (`best --export` with `--trust-code` or `--experiment FILE`).

Each command imports what it uses inside its own function: `hpo status` or `hpo --help`
should not pay for TensorFlow, rich's console or the runner at start-up.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Sequence

from hpo.errors import UserInputError
from hpo.trial import config_text

log = logging.getLogger("hpo.cli")


STUDY_DIR_HELP = "study folder, as written by `hpo search` (it holds study.sqlite)"


def _version() -> str:
    from hpo import __version__
    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hpo", description="Hyperparameter optimisation for Keras.")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="debug-level messages, and TensorFlow's own start-up log lines")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    search = commands.add_parser("search", help="run or resume a study")
    search.add_argument("experiment", help="experiment YAML file")
    search.add_argument("--study-dir", help="study folder (default: output.dir, else runs/<name>)")
    search.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="override one experiment key, e.g. --set search.max_trials=10")
    search.add_argument("--fresh", action="store_true",
                        help="start a new study even if one exists (the old one is moved aside)")

    status = commands.add_parser("status", help="table of a study's trials")
    status.add_argument("study_dir", help=STUDY_DIR_HELP)
    status.add_argument("--trial", type=int, metavar="N", help="one trial in full: config, metrics, error")
    status.add_argument("--top", type=int, metavar="N",
                        help="only the N best configurations, each at its deepest budget, ranked as `hpo best` ranks")

    best = commands.add_parser("best", help="the best trial's config and objective")
    best.add_argument("study_dir", help=STUDY_DIR_HELP)
    best.add_argument("--json", action="store_true", help="machine-readable output")
    best.add_argument("--export", metavar="MODEL.keras",
                      help="save the best trial's model there and score it on the held-out test split")
    best.add_argument("--trust-code", action="store_true",
                      help="allow --export to import the loader and builder the study names (a study "
                           "folder names code but carries none: trust it only if you trust its author)")
    best.add_argument("--experiment", metavar="FILE",
                      help="the experiment file that names the study's loader and builder: --export "
                           "imports them from its folder")
    best.add_argument("--trial", type=int, metavar="N",
                      help="with --export: export trial N (e.g. a member of the Pareto front) instead of the best")

    report = commands.add_parser("report", help="write report.html with plots of the search")
    report.add_argument("study_dir", help=STUDY_DIR_HELP)

    export = commands.add_parser("export", help="every trial and epoch, as csv or json")
    export.add_argument("study_dir", help=STUDY_DIR_HELP)
    export.add_argument("--format", choices=("csv", "json"), default="csv",
                        help="csv: one line per trial epoch, config keys as config.NAME columns; "
                             "json: one record per trial holding its epochs (default: csv)")
    export.add_argument("--output", "-o", help="file to write (default: standard output)")

    board = commands.add_parser("tensorboard", help="start TensorBoard on a study's logs")
    board.add_argument("study_dir", help=STUDY_DIR_HELP)
    board.add_argument("extra", nargs=argparse.REMAINDER, help="further tensorboard arguments")
    return parser


def _stop_on_sigterm() -> None:
    """`kill` (SIGTERM, what schedulers and container runtimes send) stops a search the way
    Ctrl-C does: running trials are marked interrupted and rerun on resume."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, interrupt)
    except ValueError:      # not the main thread (main() called from a library thread)
        pass


def _print_error(message: str) -> None:
    """Errors are printed unwrapped and unstyled inside, so paths and quoted keys stay intact
    (rich would otherwise wrap at the terminal width and read '[...]' in messages as markup)."""
    from rich.text import Text

    from hpo.console import console
    console.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)


def main(argv: Sequence[str] | None = None) -> int:
    from hpo.console import console, setup_logging
    from hpo.native_logs import cli_native_logs
    from hpo.references import add_search_path

    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    _stop_on_sigterm()
    add_search_path()   # the working folder, as `python -m hpo` has it, for the installed script too
    try:
        with cli_native_logs(args.verbose):
            return COMMANDS[args.command](args)
    except UserInputError as err:
        _print_error(str(err))
        return 2
    except KeyboardInterrupt:
        console.print("interrupted")
        return 130
    except Exception as exc:
        where = _write_traceback(args)
        _print_error(f"{type(exc).__name__}: {exc}")
        console.print(f"the full traceback is in {where} (or rerun with -v)", highlight=False, soft_wrap=True)
        if args.verbose:
            console.print_exception()
        return 1


def _write_traceback(args: argparse.Namespace) -> Path:
    """Append the traceback to the study's hpo.log, or, with no study folder, to a file of its own."""
    from hpo.study import DB_NAME
    folder = getattr(args, "resolved_study_dir", None) or getattr(args, "study_dir", None)
    if folder and (Path(folder) / DB_NAME).exists():
        target = Path(folder) / "hpo.log"
    else:
        target = Path(tempfile.gettempdir()) / f"hpo-error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    text = (f"{time.strftime('%Y-%m-%d %H:%M:%S')} ERROR hpo.cli: `hpo {args.command}` failed\n"
            f"{traceback.format_exc()}")
    try:
        with open(target, "a") as handle:
            handle.write(text)
    except OSError:
        target = Path(tempfile.mkstemp(prefix="hpo-error-", suffix=".log")[1])
        target.write_text(text)
    return target


# --- search ---------------------------------------------------------------------------------

def cmd_search(args: argparse.Namespace) -> int:
    from hpo.config import load_experiment
    from hpo.console import console, log_to_file, search_progress, stdout
    from hpo.native_logs import import_tensorflow
    from hpo.preflight import preflight
    from hpo.runner import SearchAborted, build_keras_runner
    from hpo.study.resume import check_study_dir, prepare_study

    # 1. Check everything: nothing exists on disk yet.
    experiment = load_experiment(args.experiment, args.overrides)
    study_dir = Path(args.study_dir) if args.study_dir else experiment.study_dir
    check_study_dir(study_dir, "--study-dir" if args.study_dir else experiment.source)
    import_tensorflow()
    findings = preflight(experiment)
    # 2. The lock, then 3. create, move aside or resume (hpo.study.resume).
    study = prepare_study(experiment, study_dir, fresh=args.fresh)
    args.resolved_study_dir = study_dir
    handler = log_to_file(study.log_path)
    try:
        log.info("study %s (%s, %s)", study_dir, experiment.search.algorithm, experiment.source)
        runner = build_keras_runner(experiment, study, output_names=findings.output_names)
        total = experiment.search.max_trials
        with search_progress() as bar:
            done = sum(1 for t in study.trials() if t.state.finished)
            task = bar.add_task("search", total=total, completed=done, best="-")
            runner.on_progress = lambda p: bar.update(
                task, completed=p.finished, best="-" if p.best_value is None else f"{p.best_value:.4f}")
            try:
                summary = runner.run()
            except SearchAborted as exc:
                console.print(f"[bold red]{exc}[/]")
                return 1
        _print_summary(study, experiment.search.objective, experiment.search.direction, summary)
        if summary.trials_finished_now == 0 and summary.stopped_because in ("max_trials", "searcher finished"):
            stdout.print(_complete_note(args, experiment, summary.stopped_because), highlight=False, markup=False)
        stdout.print(f"tensorboard --logdir {study.tensorboard_dir}", highlight=False)
        return 130 if summary.stopped_because == "interrupted" else 0
    finally:
        study.release_driver_lock()
        study.close()
        logging.getLogger("hpo").removeHandler(handler)
        handler.close()


def _complete_note(args: argparse.Namespace, experiment, stopped_because: str) -> str:
    """What a rerun of a finished search says, instead of silently doing nothing."""
    rerun = f"hpo search {args.experiment}" + (f" --study-dir {args.study_dir}" if args.study_dir else "")
    limit = experiment.search.max_trials
    if stopped_because == "max_trials" and limit:
        return (f"the study is complete: it has run search.max_trials={limit} trials. To extend it, "
                f"run: {rerun} --set search.max_trials={2 * limit}")
    return (f"the study is complete: {experiment.search.algorithm} has no configuration left to try. "
            f"To search again, start a new study: {rerun} --fresh (the old one is kept beside it)")


def _print_summary(study, objective: str, direction: str, summary) -> None:
    from hpo.cli.tables import top_table
    from hpo.console import stdout
    trials = study.trials()
    counts = {}
    for t in trials:
        counts[t.state.value] = counts.get(t.state.value, 0) + 1
    stdout.print(f"stopped: {summary.stopped_because}; {summary.trials_finished_now} trial(s) finished in "
                 f"{summary.wall_seconds:.1f}s; study: " +
                 ", ".join(f"{n} {state}" for state, n in sorted(counts.items())), highlight=False)
    table = top_table(trials, objective, direction, stdout.width)
    if table is not None:
        stdout.print(table)
    if summary.best is not None:
        b = summary.best
        stdout.print(f"best: trial {b.trial_id}, {objective}={b.value:.4f} at budget {b.budget:g}, "
                     f"config {config_text(b.config)}", highlight=False)


# --- inspection -------------------------------------------------------------------------------

def _open(study_dir: str):
    """Read-only: inspecting a study can neither create nor change a database."""
    from hpo.study import Study
    return Study.open(Path(study_dir), read_only=True)


def cmd_status(args: argparse.Namespace) -> int:
    from hpo.cli.tables import status_table, top_configurations, trial_lines
    from hpo.console import stdout
    study = _open(args.study_dir)
    experiment = study.experiment()
    search = experiment["search"]
    objective = search["objective"]
    if args.trial is not None:
        trial = study.trial(args.trial)
        if trial is None:
            raise UserInputError(f"{args.study_dir}: there is no trial {args.trial} "
                                 f"(the study has {len(study.trials())})")
        for line in trial_lines(trial, objective):
            stdout.print(line, highlight=False, markup=False)
        return 0
    trials = study.trials()
    title = f"{experiment['name']}: {search['algorithm']}, objective {objective} ({search['direction']})"
    if args.top is not None:
        trials = top_configurations(trials, search["direction"], args.top)
        title += f"; the {len(trials)} best configurations"
    table, config_shown = status_table(trials, title, objective, stdout.width)
    stdout.print(table)
    if not config_shown:
        stdout.print(f"configs and errors are too wide for this terminal; one trial's:\n"
                     f"  hpo status {args.study_dir} --trial N", highlight=False, markup=False)
    return 0


def _dash(value) -> str:
    return "-" if value is None else str(value)


def cmd_best(args: argparse.Namespace) -> int:
    from hpo.console import stdout
    study = _open(args.study_dir)
    experiment = study.experiment()
    search = experiment["search"]
    from hpo.study.pareto import is_ranked, stored_goals
    if is_ranked(experiment) and stored_goals(experiment).multi:
        return _best_pareto(args, study, experiment)
    best = study.best(search["direction"])
    if args.trial is not None:
        best = _chosen_trial(args, study)
    if best is None:
        raise UserInputError(f"{args.study_dir}: no trial has completed yet")
    record = {"trial_id": best.trial_id, "objective": search["objective"], "direction": search["direction"],
              "value": best.value, "budget": best.budget, "config": best.config, "metrics": best.metrics}
    if args.export:
        record["export"] = _export(args, experiment, args.trial)
    if args.json:
        print(json.dumps(record, indent=2, sort_keys=True))
    else:
        stdout.print(f"trial {best.trial_id}: {search['objective']}={best.value:.4f} at budget {best.budget:g}",
                     highlight=False)
        for key, value in best.config.items():
            stdout.print(f"  {key}: {value}", highlight=False)
    return 0


def _export(args: argparse.Namespace, experiment: dict, trial_id: int | None) -> dict:
    """`--export`: save the trial's model (the best one when `trial_id` is None), score it on the
    held-out test split, say so unless `--json`, and return the record's `export` entry."""
    from hpo.cli.best_model import export_best_model
    from hpo.console import stdout
    _consent_to_code(args, experiment)
    exported = export_best_model(args.study_dir, args.export, trial_id=trial_id)
    if not args.json:
        scores = ", ".join(f"{name} {value:.4f}" for name, value in
                           [*exported.test_metrics.items(), ("loss", exported.test_loss)])
        which = "" if trial_id is None else f"trial {trial_id} to "
        stdout.print(f"saved {which}{exported.path}; held-out test set ({exported.test_examples} examples, never "
                     f"seen by the search): {scores}", highlight=False)
    record = {"path": str(exported.path), "test_accuracy": exported.test_accuracy, "test_loss": exported.test_loss,
              "test_examples": exported.test_examples, "test_metrics": dict(exported.test_metrics)}
    return record if trial_id is None else {"trial_id": trial_id, **record}


def _chosen_trial(args: argparse.Namespace, study):
    """`--trial N`: a completed trial of the study (exit 2 otherwise)."""
    from hpo.trial import TrialState
    if args.export is None:
        raise UserInputError("--trial N chooses the trial --export saves; give --export MODEL.keras too")
    trial = study.trial(args.trial)
    if trial is None or trial.state != TrialState.COMPLETE:
        done = [t.trial_id for t in study.trials() if t.state == TrialState.COMPLETE]
        raise UserInputError(f"{args.study_dir}: trial {args.trial} "
                             f"{'does not exist' if trial is None else 'did not complete'}; "
                             f"completed trials: {', '.join(map(str, done)) or 'none'}")
    return trial


def _best_pareto(args: argparse.Namespace, study, experiment: dict) -> int:
    """`hpo best` for several objectives: the Pareto front, as a table or JSON; `--export`
    saves the member `--trial` names."""
    from hpo.cli.tables import pareto_table
    from hpo.console import stdout
    from hpo.study.pareto import pareto_record, stored_goals
    goals = stored_goals(experiment)
    trials = study.trials()
    record = pareto_record(trials, goals)
    if not record["pareto"]:
        raise UserInputError(f"{args.study_dir}: no trial has completed yet")
    if args.export:
        if args.trial is None:
            ids = ", ".join(str(m["trial_id"]) for m in record["pareto"])
            raise UserInputError(f"{args.study_dir}: the study has several objectives, so there is no single best "
                                 f"trial; choose one with --trial N (the Pareto front: trials {ids})")
        record["export"] = _export(args, experiment, _chosen_trial(args, study).trial_id)
    if args.json:
        print(json.dumps(record, indent=2, sort_keys=True))
        return 0
    names = ", ".join(f"{o.name} ({o.direction})" for o in goals.objectives)
    title = f"Pareto front: {len(record['pareto'])} trial(s), objectives {names}"
    if goals.constraints:
        title += f", constraints {', '.join(map(str, goals.constraints))}"
    table, config_shown = pareto_table(trials, goals, title, stdout.width)
    stdout.print(table)
    if not config_shown:
        stdout.print(f"configs are too wide for this terminal; one trial's:\n  hpo status {args.study_dir} --trial N",
                     highlight=False, markup=False)
    return 0


def _consent_to_code(args: argparse.Namespace, stored: dict) -> None:
    """Import a stored loader or builder that is not built in only with the user's consent:
    a study folder names code but carries none, and one received from someone else must
    not run code by being opened."""
    from hpo.config import load_experiment, registered_names
    from hpo.references import is_built_in

    if stored.get("data") is None:
        raise UserInputError(f"{args.study_dir}: this study's trials called a Python function (hpo.optimize), "
                             f"so there is no Keras model to export; `hpo best {args.study_dir}` shows its best config")
    names = registered_names()
    named = {"data.dataset": (stored["data"]["dataset"], names["datasets"]),
             "model.builder": (stored["model"]["builder"], names["builders"])}
    foreign = {key: ref for key, (ref, registry) in named.items() if not is_built_in(ref, registry)}
    if not foreign or args.trust_code:
        return
    listing = ", ".join(f"{key} {ref!r}" for key, ref in foreign.items())
    if args.experiment:
        given = load_experiment(args.experiment)   # its folder goes on the import path
        names = {"data.dataset": given.data.dataset, "model.builder": given.model.builder}
        mismatched = [f"{key} is {ref!r} in the study but {names[key]!r} there"
                      for key, ref in foreign.items() if names[key] != ref]
        if mismatched:
            raise UserInputError(f"{args.experiment}: does not name the code the study names ("
                                 + "; ".join(mismatched) + "); give the experiment file the study was run with")
        return
    raise UserInputError(f"{args.study_dir}: exporting would import and run code that the study names but does "
                         f"not carry: {listing}. A study folder does not vouch for code. To allow it, give the "
                         f"experiment file that names it (--experiment FILE), or pass --trust-code if you trust "
                         f"the study's author.")


def export_rows(study) -> list[dict]:
    """One record per trial, with its per-epoch metrics; a study with several objectives or
    constraints adds each trial's `objectives` {name: value}, `measures` and `feasible`."""
    by_trial: dict[int, list] = {}
    for trial_id, epoch, metrics in study.epochs():
        by_trial.setdefault(trial_id, []).append({"epoch": epoch, **metrics})
    from hpo.study.pareto import is_ranked, measures, stored_goals, trial_goals
    experiment = study.experiment()
    goals = stored_goals(experiment) if is_ranked(experiment) else None
    rows = []
    for t in study.trials():
        row = {"trial_id": t.trial_id, "lineage": t.lineage, "state": t.state.value, "budget": t.budget,
               "bracket": t.bracket, "rung": t.rung, "continues": t.continues, "value": t.value,
               "error": t.error, "epochs_trained": t.epochs_trained, "attempts": t.attempts,
               "duration_s": t.duration, "config": t.config, "epochs": by_trial.get(t.trial_id, [])}
        if goals is not None:
            row["objectives"], row["feasible"] = trial_goals(t, goals)
            row["measures"] = measures(t)
        rows.append(row)
    return rows


def cmd_export(args: argparse.Namespace) -> int:
    study = _open(args.study_dir)
    rows = export_rows(study)
    if args.format == "json":
        text = json.dumps(rows, indent=2, sort_keys=True) + "\n"
    else:
        text = _csv_text(rows)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _csv_text(rows: list[dict]) -> str:
    """One line per trial epoch (a trial without epochs still gets one line)."""
    params = sorted({k for r in rows for k in r["config"]})
    metrics = sorted({k for r in rows for e in r["epochs"] for k in e if k != "epoch"})
    fixed = ["trial_id", "lineage", "state", "budget", "bracket", "rung", "continues", "value", "error",
             "epochs_trained", "attempts", "duration_s"]
    # Several objectives or constraints: each trial's objectives, measures and feasibility.
    ranked = bool(rows) and "objectives" in rows[0]
    goal_columns = []
    if ranked:
        names = list(dict.fromkeys(k for r in rows for k in r["objectives"]))
        kept = list(dict.fromkeys(k for r in rows for k in r["measures"]))
        goal_columns = [f"objective.{n}" for n in names] + [f"measure.{n}" for n in kept] + ["feasible"]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fixed + goal_columns + [f"config.{p}" for p in params] + ["epoch"]
                            + metrics)
    writer.writeheader()
    for r in rows:
        base = {k: r[k] for k in fixed}
        if ranked:
            base.update({f"objective.{n}": v for n, v in r["objectives"].items()})
            base.update({f"measure.{n}": v for n, v in r["measures"].items()})
            base["feasible"] = "" if r["feasible"] is None else r["feasible"]
        base.update({f"config.{p}": r["config"].get(p, "") for p in params})
        for epoch in r["epochs"] or [{}]:
            writer.writerow({**base, **epoch})
    return out.getvalue()


def cmd_report(args: argparse.Namespace) -> int:
    from hpo.cli.report import write_report
    from hpo.console import stdout
    page = write_report(args.study_dir)
    stdout.print(f"wrote {page}", highlight=False)
    return 0


VIEW_REFRESH_SECONDS = 5


def cmd_tensorboard(args: argparse.Namespace) -> int:
    from hpo.cli.tensorboard_view import link_new_files, logdir_to_show
    study = _open(args.study_dir)
    own = study.tensorboard_dir
    # A dead driver's running trials show as interrupted through a view built here, outside
    # the study (which stays read-only); it lives as long as TensorBoard runs, and takes in
    # the runs of a search resumed meanwhile.
    with tempfile.TemporaryDirectory(prefix="hpo-tensorboard-") as scratch:
        try:
            logdir = logdir_to_show(study, Path(scratch))
        finally:
            study.close()
        command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), *args.extra]
        log.info("running: %s", " ".join(command))
        if logdir == own:
            return subprocess.call(command)
        with subprocess.Popen(command) as board:
            while True:
                try:
                    return board.wait(timeout=VIEW_REFRESH_SECONDS)
                except subprocess.TimeoutExpired:
                    link_new_files(own, logdir)


COMMANDS = {"search": cmd_search, "status": cmd_status, "best": cmd_best, "export": cmd_export,
            "report": cmd_report, "tensorboard": cmd_tensorboard}
