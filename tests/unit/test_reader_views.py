"""What the readers of a study say: the report's best-so-far curve ends where `hpo best` does
(the study's one ranking, the largest budget reached first), the closing line of several
objectives, and the options that read nothing when combined with one that does."""

import re

import matplotlib
import pytest

import hpo
import hpo.cli
from hpo.cli.report import best_so_far_figure
from hpo.search.multiobjective.objectives import Goals
from hpo.study import Study, ranking

matplotlib.use("Agg")


def test_the_best_so_far_curve_ends_at_hpo_bests_value(tmp_path):
    # Low budgets look better than the top one, so the lowest value is a budget-1 trial's.
    result = hpo.optimize(lambda config, budget: (config["x"] - 1) ** 2 - 1.0 / budget,
                          {"x": {"type": "float", "low": -3.0, "high": 3.0}}, "hyperband", min_budget=1,
                          max_budget=9, eta=3, max_trials=13, seed=0, study_dir=tmp_path / "study")
    study = Study.open(tmp_path / "study", read_only=True)
    try:
        done = [t for t in study.trials() if t.state.finished and t.value is not None]
    finally:
        study.close()
    goals = Goals.build()
    assert min(t.value for t in done) < result.best_value         # the trap: a lower value at budget 1
    figure = best_so_far_figure(done, "objective", goals)
    curve = figure.axes[0].lines[0].get_ydata()
    assert curve[-1] == result.best_value == ranking.best(done, goals).value
    # Drawn over the trials' dots, which shrink and fade once there are thousands of them.
    dots = figure.axes[0].collections[0]
    assert figure.axes[0].lines[0].get_zorder() > dots.get_zorder()
    assert dots.get_sizes()[0] == 14 and dots.get_alpha() == 0.7
    many = best_so_far_figure(done * 400, "objective", goals).axes[0].collections[0]
    assert many.get_sizes()[0] < 5 and many.get_alpha() < 0.3


def closing_line(tmp_path, capsys, objective, constraints):
    from hpo.cli.search_command import _print_summary
    from hpo.driver.runner import SearchSummary

    goals = Goals.build(["error", "params"], constraints)
    hpo.optimize(objective, {"u": {"type": "int", "low": 1, "high": 40}}, "random", min_budget=1, max_budget=1,
                 max_trials=6, objectives=["error", "params"], constraints=constraints,
                 max_consecutive_failures=100, study_dir=tmp_path / "study")
    capsys.readouterr()
    study = Study.open(tmp_path / "study", read_only=True)
    try:
        _print_summary(study, "error", goals, SearchSummary(trials_finished_now=6, stopped_because="max_trials",
                                                            best=None, elapsed_seconds=1.0))
    finally:
        study.close()
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("Pareto front")]


def test_the_closing_line_says_when_no_front_member_is_feasible_or_none_completed(tmp_path, capsys):
    def model(config, budget):
        return {"error": 1 / config["u"], "params": 100 + config["u"]}
    infeasible = closing_line(tmp_path / "a", capsys, model, ["params <= 10"])
    assert len(infeasible) == 1 and infeasible[0].endswith(
        "(infeasible: no trial meets the constraints); `hpo best` lists them")

    def broken(config, budget):
        raise RuntimeError("no model")
    assert closing_line(tmp_path / "b", capsys, broken, None) == [
        "Pareto front (error, params): no trial has completed"]


def test_options_that_would_be_ignored_together_are_refused(tmp_path, capsys):
    from tests.support.cli import hpo_here

    hpo.optimize(lambda config, budget: {"error": 1 / config["u"], "params": config["u"]},
                 {"u": {"type": "int", "low": 1, "high": 40}}, "random", min_budget=1, max_budget=1, max_trials=4,
                 objectives=["error", "params"], study_dir=tmp_path / "study")
    with pytest.raises(SystemExit) as both:           # argparse: one of --trial, --top, --all
        hpo.cli.main(["status", str(tmp_path / "study"), "--trial", "1", "--top", "2"])
    assert both.value.code == 2 and "not allowed with argument --trial" in capsys.readouterr().err
    chosen = hpo_here(capsys, "best", str(tmp_path / "study"), "--trial", "1")
    assert chosen.returncode == 2 and "best --trial 1 chooses the front member to export: add --export" \
        in chosen.stderr
    # A function's study has no model to export: said first, not after choosing a member.
    exported = hpo_here(capsys, "best", str(tmp_path / "study"), "--export", str(tmp_path / "m.keras"))
    assert exported.returncode == 2 and "no Keras model to export" in exported.stderr


def test_a_report_of_a_study_where_nothing_is_feasible_says_so_and_draws_no_hypervolume(tmp_path):
    from hpo.cli.report import _pareto_sections

    hpo.optimize(lambda config, budget: {"error": 1 / config["u"], "params": 100 + config["u"]},
                 {"u": {"type": "int", "low": 1, "high": 40}}, "random", min_budget=1, max_budget=1, max_trials=5,
                 objectives=["error", "params"], constraints=["params <= 10"], study_dir=tmp_path / "study")
    study = Study.open(tmp_path / "study", read_only=True)
    try:
        experiment, trials = study.experiment(), study.trials()
    finally:
        study.close()
    (tmp_path / "report").mkdir()
    sections = _pareto_sections(experiment, trials, tmp_path / "report")
    assert [s.title for s in sections] == ["Pareto front"]
    assert "No trial meets the constraints" in sections[0].note
    assert not (tmp_path / "report" / "hypervolume.png").exists()


def test_status_shows_every_objective_and_feasibility_and_says_what_top_ranks_by(tmp_path, capsys, monkeypatch):
    from hpo.driver.console import stdout
    from tests.support.cli import hpo_here

    monkeypatch.setattr(stdout, "_width", 200)
    hpo.optimize(lambda config, budget: {"error": 1 / config["u"], "params": 100 + config["u"]},
                 {"u": {"type": "int", "low": 1, "high": 40}}, "random", min_budget=1, max_budget=1, max_trials=5,
                 objectives=["error", "params"], constraints=["params <= 120"], seed=0, study_dir=tmp_path / "study")
    study = Study.open(tmp_path / "study", read_only=True)
    try:
        trials = {t.trial_id: t for t in study.trials()}
    finally:
        study.close()
    listed = hpo_here(capsys, "status", tmp_path / "study").stdout
    assert "objectives error (minimize), params (minimize), subject to params <= 120" in listed
    assert "error (min)" in listed and "params (min)" in listed and "feasible" in listed
    for trial_id, t in trials.items():
        params = t.metrics["params"]
        feasible = "yes" if params <= 120 else "no"
        assert re.search(rf"^{trial_id}\s+complete\s+1\s+-\s+-\s+{t.metrics['error']:.6g}\s+{params:.6g}\s+"
                         rf"{feasible}\s+u=", listed, re.MULTILINE), listed
    top = hpo_here(capsys, "status", tmp_path / "study", "--top", "2").stdout
    assert "the 2 best configurations by error, the first objective, feasible first" in top
    # Narrower: bracket and rung make room for configs as short as these.
    monkeypatch.setattr(stdout, "_width", 84)
    narrow = hpo_here(capsys, "status", tmp_path / "study").stdout
    assert "bracket" not in narrow and re.search(r"^\d+\s+complete\s.*\bu=\d+\s*$", narrow, re.MULTILINE), narrow


def test_csv_export_keeps_a_metric_named_as_a_trial_column_apart(tmp_path, capsys):
    """Several objectives named `error` (as the docs' example) wrote over the trial's error text."""
    import csv
    import io

    from tests.support.cli import hpo_here

    hpo.optimize(lambda config, budget: {"error": 0.5, "state": 3.0, "value": 99.0, "objective": config["x"]},
                 {"x": {"type": "float", "low": 0, "high": 1}}, "random", min_budget=1, max_budget=1, max_trials=3,
                 seed=0, study_dir=tmp_path / "study")
    rows = list(csv.DictReader(io.StringIO(hpo_here(capsys, "export", tmp_path / "study", "--format", "csv").stdout)))
    assert len(rows) == 3
    for row in rows:
        assert row["state"] == "complete" and row["error"] == "" and row["value"] == row["metric.objective"]
        assert (row["metric.error"], row["metric.state"], row["metric.value"]) == ("0.5", "3.0", "99.0")


def test_status_of_long_objective_names_on_a_narrow_terminal_keeps_every_word_and_a_missing_value_reads_dash(
        tmp_path, capsys, monkeypatch):
    from hpo.driver.console import stdout
    from tests.support.cli import hpo_here

    def model(config, budget):
        error = float("nan") if config["u"] % 3 == 0 else 1 / config["u"]
        return {"validation_error": error, "parameter_count": 100000 + config["u"], "latency_ms": 3.14 * config["u"]}
    hpo.optimize(model, {"u": {"type": "int", "low": 1, "high": 40}}, "random", min_budget=1, max_budget=1,
                 max_trials=12, objectives=["validation_error", "parameter_count", "latency_ms"],
                 constraints=["parameter_count <= 100020"], seed=0, study_dir=tmp_path / "study")
    monkeypatch.setattr(stdout, "_width", 60)
    listed = hpo_here(capsys, "status", tmp_path / "study")
    assert listed.returncode == 0 and "…" not in listed.stdout
    assert "validation_error (min)   parameter_count (min)   latency_ms (min)   feasible" in listed.stdout
    rows = [line.split() for line in listed.stdout.splitlines() if line[:1].isdigit()]
    assert len(rows) == 12 and any(row[1] == "failed" and row[3] == "-" and row[6] == "-" for row in rows), rows


def test_one_trial_of_a_function_study_speaks_of_its_budget_not_of_epochs_or_tensorboard(tmp_path, capsys):
    from tests.support.cli import hpo_here

    result = hpo.optimize(lambda config, budget: (config["x"] - 1) ** 2 + 1 / budget,
                          {"x": {"type": "float", "low": -5, "high": 5}}, "hyperband", min_budget=1, max_budget=9,
                          max_trials=13, seed=0, study_dir=tmp_path / "study")
    promoted = next(t for t in result.trials if t.continues is not None)
    parent = next(t for t in result.trials if t.trial_id == promoted.continues)
    shown = hpo_here(capsys, "status", tmp_path / "study", "--trial", promoted.trial_id).stdout.splitlines()
    assert shown[0].endswith(f"at budget {promoted.budget:g} ({promoted.budget - parent.budget:g} of it charged here)")
    assert shown[1] == f"  configuration: lineage {promoted.lineage}, continues trial {parent.trial_id}"


def test_the_pareto_table_shows_members_apart_that_six_digits_would_merge(tmp_path, capsys):
    from tests.support.cli import hpo_here

    measured = {0: (1.0, 1000.014), 1: (2.0, 1000.006)}      # both on the front; 1000.01 both at six digits
    hpo.optimize(lambda config, budget: dict(zip(("error", "params"), measured[config["u"]])),
                 {"u": {"type": "choice", "values": [0, 1]}}, "random", min_budget=1, max_budget=1, max_trials=2,
                 objectives=["error", "params"], study_dir=tmp_path / "study")
    shown = hpo_here(capsys, "best", tmp_path / "study").stdout
    assert "1000.014" in shown and "1000.006" in shown, shown
