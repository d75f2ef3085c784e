"""The views of a study of thousands of trials: `hpo status` shows the newest ones and those
still running, with a line saying what was left out (`--all` lists every trial); `hpo report`
fits its importance on a sample and keeps its bracket diagram a readable height. The limits
are patched down here, so that a study of STATUS_ROWS + 30 trials crosses them."""

import dataclasses
import re

import pytest

import hpo
from hpo.cli.study_commands import STATUS_ROWS, newest_and_unfinished
from hpo.cli.tables import state_counts
from hpo.study import Study
from hpo.trial import TrialState
from tests.support.cli import hpo_here

TRIALS = STATUS_ROWS + 30


@pytest.fixture(scope="module")
def long_study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("long") / "study"
    hpo.optimize(lambda config, budget: (config["x"] - 1.0) ** 2, {"x": {"type": "float", "low": -5, "high": 5}},
                 "random", min_budget=1, max_budget=1, max_trials=TRIALS, seed=0, study_dir=folder)
    return folder


def listed_ids(output: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"^(\d+)\s+(?:complete|failed|running|pending|interrupted)",
                                                 output, re.MULTILINE)]


def test_status_shows_the_newest_trials_and_says_how_many_it_left_out(long_study, capsys):
    done = hpo_here(capsys, "status", long_study)
    assert done.returncode == 0
    assert listed_ids(done.stdout) == list(range(TRIALS - STATUS_ROWS, TRIALS))
    assert (f"{TRIALS} trials ({TRIALS} complete); {TRIALS - STATUS_ROWS} older finished or interrupted ones are "
            f"not shown: --all lists every trial, --top N the N best") in done.stdout


def test_status_all_lists_every_trial_and_top_is_unchanged(long_study, capsys):
    every = hpo_here(capsys, "status", long_study, "--all")
    assert listed_ids(every.stdout) == list(range(TRIALS)) and "not shown" not in every.stdout
    top = hpo_here(capsys, "status", long_study, "--top", "3")
    assert len(listed_ids(top.stdout)) == 3 and "not shown" not in top.stdout
    with pytest.raises(SystemExit) as refused:           # argparse's exit 2: the two ask for different rows
        hpo_here(capsys, "status", long_study, "--top", "3", "--all")
    assert refused.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    for rows in ("0", "-1", "three"):                     # a count of rows is at least one
        with pytest.raises(SystemExit) as refused:
            hpo_here(capsys, "status", long_study, "--top", rows)
        assert refused.value.code == 2 and "argument --top: expected a whole number >= 1" in capsys.readouterr().err


def test_a_narrow_terminal_loses_the_bracket_and_rung_columns_not_digits(long_study, capsys, monkeypatch):
    from hpo.driver.console import stdout
    study = Study.open(long_study, read_only=True)
    values = {t.trial_id: t.value for t in study.trials()}
    study.close()
    for columns, narrow in (("44", True), ("120", False)):
        monkeypatch.setattr(stdout, "_width", int(columns))     # as COLUMNS sets it when the console starts
        done = hpo_here(capsys, "status", long_study, "--top", "3")
        table = [line for line in done.stdout.splitlines() if re.match(r"(\d+|trial|─)", line)]
        assert done.returncode == 0 and len(table) == 5 and all(len(line) <= int(columns) for line in table)
        assert "…" not in done.stdout and ("bracket" not in done.stdout) == narrow
        shown = re.findall(r"^(\d+)\s+complete\s+1\s+(?:-\s+-\s+)?(\d+\.\d{4})\b", done.stdout, re.MULTILINE)
        assert len(shown) == 3 and all(f"{values[int(i)]:.4f}" == v for i, v in shown)


def test_one_trial_left_out_is_said_in_the_singular(long_study, capsys, monkeypatch):
    import hpo.cli.study_commands as commands
    monkeypatch.setattr(commands, "STATUS_ROWS", TRIALS - 1)
    done = hpo_here(capsys, "status", long_study)
    assert "1 older finished or interrupted one is not shown" in done.stdout


def test_an_older_trial_still_running_stays_in_view_and_the_counts_name_every_state(long_study):
    study = Study.open(long_study, read_only=True)
    rows = study.trials()
    study.close()
    rows[3] = dataclasses.replace(rows[3], state=TrialState.RUNNING, value=None)
    rows[5] = dataclasses.replace(rows[5], state=TrialState.INTERRUPTED, value=None)
    rows[7] = dataclasses.replace(rows[7], state=TrialState.FAILED, value=None)
    shown, left_out = newest_and_unfinished(rows, STATUS_ROWS)
    assert [t.trial_id for t in shown] == [3] + list(range(TRIALS - STATUS_ROWS, TRIALS))
    assert len(shown) + len(left_out) == TRIALS and 5 in {t.trial_id for t in left_out}
    assert state_counts(rows) == f"1 running, {TRIALS - 3} complete, 1 failed, 1 interrupted"
    assert newest_and_unfinished(rows[:STATUS_ROWS], STATUS_ROWS) == (rows[:STATUS_ROWS], [])


def test_a_report_past_its_limits_samples_the_importance_and_caps_the_diagram(long_study, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    from hpo.cli import report
    from hpo.space import SearchSpace

    monkeypatch.setattr(report, "IMPORTANCE_MAX_CONFIGURATIONS", 50)
    monkeypatch.setattr(report, "BRACKETS_MAX_HEIGHT", 6)
    study = Study.open(long_study, read_only=True)
    trials, space = study.trials(), SearchSpace.from_dict(study.experiment()["space"])
    study.close()
    importance = report.parameter_importance(trials, space, "minimize")
    assert list(importance) == ["x"] and importance["x"] == pytest.approx(1.0)
    title = report.importance_figure(importance, TRIALS).axes[0].get_title()
    assert title == f"fitted on 50 of {TRIALS} configurations"
    diagram = report.brackets_figure(trials)
    assert diagram.get_figheight() == 6
    lines, = diagram.axes[0].collections[:1]
    assert len(lines.get_segments()) == TRIALS            # one line per configuration, in one artist
    page = report.write_report(long_study)
    assert page.exists() and (page.parent / "brackets.png").exists()
    # The best-so-far curve says why it may rise (a first trial at a larger budget).
    assert "the best at the largest budget any trial had reached" in page.read_text()


def test_a_missing_trial_lists_the_completed_ones_as_ranges(long_study, capsys, tmp_path):
    done = hpo_here(capsys, "best", long_study, "--trial", str(TRIALS + 5), "--export", tmp_path / "m.keras")
    assert done.returncode == 2
    assert f"trial {TRIALS + 5} does not exist; completed trials: 0-{TRIALS - 1}" in done.stderr


def test_a_report_of_config_values_the_font_lacks_says_nothing_of_missing_glyphs(tmp_path, capsys):
    import warnings
    space = {"model": {"type": "choice", "values": ["模型", "rocket 🚀"]},
             "x": {"type": "float", "low": 0.0, "high": 1.0}}
    hpo.optimize(lambda config, budget: config["x"], space, "random", min_budget=1, max_budget=1, max_trials=6,
                 study_dir=tmp_path / "s", seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert hpo_here(capsys, "report", tmp_path / "s").returncode == 0
    assert not [w for w in caught if "missing from font" in str(w.message)]
    assert (tmp_path / "s" / "report" / "report.html").exists()


def test_bracketed_and_colon_text_in_configs_and_errors_prints_as_written(tmp_path, capsys):
    # Rich reads "[bold]" as a style and ":fire:" as an emoji; a config value or an error is
    # the user's text, shown as written in every command that prints it.
    space = {"tag": {"type": "choice", "values": ["[bold]", ":fire:"]}, "x": {"type": "float", "low": 0, "high": 1}}

    def objective(config, budget):
        if config["x"] > 0.8:
            raise ValueError("bad [red]input[/red] :fire:")
        return config["x"]
    hpo.optimize(objective, space, "random", min_budget=1, max_budget=1, max_trials=12, study_dir=tmp_path / "s",
                 seed=1)
    study = Study.open(tmp_path / "s", read_only=True)
    trials = study.trials()
    study.close()
    assert {t.config["tag"] for t in trials} == {"[bold]", ":fire:"} and any(t.error for t in trials)
    status = hpo_here(capsys, "status", tmp_path / "s", "--all").stdout
    assert "tag=[bold]" in status and "tag=:fire:" in status
    assert "ValueError: bad [red]input[/red] :fire:" in status
    best = hpo_here(capsys, "best", tmp_path / "s").stdout
    assert re.search(r"tag: (\[bold\]|:fire:)$", best, re.MULTILINE), best
    failed = next(t for t in trials if t.error)
    one = hpo_here(capsys, "status", tmp_path / "s", "--trial", str(failed.trial_id)).stdout
    assert "bad [red]input[/red] :fire:" in one


def test_a_log_line_wider_than_the_terminal_keeps_its_path_whole(capsys, monkeypatch):
    import logging

    from hpo.driver.console import console, setup_logging
    setup_logging()
    monkeypatch.setattr(console, "_width", 60)
    path = "/tmp/some/very/long/path/with/several/levels/study_folder_name_here"
    capsys.readouterr()
    logging.getLogger("hpo.test").warning("resumed the study in %s and went on", path)
    err = capsys.readouterr().err
    assert f"WARNING  resumed the study in {path} and went on" in err, err     # one line: the terminal wraps it
    logging.getLogger("hpo.test").warning("two lines:\n%s", "second")     # rich's own layout
    err = capsys.readouterr().err
    assert "WARNING" in err and "two lines:" in err and "second" in err, err


def test_a_retried_trial_still_running_shows_its_config_not_its_last_attempts_error(long_study):
    """A trial retried after its worker died keeps the first attempt's error until it ends;
    while it runs again, its row shows its config, and `--trial N` names the error as its
    previous attempt's. A failed trial's row shows its error."""
    import io

    from rich.console import Console

    from hpo.cli.tables import status_table, trial_lines
    from hpo.study.pareto import stored_goals
    study = Study.open(long_study, read_only=True)
    experiment, (first, second) = study.experiment(), study.trials()[:2]
    study.close()
    lost = "WorkerLost: the worker training it died"
    running = dataclasses.replace(first, state=TrialState.RUNNING, attempts=2, error=lost, value=None)
    failed = dataclasses.replace(second, state=TrialState.FAILED, error="ValueError: loss is NaN", value=None)
    table, _ = status_table([running, failed], "t", stored_goals(experiment), 200)
    screen = Console(width=200, file=io.StringIO())
    screen.print(table)
    rows = screen.file.getvalue()
    running_row = next(line for line in rows.splitlines() if "running (2x)" in line)
    assert "WorkerLost" not in rows.split("ValueError")[0] and "x=" in running_row, rows
    assert "ValueError: loss is NaN" in rows
    lines = trial_lines(running, "loss", of_function=True)
    assert lines[lines.index("  error of its previous attempt:") + 1] == f"    {lost}"
    assert "  error:" in trial_lines(failed, "loss", of_function=True)
