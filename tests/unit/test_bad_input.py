"""The bad-input catalogue's cases that are refused while the experiment is read and
validated (tests/support/bad_inputs.py), through `hpo.cli.main` in this process with no
TensorFlow imported: exit code 2, one message that names the file, the key and what was
expected, no traceback, nothing on disk. Also the refusals that need no experiment case."""

import pytest

from tests.support.bad_inputs import CASES, CONFIG, assert_refused, params, prepare
from tests.support.cli import hpo_here, write_experiment
from tests.support.experiments import DIGITS_200


@pytest.mark.parametrize("bad", params(CONFIG))
def test_bad_input_is_exit_2_before_any_study_folder(tmp_path, capsys, monkeypatch, bad):
    path, args, module = prepare(bad, tmp_path, monkeypatch)
    assert_refused(bad, hpo_here(capsys, *args), tmp_path, path, module)


def test_the_catalogue_is_long_enough():
    assert len(CASES) >= 40
    assert len({c.label for c in CASES}) == len(CASES)


def test_missing_experiment_file(tmp_path, capsys):
    done = hpo_here(capsys, "search", tmp_path / "nope.yaml")
    output = done.stdout + done.stderr
    assert done.returncode == 2 and "nope.yaml" in output and "not found" in output and "Traceback" not in output


def test_study_dir_dot_is_refused(tmp_path, capsys, monkeypatch):
    write_experiment(tmp_path, DIGITS_200)
    monkeypatch.chdir(tmp_path)
    done = hpo_here(capsys, "search", "exp.yaml", "--study-dir", ".")
    assert done.returncode == 2 and "named study folder" in done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]
