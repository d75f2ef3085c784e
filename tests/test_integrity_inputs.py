"""Bad inputs that used to slip through (exit 0 with every trial failed, a silent surprise,
exit 1 after the study folder existed, an internal error, a hang) are all exit 2 now:
one message, no traceback, and no study folder. Most run in-process through `hpo.cli.main`;
a representative few run as the installed `hpo` console script."""

import logging
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from hpo.cli import main

ROOT = Path(__file__).resolve().parents[1]

BASE = """\
name: t
data: {dataset: digits, limit: 200}
space:
  units: {type: int, low: 8, high: 32}
search: {algorithm: random, max_trials: 1, max_budget: 1}
"""

HOOKS = """\
import numpy as np
from os import system as reexported_system
from shutil import rmtree

CONSTANT = 3


def good_loader(**_):
    rng = np.random.default_rng(0)
    return rng.random((60, 4)).astype("float32"), np.arange(60) % 3


def mismatched(**_):
    return np.zeros((10, 4), "float32"), np.zeros(9, "int32")


def strings(**_):
    return np.array([["a", "b"]] * 20), np.arange(20) % 2


def nan_inputs(**_):
    x = np.ones((20, 4), "float32")
    x[3, 1] = np.nan
    return x, np.arange(20) % 2


def negative_labels(**_):
    return np.ones((20, 4), "float32"), -np.ones(20, "int32")


def fractional_labels(**_):
    return np.ones((20, 4), "float32"), np.full(20, 0.5)


def one_array(**_):
    return np.ones((20, 4), "float32")


def no_options():
    return np.ones((20, 4), "float32"), np.arange(20) % 2


def not_a_model(config, input_shape, num_classes):
    return {"units": config["units"]}


def raising_builder(config, input_shape, num_classes):
    raise ValueError("this builder cannot build")


def two_outputs(config, input_shape, num_classes):
    import keras
    inputs = keras.Input(shape=input_shape)
    return keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(inputs)))


def quiet_builder(config, input_shape, num_classes):
    import keras
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Dense(int(config["units"]))(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))
"""


def _alias_bomb() -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 9)}]")
    return BASE + "\n".join(lines) + "\n"


# (label, experiment text (None: BASE; bytes allowed), --set overrides, fragments the message must hold)
CASES = [
    # reading the file
    ("duplicate top-level key", BASE + "name: u\n", [], ["duplicate key 'name' at lines 1 and 6"]),
    ("duplicate key inside a parameter", BASE.replace("low: 8,", "low: 8, low: 9,"), [],
     ["duplicate key 'low' at lines 4 and 4", "key 'space.units.low'"]),
    ("duplicate section", BASE + "search: {max_trials: 3}\n", [], ["duplicate key 'search' at lines 5 and 6"]),
    ("recursive alias", BASE + "extra: &loop [1, *loop]\n", [], ["recursive alias", "line 6"]),
    ("alias bomb", _alias_bomb(), [], ["expands to more than 100,000 values"]),
    ("not UTF-8", BASE.encode() + b"# caf\xe9\n", [], ["not UTF-8", f"byte offset {len(BASE) + 5}", "line 6"]),
    ("deeply nested list", BASE + "extra: " + "[" * 3000 + "]" * 3000 + "\n", [], ["nested too deeply"]),
    ("deeply nested mapping", BASE + "extra: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", [],
     ["nested too deeply"]),
    ("duplicate key in a --set value", None, ["space.units={type: int, low: 8, low: 9, high: 32}"],
     ["duplicate key 'low'", "--set"]),
    # numbers
    ("NaN low", None, ["space.units={type: float, low: .nan, high: 1}"], ["key 'space.units.low'", "finite"]),
    ("infinite high", None, ["space.units={type: float, low: 0, high: .inf}"], ["key 'space.units.high'", "finite"]),
    ("minus infinity", None, ["space.units={type: float, low: -.inf, high: 1}"], ["finite"]),
    ("NaN eta", None, ["search.eta=.nan"], ["key 'search.eta'", "finite"]),
    ("NaN min_budget", None, ["search.min_budget=.nan"], ["key 'search.min_budget'", "finite"]),
    ("infinite max_budget", None, ["search.max_budget=.inf"], ["key 'search.max_budget'", "finite"]),
    ("overflowing number", None, ["search.max_budget=1e999"], ["key 'search.max_budget'", "finite"]),
    ("NaN learning rate", None, ["training.learning_rate=.nan"], ["key 'training.learning_rate'", "finite"]),
    ("infinite time limit", None, ["search.time_limit=.inf"], ["key 'search.time_limit'", "finite"]),
    ("NaN in loader options", None, ["data.options={scale: .nan}"], ["key 'data.options.scale'", "finite"]),
    ("splits sum to 1", None, ["data.validation_split=0.5", "data.test_split=0.5"],
     ["key 'data.test_split'", "validation_split + test_split < 1"]),
    ("splits sum past 1", None, ["data.validation_split=0.6", "data.test_split=0.7"], ["< 1"]),
    # seeds and choices
    ("negative seed", None, ["seed=-1"], ["key 'seed'", ">= 0"]),
    ("fractional seed", None, ["seed=1.5"], ["key 'seed'", "whole number"]),
    ("choice values equal once typed", None, ["space.units={type: choice, values: [1, 1.0, true]}"],
     ["key 'space.units.values'", "equal once typed"]),
    ("repeated choice", None, ["space.units={type: choice, values: [8, 16, 8]}"], ["duplicates"]),
    # names
    ("name .", None, ["name=."], ["key 'name'", "not '.' or '..'"]),
    ("name ..", None, ["name=.."], ["key 'name'"]),
    ("name with a separator", None, ["name=a/b"], ["key 'name'"]),
    ("empty name", None, ["name=''"], ["key 'name'"]),
    ("output.dir .", None, ["output.dir=."], ["key 'output.dir'", "named study folder"]),
    # hooks
    ("stdlib loader", None, ["data.dataset=os:system", "data.options={command: 'touch {marker}'}"],
     ["key 'data.dataset'", "standard library"]),
    ("builtins builder", None, ["model.builder=builtins:print"], ["key 'model.builder'", "standard library"]),
    ("stdlib function as builder", None, ["model.builder=subprocess:run"], ["standard library"]),
    ("not a function", None, ["data.dataset={mod}:CONSTANT"], ["is a int, not a Python function or class"]),
    ("re-exported builtin", None, ["data.dataset={mod}:reexported_system"], ["not a Python function or class"]),
    ("re-exported stdlib function", None, ["data.dataset={mod}:rmtree"], ["shutil.rmtree", "standard library"]),
    # the pre-flight: devices, objective, loader, builder, space keys
    ("no such device", None, ["training.device=gpu"], ["key 'training.device'", "not available"]),
    ("objective the trainer does not report", None, ["search.objective=val_auc"],
     ["key 'search.objective'", "val_accuracy"]),
    ("loader lengths differ", None, ["data.dataset={mod}:mismatched"], ["'{mod}:mismatched'", "one label per input"]),
    ("non-numeric inputs", None, ["data.dataset={mod}:strings"], ["non-numeric inputs"]),
    ("NaN inputs", None, ["data.dataset={mod}:nan_inputs"], ["1 NaN or infinite input value(s)", "example 3"]),
    ("negative labels", None, ["data.dataset={mod}:negative_labels"], ["class index"]),
    ("fractional labels", None, ["data.dataset={mod}:fractional_labels"], ["class index"]),
    ("loader returns one array", None, ["data.dataset={mod}:one_array"], ["expected (x, y)"]),
    ("loader refuses its options", None, ["data.dataset={mod}:no_options", "data.options={n: 3}"],
     ["does not accept data.options"]),
    ("builder returns no model", None, ["data.dataset={mod}:good_loader", "model.builder={mod}:not_a_model"],
     ["key 'model.builder'", "returned dict; expected a keras.Model"]),
    ("builder raises", None, ["data.dataset={mod}:good_loader", "model.builder={mod}:raising_builder"],
     ["failed on the low end of the space", "this builder cannot build"]),
    ("too few outputs for the labels", None, ["model.builder={mod}:two_outputs"],
     ["gives 2 outputs, but the labels run 0..9"]),
    ("space key the built-in model never reads", None, ["space.learning_rat={type: float, low: 0.001, high: 0.1}"],
     ["key 'space.learning_rat'", "never reads 'learning_rat'", "did you mean 'learning_rate'"]),
    ("space key with a typo", None, ["space.unit={type: int, low: 8, high: 16}"], ["did you mean 'units'"]),
]
SUBPROCESS = {"not UTF-8", "alias bomb", "stdlib loader", "no such device", "builder returns no model"}


@pytest.fixture
def hooks(tmp_path, monkeypatch):
    """A module of hooks beside the experiment, under a name no other test imported."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    name = f"hooks_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(HOOKS)
    return name


def _fill(text: str, tmp_path: Path, module: str) -> str:
    return text.replace("{mod}", module).replace("{marker}", str(tmp_path / "marker"))


def _args(tmp_path, text, overrides, module):
    path = tmp_path / "exp.yaml"
    text = BASE if text is None else text
    path.write_bytes(text if isinstance(text, bytes) else textwrap.dedent(text).encode())
    args = ["search", str(path), "--study-dir", str(tmp_path / "study")]
    for override in overrides:
        args += ["--set", _fill(override, tmp_path, module)]
    return args


def _check(tmp_path, code, output, fragments, module):
    assert code == 2, output
    assert "Traceback" not in output
    assert str(tmp_path / "exp.yaml") in output or "--set" in output, f"names no file: {output}"
    for fragment in fragments:
        fragment = _fill(fragment, tmp_path, module)
        assert fragment in output, f"{fragment!r} missing from: {output}"
    assert not (tmp_path / "study").exists()
    assert not (tmp_path / "marker").exists(), "a shell command ran"


@pytest.mark.parametrize("label, text, overrides, fragments", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_exit_2_before_any_study_folder(tmp_path, capsys, hooks, label, text, overrides, fragments):
    args = _args(tmp_path, text, overrides, hooks)
    if label in SUBPROCESS:
        # The installed console script (not `python -m`): the working folder is the experiment's.
        proc = subprocess.run(["hpo", *args], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        code, output = proc.returncode, proc.stdout + proc.stderr
    else:
        code = main(args)
        output = "".join(capsys.readouterr())
    _check(tmp_path, code, output, fragments, hooks)


def test_the_catalogue_is_long_enough():
    assert len(CASES) >= 40


def test_study_dir_dot_is_refused(tmp_path, capsys, monkeypatch):
    (tmp_path / "exp.yaml").write_text(BASE)
    monkeypatch.chdir(tmp_path)
    code = main(["search", "exp.yaml", "--study-dir", "."])
    output = "".join(capsys.readouterr())
    assert code == 2 and "named study folder" in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]


def test_a_user_builder_that_never_reads_a_space_key_gets_a_warning(tmp_path, hooks):
    from hpo.config import load_experiment
    from hpo.preflight import preflight

    path = tmp_path / "exp.yaml"
    path.write_text(BASE.replace("space:\n", "space:\n  depth: {type: int, low: 1, high: 3}\n")
                    + f"model: {{builder: '{hooks}:quiet_builder'}}\n")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("hpo.preflight")
    logger.addHandler(handler)
    try:
        preflight(load_experiment(path))
    finally:
        logger.removeHandler(handler)
    assert any("never read the space key(s) depth" in r.getMessage() for r in records)


def test_the_console_script_imports_a_builder_from_the_working_folder(tmp_path):
    """`hpo` as installed: the working folder first, then the experiment's folder."""
    work, experiments = tmp_path / "work", tmp_path / "experiments"
    work.mkdir()
    experiments.mkdir()
    (work / "my_task.py").write_text(HOOKS)
    (experiments / "exp.yaml").write_text(BASE + "model: {builder: 'my_task:quiet_builder'}\n")
    proc = subprocess.run(["hpo", "search", str(experiments / "exp.yaml"), "--study-dir", str(tmp_path / "study")],
                          capture_output=True, text=True, cwd=work, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "study" / "study.sqlite").exists()


def test_after_an_exit_2_the_corrected_file_runs_without_fresh(tmp_path, capsys):
    path = tmp_path / "exp.yaml"
    path.write_text(BASE.replace("max_budget: 1}", "max_budget: 1, objective: val_auc}"))
    study = tmp_path / "study"
    assert main(["search", str(path), "--study-dir", str(study)]) == 2
    path.write_text(BASE)
    assert main(["search", str(path), "--study-dir", str(study)]) == 0, "".join(capsys.readouterr())
