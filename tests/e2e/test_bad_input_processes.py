"""Bad input refused by a CLI process of its own: the catalogue's cases marked `process`
(tests/support/bad_inputs.py) as the installed `hpo` console script, in the experiment's
folder, and commands on a terminal 40 columns wide, where a message must not wrap (users grep
and copy these lines whole). The in-process runs of every case: tests/unit and tests/training."""

import pytest

from tests.support.bad_inputs import HOOKS, assert_refused, params, prepare
from tests.support.cli import SMOKE, console_script, hpo, write_experiment
from tests.support.experiments import DIGITS_200


@pytest.mark.parametrize("bad", params(process=True))
def test_the_console_script_refuses_bad_input_with_exit_2(tmp_path, monkeypatch, bad):
    path, args, module = prepare(bad, tmp_path, monkeypatch)
    assert_refused(bad, console_script(*args, cwd=tmp_path), tmp_path, path, module)


@pytest.mark.parametrize("args, fragment", [
    (["search", "no/such.yaml"], "not found"),
    (["search", SMOKE, "--set", "search.algorithm=bohbb"], "did you mean 'bohb'"),
    (["search", SMOKE, "--set", "space.units.low=0"], "low > 0"),
    (["status", "/nonexistent/study"], "no study here"),
])
def test_bad_input_exits_2_without_traceback_on_a_narrow_terminal(args, fragment):
    result = hpo(*args, columns=40)
    assert result.returncode == 2, result.stderr
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr


def test_the_console_script_imports_a_builder_from_the_working_folder(tmp_path):
    """`hpo` as installed: the working folder first, then the experiment's folder."""
    work, experiments = tmp_path / "work", tmp_path / "experiments"
    work.mkdir()
    experiments.mkdir()
    (work / "my_task.py").write_text(HOOKS)
    path = write_experiment(experiments, DIGITS_200 + "model: {builder: 'my_task:quiet_builder'}\n")
    done = console_script("search", path, "--study-dir", tmp_path / "study", cwd=work)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "study" / "study.sqlite").exists()
