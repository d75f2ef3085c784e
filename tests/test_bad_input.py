"""The bad-input catalogue: every case exits with code 2 and one message that names the
file, the key and what was expected, with no traceback. Run through `hpo.cli.main`, the
same entry point as `python -m hpo` (tests/test_cli_e2e.py covers the subprocess path)."""

import textwrap

import pytest

from hpo.cli import main

BASE = """\
name: t
data: {dataset: digits}
space:
  units: {type: int, low: 8, high: 64}
search: {max_trials: 2, max_budget: 1}
"""


def run_cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out + err


def write(tmp_path, text, name="exp.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


# (label, experiment text or None for BASE, --set overrides, fragments the message must hold)
CASES = [
    ("yaml syntax", "name: t\ndata: dataset: digits\n", [], ["line 2, column 14", "YAML syntax error"]),
    ("unknown key", BASE + "serach: {eta: 3}\n", [], ["line 6", "'serach'", "did you mean 'search'"]),
    ("wrong type", None, ["search.max_trials=many"], ["key 'search.max_trials'", "expected a whole number"]),
    ("low >= high", None, ["space.units.low=64"], ["key 'space.units'", "expected low < high"]),
    ("log with low <= 0", None, ["space.units={type: float, low: 0, high: 1, log: true}"],
     ["key 'space.units.low'", "needs low > 0"]),
    ("empty choice", None, ["space.units={type: choice, values: []}"], ["key 'space.units.values'", "non-empty"]),
    ("when names an unknown parameter", None, ["space.x={type: float, low: 0, high: 1, when: {nope: 1}}"],
     ["key 'space.x.when'", "unknown parameter 'nope'", "expected one of 'units'"]),
    ("unknown algorithm", None, ["search.algorithm=bohbb"],
     ["key 'search.algorithm'", "did you mean 'bohb'", "'random', 'hyperband'"]),
    ("unknown builder", None, ["model.builder=resnet"], ["key 'model.builder'", "'mlp', 'cnn'"]),
    ("unknown dataset", None, ["data.dataset=cifar"], ["key 'data.dataset'", "'mnist', 'digits', 'synthetic'"]),
    ("unknown compile mode", None, ["training.compile=jit"], ["key 'training.compile'", "'auto', 'xla', 'graph'"]),
    ("min_budget > max_budget", None, ["search.min_budget=5"], ["key 'search.min_budget'", "min_budget <= max_budget"]),
    ("eta < 2", None, ["search.eta=1"], ["key 'search.eta'", "eta >= 2"]),
    ("unimportable module", None, ["model.builder=no_such_pkg.models:build"],
     ["key 'model.builder'", "cannot import module 'no_such_pkg.models'"]),
    ("missing function", None, ["data.dataset=hpo.data:no_such_loader"],
     ["key 'data.dataset'", "no function 'no_such_loader'"]),
    ("unknown backend", None, ["execution.backend=ray"], ["key 'execution.backend'", "'inline', 'local', 'dask'"]),
    ("unknown optimizer in the space", None, ["space.optimizer={type: choice, values: [adam, lbfgs]}"],
     ["key 'space.optimizer.values'", "'lbfgs'"]),
]


@pytest.mark.parametrize("label, text, overrides, fragments", CASES, ids=[c[0] for c in CASES])
def test_bad_experiment(tmp_path, capsys, label, text, overrides, fragments):
    path = write(tmp_path, text or BASE)
    args = ["search", path, "--study-dir", str(tmp_path / "study")]
    for override in overrides:
        args += ["--set", override]
    code, output = run_cli(capsys, *args)
    assert code == 2, output
    assert "Traceback" not in output
    assert path in output, f"the message does not name the file: {output}"
    for fragment in fragments:
        assert fragment in output, f"{fragment!r} missing from: {output}"
    assert not (tmp_path / "study" / "study.sqlite").exists()


def test_missing_experiment_file(tmp_path, capsys):
    code, output = run_cli(capsys, "search", str(tmp_path / "nope.yaml"))
    assert code == 2 and "nope.yaml" in output and "not found" in output and "Traceback" not in output


def test_unwritable_output_folder(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    path = write(tmp_path, BASE)
    code, output = run_cli(capsys, "search", path, "--set", f"output.dir={blocker}/study")
    assert code == 2 and "Traceback" not in output
    assert path in output and "key 'output.dir'" in output and "cannot write the study folder" in output


def test_corrupted_study_database_is_refused_and_left_untouched(tmp_path, capsys):
    study = tmp_path / "study"
    study.mkdir()
    garbage = b"this is not SQLite" * 100
    (study / "study.sqlite").write_bytes(garbage)
    code, output = run_cli(capsys, "search", write(tmp_path, BASE), "--study-dir", str(study))
    assert code == 2 and "Traceback" not in output
    assert "study.sqlite" in output and "not a readable study database" in output
    assert (study / "study.sqlite").read_bytes() == garbage


def test_changed_experiment_shows_the_diff(tmp_path, capsys):
    path = write(tmp_path, BASE.replace("max_budget: 1", "max_budget: 1, algorithm: random"))
    study = str(tmp_path / "study")
    assert run_cli(capsys, "search", path, "--study-dir", study, "--set", "search.max_trials=1")[0] == 0
    code, output = run_cli(capsys, "search", path, "--study-dir", study, "--set", "space.units.high=128")
    assert code == 2 and "space.units.high: 64 -> 128" in output and "--fresh" in output
