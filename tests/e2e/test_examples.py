"""Every script in examples/ runs, with small budgets, and does what it says. Python scripts
run as a user runs them, in a process of their own, except the Keras Tuner script, whose
main() runs here; experiment files go through the CLI's entry point in the test process (the
CLI's own process start is tested in test_cli_e2e.py).
examples/multi_io.yaml is searched and exported in test_multi_io.py."""

import json
import re
import runpy
import subprocess
import sys

from hpo.study import Study
from tests.support.cli import ROOT, cli_env, hpo_here


def run_example(*args, timeout=300):
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=cli_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_plain_function_both_ways_agree_and_stay_off_tensorflow():
    out = run_example("-c", "import sys, runpy; runpy.run_path('examples/plain_function.py', run_name='__main__');"
                            "print('tensorflow' in sys.modules)")
    values = [float(v) for v in re.findall(r"best (\d+\.\d+)", out)]
    assert len(values) == 2 and values[0] == values[1]        # the same searcher, the same seed
    assert values[0] < 5.0                                       # Branin spans 0.4 to ~300 here
    assert out.strip().endswith("False")


def test_sklearn_forest_with_trees_as_the_budget(tmp_path):
    # 12 trials: BOHB's opening climbers at 9 and 27 trees (their 81- and 243-tree forests,
    # the slow part, come after).
    out = run_example("examples/sklearn_forest.py", "--max-trials", "12", "--study-dir", str(tmp_path / "s"))
    accuracy = float(re.search(r"best cross-validated accuracy (\d\.\d+)", out).group(1))
    assert accuracy > 0.8
    trials = Study.open(tmp_path / "s").trials()
    assert len(trials) == 12 and {t.budget for t in trials} == {9.0, 27.0}


def test_custom_functional_keras_model_through_the_cli(tmp_path, capsys):
    done = hpo_here(capsys, "search", ROOT / "examples/custom_keras_model.yaml", "--study-dir", tmp_path / "s",
                    "--set", "search.max_trials=5", "--set", "search.max_budget=3")
    assert done.returncode == 0, done.stderr[-3000:]
    trials = Study.open(tmp_path / "s").trials()
    assert len(trials) == 5 and all(t.state.value == "complete" for t in trials)
    assert max(t.value for t in trials) > 0.5


def test_keras_tuner_script_switched_to_bohb(tmp_path, capsys):
    # The script's main() in the test process: a Keras Tuner script is a library user, whose
    # process start is the plain Python one (the tuner's own worker processes are tested in
    # tests/tuner/test_workers.py); this spares a process's TensorFlow and Keras Tuner imports.
    runpy.run_path(str(ROOT / "examples/keras_tuner_bohb.py"))["main"](3, str(tmp_path))
    out = capsys.readouterr().out
    assert "'tuner/epochs': 3" in out
    # Chance is 0.1. Three epochs of 44 steps reach 0.80-0.90 depending on the draw: the bar leaves room for
    # thread-order noise in CPU kernels, which a seed does not remove.
    assert float(re.search(r"validation accuracy (\d\.\d+)", out).group(1)) > 0.7


def test_regression_ranked_by_validation_mae(tmp_path, capsys):
    done = hpo_here(capsys, "search", ROOT / "examples/regression.yaml", "--study-dir", tmp_path / "s",
                    "--set", "search.max_trials=4", "--set", "search.max_budget=9")
    assert done.returncode == 0, done.stderr[-3000:]
    study = Study.open(tmp_path / "s", read_only=True)
    assert study.experiment()["search"]["direction"] == "minimize"
    trials = study.trials()
    assert len(trials) == 4 and all(t.state.value == "complete" for t in trials)
    # Standardised targets: predicting the mean scores a validation MAE near 0.8; a linear fit reaches ~0.6.
    assert min(t.value for t in trials) < 0.75


def test_tfdata_example_streams_its_splits_through_the_cli(tmp_path, capsys):
    """examples/tfdata.yaml through the CLI entry point (in-process): the generator-backed
    tf.data splits train, and `best --export` scores the streamed test split."""
    from hpo.cli import main

    study = tmp_path / "s"
    code = main(["search", "examples/tfdata.yaml", "--study-dir", str(study), "--set", "search.max_trials=3",
                 "--set", "search.max_budget=3", "--set", "search.min_budget=3"])
    output = "".join(capsys.readouterr())
    assert code == 0, output[-3000:]
    trials = Study.open(study, read_only=True).trials()
    assert len(trials) == 3 and all(t.state.value == "complete" for t in trials)
    assert max(t.value for t in trials) > 0.5              # ten classes: chance is 0.1
    code = main(["best", str(study), "--export", str(tmp_path / "best.keras"), "--json", "--trust-code"])
    out, err = capsys.readouterr()
    assert code == 0, err[-3000:]
    export = json.loads(out)["export"]
    assert export["test_examples"] == 181 and export["test_accuracy"] > 0.5
