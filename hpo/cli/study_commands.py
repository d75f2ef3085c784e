"""The commands that read a study, read-only: `status`, `best` (and `best --export`),
`export` and `report`."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

from hpo.errors import UserInputError
from hpo.trial import TrialState, trial_ids_text

# `hpo status` without --all: a study of more trials shows its newest ones (and those still running).
STATUS_ROWS = 100


# `best --export` without --trial on a front of hundreds lists its first ids, not a screenful.
FRONT_IDS_LISTED = 20


def open_study(study_dir: str):
    """Read-only: inspecting a study can neither create nor change a database."""
    from hpo.study import Study
    return Study.open(Path(study_dir), read_only=True)


def cmd_status(args: argparse.Namespace) -> int:
    from hpo.cli.tables import state_counts, status_table, trial_lines
    from hpo.driver.console import stdout
    from hpo.study.pareto import stored_goals
    from hpo.study.ranking import top_configurations
    study = open_study(args.study_dir)
    experiment = study.experiment()
    search = experiment["search"]
    objective = search["objective"]
    if args.trial is not None:
        trial = study.trial(args.trial)
        if trial is None:
            raise UserInputError(f"{args.study_dir}: there is no trial {args.trial} "
                                 f"(the study has {len(study.trials())})")
        for line in trial_lines(trial, objective, of_function=experiment.get("data") is None):
            stdout.print(line, highlight=False, markup=False)
        return 0
    trials = study.trials()
    goals = stored_goals(experiment)
    aims = ", ".join(f"{o.name} ({o.direction})" for o in goals.objectives)
    title = f"{experiment['name']}: {search['algorithm']}, objective{'s' if goals.multi else ''} {aims}"
    if goals.constraints:
        title += f", subject to {', '.join(map(str, goals.constraints))}"
    if not trials:          # a search stopped before its first ask: no table to fit
        stdout.print(f"{title}\nno trials yet", highlight=False, markup=False)
        return 0
    left_out = []
    if args.top is not None:
        trials = top_configurations(trials, goals, args.top)
        if not trials:      # every trial failed, or none has finished
            stdout.print(f"{title}\nno trial has completed yet, so none ranks", highlight=False, markup=False)
            return 0
        # Several objectives rank by the first (`hpo.study.ranking`); `hpo best` has the front.
        by_first = f" by {goals.objectives[0].name}, the first objective" if goals.multi else ""
        feasible_first = ", feasible first" if goals.constraints else ""
        title += f"; the {len(trials)} best configurations{by_first}{feasible_first}"
    elif not args.all:
        trials, left_out = newest_and_unfinished(trials, STATUS_ROWS)
    table, config_shown = status_table(trials, title, goals, stdout.width)
    stdout.print(table)
    if left_out:     # below the table, where a terminal leaves the eye
        ones = "one is" if len(left_out) == 1 else "ones are"
        stdout.print(f"{len(trials) + len(left_out):,} trials ({state_counts(trials + left_out)}); "
                     f"{len(left_out):,} older finished or interrupted {ones} not shown: --all lists every trial, "
                     f"--top N the N best", highlight=False, markup=False)
    if not config_shown:
        stdout.print(f"configs and errors are too wide for this terminal; one trial's:\n"
                     f"  hpo status {args.study_dir} --trial N", highlight=False, markup=False)
    return 0


def newest_and_unfinished(trials: list, limit: int) -> tuple[list, list]:
    """(shown, left out): the newest `limit` trials and every older one still pending or
    running, in trial order; a search of thousands of trials stays a screen of what is happening."""
    if len(trials) <= limit:
        return trials, []
    cut = len(trials) - limit
    unfinished, left_out = [], []
    for t in trials[:cut]:
        (unfinished if t.state in (TrialState.PENDING, TrialState.RUNNING) else left_out).append(t)
    return unfinished + trials[cut:], left_out


def _dash(value) -> str:
    return "-" if value is None else str(value)


def cmd_best(args: argparse.Namespace) -> int:
    from hpo.driver.console import stdout
    from hpo.study.pareto import stored_goals
    from hpo.study.ranking import best_in, violation
    study = open_study(args.study_dir)
    experiment = study.experiment()
    search = experiment["search"]
    goals = stored_goals(experiment)
    if goals.multi:
        return _best_pareto(args, study, experiment)
    best = best_in(study, goals)
    if args.trial is not None:
        best = _chosen_trial(args, study)
    if best is None:
        raise UserInputError(f"{args.study_dir}: no trial has completed yet")
    record = {"trial_id": best.trial_id, "objective": search["objective"], "direction": search["direction"],
              "value": best.value, "budget": best.budget, "config": best.config, "metrics": best.metrics}
    if goals.constraints:
        record["constraints"] = [str(c) for c in goals.constraints]
        record["feasible"] = violation(best, goals) == 0
    if args.export:
        record["export"] = _export(args, experiment, args.trial)
    if args.json:
        print(json.dumps(record, indent=2, sort_keys=True))
    else:
        infeasible = "" if record.get("feasible", True) else \
            f" (infeasible under {', '.join(record['constraints'])})"
        stdout.print(f"trial {best.trial_id}: {search['objective']}={best.value:.4f} at budget {best.budget:g}"
                     f"{infeasible}", highlight=False)
        for key, value in best.config.items():
            stdout.print(f"  {key}: {value}", highlight=False)
    return 0


def _export(args: argparse.Namespace, experiment: dict, trial_id: int | None) -> dict:
    """`--export`: save the trial's model (the best one when `trial_id` is None), score it on the
    held-out test split, say so unless `--json`, and return the record's `export` entry."""
    from hpo.cli.best_model import export_best_model
    from hpo.driver.console import stdout
    _consent_to_code(args, experiment)
    exported = export_best_model(args.study_dir, args.export, trial_id=trial_id)
    if not args.json:
        scores = ", ".join(f"{name} {value:.4f}" for name, value in
                           [*exported.test_metrics.items(), ("loss", exported.test_loss)])
        which = "" if trial_id is None else f"trial {trial_id} to "
        stdout.print(f"saved {which}{exported.path}; held-out test set ({exported.test_examples} examples, never "
                     f"seen by the search): {scores}", highlight=False)
        if exported.unregistered:
            names = ", ".join(exported.unregistered)
            objects = ", ".join(f"'{name}': {name}" for name in exported.unregistered)
            stdout.print(f"loading it needs your class{'es' if len(exported.unregistered) > 1 else ''} {names}: "
                         f"keras.models.load_model(path, custom_objects={{{objects}}}), or decorate "
                         f"{'them' if len(exported.unregistered) > 1 else 'it'} with "
                         f"@keras.saving.register_keras_serializable()", highlight=False, markup=False)
    record = {"path": str(exported.path), "test_accuracy": exported.test_accuracy, "test_loss": exported.test_loss,
              "test_examples": exported.test_examples, "test_metrics": dict(exported.test_metrics),
              "needs_classes": list(exported.unregistered)}
    return record if trial_id is None else {"trial_id": trial_id, **record}


def _chosen_trial(args: argparse.Namespace, study):
    """`--trial N`: a completed trial of the study (exit 2 otherwise)."""
    if args.export is None:
        raise UserInputError("--trial N chooses the trial --export saves; give --export MODEL.keras too")
    trial = study.trial(args.trial)
    if trial is None or trial.state != TrialState.COMPLETE:
        done = [t.trial_id for t in study.trials() if t.state == TrialState.COMPLETE]
        raise UserInputError(f"{args.study_dir}: trial {args.trial} "
                             f"{'does not exist' if trial is None else 'did not complete'}; "
                             f"completed trials: {trial_ids_text(done) or 'none'}")
    return trial


def _best_pareto(args: argparse.Namespace, study, experiment: dict) -> int:
    """`hpo best` for several objectives: the Pareto front, as a table or JSON; `--export`
    saves the member `--trial` names."""
    from hpo.cli.tables import pareto_table
    from hpo.driver.console import stdout
    from hpo.study.pareto import pareto_record, stored_goals
    goals = stored_goals(experiment)
    trials = study.trials()
    record = pareto_record(trials, goals)
    if not record["pareto"]:
        raise UserInputError(f"{args.study_dir}: no trial has completed yet")
    if args.trial is not None and not args.export:
        raise UserInputError(f"best --trial {args.trial} chooses the front member to export: add --export "
                             f"MODEL.keras (`hpo status {args.study_dir} --trial {args.trial}` shows that trial)")
    if args.export:
        _no_model_to_export(args, experiment)      # before asking for a member that could not be exported
        if args.trial is None:
            ids = [str(m["trial_id"]) for m in record["pareto"]]
            listed = ", ".join(ids[:FRONT_IDS_LISTED]) + (f", ... ({len(ids)} in all: `hpo best "
                                                          f"{args.study_dir}` lists them)"
                                                          if len(ids) > FRONT_IDS_LISTED else "")
            raise UserInputError(f"{args.study_dir}: the study has several objectives, so there is no single best "
                                 f"trial; choose one with --trial N (the Pareto front: trials {listed})")
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


def _no_model_to_export(args: argparse.Namespace, stored: dict) -> None:
    if stored.get("data") is None:
        raise UserInputError(f"{args.study_dir}: this study's trials called a Python function (hpo.optimize), "
                             f"so there is no Keras model to export; `hpo best {args.study_dir}` shows its best config")


def _consent_to_code(args: argparse.Namespace, stored: dict) -> None:
    """Import a stored loader or builder that is not built in only with the user's consent:
    a study folder names code but carries none, and one received from someone else must
    not run code by being opened."""
    from hpo.config import load_experiment, registered_names
    from hpo.references import is_built_in

    _no_model_to_export(args, stored)
    names = registered_names()
    named = {"data.dataset": (stored["data"]["dataset"], names["datasets"]),
             "model.builder": (stored["model"]["builder"], names["builders"])}
    foreign = {key: ref for key, (ref, registry) in named.items() if not is_built_in(ref, registry)}
    # A file named is read whatever the study names: a missing or broken one is the user's
    # mistake to hear about, not to be passed over because the code turned out built in.
    given = load_experiment(args.experiment) if args.experiment else None   # its folder goes on the import path
    if not foreign or args.trust_code:
        return
    listing = ", ".join(f"{key} {ref!r}" for key, ref in foreign.items())
    if given is not None:
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


def export_format(output: str | None) -> str:
    """The format `--output`'s name asks for, where --format is not given: `-o trials.json`
    writing CSV into a .json file would surprise whoever opens it."""
    return "json" if output and output.lower().endswith(".json") else "csv"


def cmd_export(args: argparse.Namespace) -> int:
    from hpo.cli.output_file import checked_output, write_text
    # Checked before the study is read: the file may be none of the study's own.
    output = checked_output(args.study_dir, args.output) if args.output not in (None, "", "-") else None
    study = open_study(args.study_dir)
    rows = export_rows(study)
    if (args.format or export_format(args.output)) == "json":
        text = json.dumps(rows, indent=2, sort_keys=True) + "\n"
    else:
        text = _csv_text(rows)
    if output is not None:
        write_text(output, text)
    else:
        sys.stdout.write(text)
    return 0


def _csv_text(rows: list[dict]) -> str:
    """One line per trial epoch (a trial without epochs still gets one line). The epoch's
    metrics are `metric.<name>` columns, as `hpo.optimize`'s `to_rows()` names them: a
    metric called `error`, `state` or `value` would otherwise write over the trial's own."""
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
                            + [f"metric.{m}" for m in metrics])
    writer.writeheader()
    for r in rows:
        base = {k: r[k] for k in fixed}
        if ranked:
            base.update({f"objective.{n}": v for n, v in r["objectives"].items()})
            base.update({f"measure.{n}": v for n, v in r["measures"].items()})
            base["feasible"] = "" if r["feasible"] is None else r["feasible"]
        base.update({f"config.{p}": r["config"].get(p, "") for p in params})
        for epoch in r["epochs"] or [{}]:
            writer.writerow({**base, **{k if k == "epoch" else f"metric.{k}": v for k, v in epoch.items()}})
    return out.getvalue()


def cmd_report(args: argparse.Namespace) -> int:
    from hpo.cli.report import write_report
    from hpo.driver.console import stdout
    page = write_report(args.study_dir)
    stdout.print(f"wrote {page}", highlight=False)
    return 0
