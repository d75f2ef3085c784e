"""The bad-input catalogue: every input the CLI must refuse with exit code 2, one message
that names the file (or the --set option), the key and what was expected, no traceback, and
nothing written to disk: no study folder, and no command run by a hook.

One table, run three ways:
- tests/unit/test_bad_input.py: the cases refused while the experiment is read and
  validated, through `hpo.cli.main` in the test process, with no TensorFlow imported;
- tests/training/test_bad_input.py: the cases the pre-flight refuses (it loads the data and
  builds the model, so TensorFlow), in the test process too;
- tests/e2e/test_bad_input_processes.py: the cases marked `process`, as the installed `hpo`
  console script in a process of its own, one at least for each stage.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cli import search_args, write_experiment
from tests.support.experiments import DATA_TASK, DIGITS, DIGITS_200, ENGINES_BINARY, MULTI_OBJECTIVE, REGRESSION

# Read and validated: refused before TensorFlow is imported.
CONFIG = "config"
# The pre-flight: refused once the data is loaded and the model built, before the study exists.
PREFLIGHT = "preflight"


@dataclass(frozen=True)
class BadInput:
    label: str
    stage: str                          # CONFIG or PREFLIGHT
    overrides: tuple[str, ...] = ()     # --set KEY=VALUE, after {mod} and {marker} are filled
    fragments: tuple[str, ...] = ()     # all must be in the message
    text: str | bytes = DIGITS_200      # the experiment file
    names_file: bool = True             # the message names the experiment file (else the --set option)
    process: bool = False               # also run as the installed console script (tests/e2e)


def case(label, stage, overrides=(), fragments=(), text=DIGITS_200, **kw) -> BadInput:
    return BadInput(label, stage, tuple(overrides), tuple(fragments), text, **kw)


# A module of hooks written beside the experiment (see `hooks_module`): loaders, builders and
# names that are not what the experiment says they are.
HOOKS = """\
import numpy as np
from os import system as reexported_system
from shutil import rmtree

CONSTANT = 3


def good_loader(**_):
    rng = np.random.default_rng(0)
    return rng.random((100, 4)).astype("float32"), np.arange(100) % 3     # a batch of 64 fits its training split


def dict_targets(**_):
    x, y = good_loader()
    return x, {"out": y}


def mismatched(**_):
    return np.zeros((10, 4), "float32"), np.zeros(9, "int32")


def no_labels(**_):
    return np.zeros((10, 4), "float32"), None


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


def raising_loader(**_):
    raise FileNotFoundError("no such file: 'train.csv'")


def no_options():
    return np.ones((20, 4), "float32"), np.arange(20) % 2


def with_weights(**_):
    x, y = good_loader()
    return x, y, np.where(y > 0, 5.0, 1.0)       # Keras's (x, y, sample_weight)


def no_features(**_):
    return np.zeros((100, 0), "float32"), np.arange(100) % 3      # a .csv read with the wrong delimiter


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


def named_layer_builder(config, input_shape, num_classes):
    import keras
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Dense(int(config["units"]), activation=config["activation"])(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))


def wrapped_targets(form):
    x = np.random.default_rng(0).normal(size=(60, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    return x, {"out": y} if form == "dict" else (y,)


def one_named_output(config, input_shape, num_classes):
    import keras
    inputs = keras.Input(input_shape)
    return keras.Model(inputs, {"out": keras.layers.Dense(2, name="out")(inputs)})


def subclassed_builder(config, input_shape, num_classes):
    import keras

    class TwoLayers(keras.Model):       # no build(), no get_config(): its weights come on its first call
        def __init__(self, units):
            super().__init__()
            self.flatten = keras.layers.Flatten()
            self.hidden = keras.layers.Dense(units, activation="relu")
            self.logits = keras.layers.Dense(num_classes)

        def call(self, x, training):     # required, as some subclassed models write it
            return self.logits(self.hidden(self.flatten(x)))
    return TwoLayers(int(config["units"]))
"""


def _alias_bomb() -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 9)}]")
    return DIGITS_200 + "\n".join(lines) + "\n"


MULTI_IO = (Path(__file__).resolve().parents[2] / "examples" / "multi_io.yaml").read_text()

CASES = [
    # --- the file: YAML, keys, types (on DIGITS) -------------------------------------------------
    case("yaml syntax", CONFIG, [], ["line 2, column 14", "YAML syntax error"],
         text="name: t\ndata: dataset: digits\n"),
    case("unknown key", CONFIG, [], ["line 6", "'serach'", "did you mean 'search'"],
         text=DIGITS + "serach: {eta: 3}\n"),
    case("wrong type", CONFIG, ["search.max_trials=many"], ["key 'search.max_trials'", "expected a whole number"],
         text=DIGITS),
    case("low >= high", CONFIG, ["space.units.low=64"], ["key 'space.units'", "expected low < high"], text=DIGITS),
    case("log with low <= 0", CONFIG, ["space.units={type: float, low: 0, high: 1, log: true}"],
         ["key 'space.units.low'", "needs low > 0"], text=DIGITS),
    case("empty choice", CONFIG, ["space.units={type: choice, values: []}"],
         ["key 'space.units.values'", "non-empty"], text=DIGITS),
    case("when names an unknown parameter", CONFIG, ["space.x={type: float, low: 0, high: 1, when: {nope: 1}}"],
         ["key 'space.x.when'", "unknown parameter 'nope'", "expected one of 'units'"], text=DIGITS),
    case("unknown algorithm", CONFIG, ["search.algorithm=bohbb"],
         ["key 'search.algorithm'", "did you mean 'bohb'", "'random', 'hyperband'"], text=DIGITS),
    case("unknown builder", CONFIG, ["model.builder=resnet"], ["key 'model.builder'", "'mlp', 'cnn'"], text=DIGITS),
    case("unknown dataset", CONFIG, ["data.dataset=cifar"], ["key 'data.dataset'", "'mnist', 'digits', 'synthetic'"],
         text=DIGITS),
    case("unknown compile mode", CONFIG, ["training.compile=jit"], ["key 'training.compile'", "'auto', 'xla', 'graph'"],
         text=DIGITS),
    case("min_budget > max_budget", CONFIG, ["search.min_budget=5"],
         ["key 'search.min_budget'", "min_budget <= max_budget"], text=DIGITS),
    case("eta < 2", CONFIG, ["search.eta=1"], ["key 'search.eta'", "eta >= 2"], text=DIGITS),
    case("unimportable module", CONFIG, ["model.builder=no_such_pkg.models:build"],
         ["key 'model.builder'", "cannot import module 'no_such_pkg.models'"], text=DIGITS),
    case("missing function", CONFIG, ["data.dataset=hpo.data:no_such_loader"],
         ["key 'data.dataset'", "no function 'no_such_loader'"], text=DIGITS),
    case("unknown backend", CONFIG, ["execution.backend=ray"], ["key 'execution.backend'", "'inline', 'local', 'dask'"],
         text=DIGITS),
    case("unknown optimizer in the space", CONFIG, ["space.optimizer={type: choice, values: [adam, lbfgs]}"],
         ["key 'space.optimizer.values'", "'lbfgs'"], text=DIGITS),
    # --- reading the file safely (on DIGITS_200) ----------------------------------------------------
    case("duplicate top-level key", CONFIG, [], ["duplicate key 'name' at lines 1 and 6"],
         text=DIGITS_200 + "name: u\n"),
    case("duplicate key inside a parameter", CONFIG, [],
         ["duplicate key 'low' at lines 4 and 4", "key 'space.units.low'"],
         text=DIGITS_200.replace("low: 8,", "low: 8, low: 9,")),
    case("duplicate section", CONFIG, [], ["duplicate key 'search' at lines 5 and 6"],
         text=DIGITS_200 + "search: {max_trials: 3}\n"),
    case("recursive alias", CONFIG, [], ["recursive alias", "line 6"], text=DIGITS_200 + "extra: &loop [1, *loop]\n"),
    case("alias bomb", CONFIG, [], ["expands to more than 100,000 values"], text=_alias_bomb(), process=True),
    case("not UTF-8", CONFIG, [], ["not UTF-8", f"byte offset {len(DIGITS_200) + 5}", "line 6"],
         text=DIGITS_200.encode() + b"# caf\xe9\n", process=True),
    case("deeply nested list", CONFIG, [], ["nested too deeply"],
         text=DIGITS_200 + "extra: " + "[" * 3000 + "]" * 3000 + "\n"),
    case("deeply nested mapping", CONFIG, [], ["nested too deeply"],
         text=DIGITS_200 + "extra: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n"),
    case("duplicate key in a --set value", CONFIG, ["space.units={type: int, low: 8, low: 9, high: 32}"],
         ["duplicate key 'low'", "--set"], names_file=False),
    # --- numbers ----------------------------------------------------------------------------------------
    case("NaN low", CONFIG, ["space.units={type: float, low: .nan, high: 1}"], ["key 'space.units.low'", "finite"]),
    case("infinite high", CONFIG, ["space.units={type: float, low: 0, high: .inf}"],
         ["key 'space.units.high'", "finite"]),
    case("minus infinity", CONFIG, ["space.units={type: float, low: -.inf, high: 1}"], ["finite"]),
    case("NaN eta", CONFIG, ["search.eta=.nan"], ["key 'search.eta'", "finite"]),
    case("NaN min_budget", CONFIG, ["search.min_budget=.nan"], ["key 'search.min_budget'", "finite"]),
    case("infinite max_budget", CONFIG, ["search.max_budget=.inf"], ["key 'search.max_budget'", "finite"]),
    case("overflowing number", CONFIG, ["search.max_budget=1e999"], ["key 'search.max_budget'", "finite"]),
    case("NaN learning rate", CONFIG, ["training.learning_rate=.nan"], ["key 'training.learning_rate'", "finite"]),
    case("infinite time limit", CONFIG, ["search.time_limit=.inf"], ["key 'search.time_limit'", "finite"]),
    case("total budget below one full evaluation", CONFIG, ["search.total_budget=0.5"],
         ["key 'search.total_budget'", "at least the largest budget (1)"]),
    case("NaN in loader options", CONFIG, ["data.options={scale: .nan}"], ["key 'data.options.scale'", "finite"]),
    case("splits sum to 1", CONFIG, ["data.validation_split=0.5", "data.test_split=0.5"],
         ["key 'data.test_split'", "validation_split + test_split < 1"]),
    case("splits sum past 1", CONFIG, ["data.validation_split=0.6", "data.test_split=0.7"], ["< 1"]),
    # --- seeds and choices --------------------------------------------------------------------------------
    case("negative seed", CONFIG, ["seed=-1"], ["key 'seed'", ">= 0"]),
    case("fractional seed", CONFIG, ["seed=1.5"], ["key 'seed'", "whole number"]),
    case("choice values equal once typed", CONFIG, ["space.units={type: choice, values: [1, 1.0, true]}"],
         ["key 'space.units.values'", "equal once typed"]),
    case("repeated choice", CONFIG, ["space.units={type: choice, values: [8, 16, 8]}"], ["duplicates"]),
    case("true beside 1 for the trainer", CONFIG, ["space.units={type: choice, values: [1, true]}"],
         ["key 'space.units.values'", "one setting for the trainer"]),
    # --- names --------------------------------------------------------------------------------------------
    case("name .", CONFIG, ["name=."], ["key 'name'", "not '.' or '..'"]),
    case("name ..", CONFIG, ["name=.."], ["key 'name'"]),
    case("name with a separator", CONFIG, ["name=a/b"], ["key 'name'"]),
    case("empty name", CONFIG, ["name=''"], ["key 'name'"]),
    case("output.dir .", CONFIG, ["output.dir=."], ["key 'output.dir'", "named study folder"]),
    # --- hooks: what a module:function reference may name ------------------------------------------
    case("stdlib loader", CONFIG, ["data.dataset=os:system", "data.options={command: 'touch {marker}'}"],
         ["key 'data.dataset'", "standard library"], process=True),
    case("builtins builder", CONFIG, ["model.builder=builtins:print"], ["key 'model.builder'", "standard library"]),
    case("stdlib function as builder", CONFIG, ["model.builder=subprocess:run"], ["standard library"]),
    case("not a function", CONFIG, ["data.dataset={mod}:CONSTANT"], ["is a int, not a Python function or class"]),
    case("re-exported builtin", CONFIG, ["data.dataset={mod}:reexported_system"], ["not a Python function or class"]),
    case("re-exported stdlib function", CONFIG, ["data.dataset={mod}:rmtree"],
         ["shutil.rmtree", "standard library"]),
    # --- the pre-flight: devices, objective, loader, builder, space keys -------------------------------
    case("no such device", PREFLIGHT, ["training.device=gpu"],
         ["(--set training.device=gpu), key 'training.device'", "not available"]),
    case("objective the trainer does not report", PREFLIGHT, ["search.objective=val_auc"],
         ["key 'search.objective'", "val_accuracy"]),
    case("loader lengths differ", PREFLIGHT, ["data.dataset={mod}:mismatched"],
         ["'{mod}:mismatched'", "returned 10 inputs but 9 labels; expected one label per input"]),
    case("loader gives no labels", PREFLIGHT, ["data.dataset={mod}:no_labels"],
         ["returned 10 inputs but None as labels"]),
    case("non-numeric inputs", PREFLIGHT, ["data.dataset={mod}:strings"], ["non-numeric inputs"]),
    case("NaN inputs", PREFLIGHT, ["data.dataset={mod}:nan_inputs"], ["1 NaN or infinite input value(s)", "example 3"]),
    case("negative labels", PREFLIGHT, ["data.dataset={mod}:negative_labels"], ["class index"]),
    case("fractional labels", PREFLIGHT, ["data.dataset={mod}:fractional_labels"], ["class index"]),
    case("loader returns one array", PREFLIGHT, ["data.dataset={mod}:one_array"], ["expected (x, y)"]),
    case("loader raises", PREFLIGHT, ["data.dataset={mod}:raising_loader"],
         ["key 'data.dataset'", "the loader '{mod}:raising_loader' failed: FileNotFoundError: no such file: "
          "'train.csv' (at {mod}.py:"]),
    case("csv file that does not exist", PREFLIGHT, ["data.dataset=csv", "data.options={path: no_such.csv}"],
         ["key 'data.options.path'", "no_such.csv: no such file"]),
    case("loader refuses its options", PREFLIGHT, ["data.dataset={mod}:no_options", "data.options={n: 3}"],
         ["takes no option 'n'", "it takes none"]),
    case("a built-in loader's misspelt option", PREFLIGHT,
         ["data.dataset=csv", "data.options={path: t.csv, delimeter: ';'}"],
         ["the loader 'csv' takes no option 'delimeter'; did you mean 'delimiter'?",
          "it takes path, target, delimiter"]),
    case("loader returns sample weights", PREFLIGHT, ["data.dataset={mod}:with_weights"],
         ["a third element of type ndarray", "sample_weight"]),
    case("loader returns inputs with no features", PREFLIGHT, ["data.dataset={mod}:no_features"],
         ["inputs of shape (100, 0), with no features"]),
    case("builder returns no model", PREFLIGHT, ["data.dataset={mod}:good_loader", "model.builder={mod}:not_a_model"],
         ["key 'model.builder'", "returned dict; expected a keras.Model"], process=True),
    case("targets in a dict for a builder of one output", PREFLIGHT,
         ["data.dataset={mod}:dict_targets", "model.builder={mod}:quiet_builder"],
         ["key 'model.builder'", "the loader '{mod}:dict_targets' gives its targets as several arrays (num_classes "
          "{'out': 3}): a model of one input and one output takes the arrays themselves"]),
    case("builder raises", PREFLIGHT, ["data.dataset={mod}:good_loader", "model.builder={mod}:raising_builder"],
         ["failed on the low end of the space", "this builder cannot build"]),
    case("a regression left with the default objective", PREFLIGHT, ["training.loss=mse", "training.metrics=[mae]"],
         ["key 'search.objective'", "got 'val_accuracy' (the default: set search.objective); a metric is added"]),
    case("integer targets for a regression loss", PREFLIGHT,
         ["data.dataset={mod}:good_loader", "model.builder={mod}:quiet_builder", "training.loss=mse",
          "training.metrics=[mae]", "search.objective=val_mae"],
         ["key 'training.loss'", "the targets are integers, so they were counted as class indices and the model "
          "built for num_classes=3: for a regression (one value per example), return them as floats"]),
    case("too few outputs for the labels", PREFLIGHT, ["model.builder={mod}:two_outputs"],
         ["gives 2 outputs, but the labels run 0..9"]),
    case("a batch size of 0 in the space", CONFIG, ["space.batch_size={type: int, low: 0, high: 8}"],
         ["key 'space.batch_size.low'", "an integer >= 1 (the trainer's batch_size), got 0"]),
    case("space key the built-in model never reads", PREFLIGHT,
         ["space.learning_rat={type: float, low: 0.001, high: 0.1}"],
         ["key 'space.learning_rat'", "never reads 'learning_rat'", "did you mean 'learning_rate'"]),
    case("space key with a typo", PREFLIGHT, ["space.unit={type: int, low: 8, high: 16}"], ["did you mean 'units'"]),
    case("a misspelt name late in a choice the builder reads", PREFLIGHT,
         ["space.activation={type: choice, values: [relu, tanh, bogus_act]}"],
         ["key 'space.activation.values'", "failed with activation='bogus_act'", "activation function"]),
    case("a batch larger than the training split", PREFLIGHT, ["data.limit=10"],
         ["key 'training.batch_size'", "a batch of 64 is larger than the 10 training examples", "at most 10"]),
    case("every searched batch size larger than the training split", PREFLIGHT,
         ["data.limit=40", "space.batch_size={type: choice, values: [64, 128]}"],
         ["key 'space.batch_size.values'", "a batch of 64 is larger than the 40 training examples",
          "every trial would fail"]),
]
CASES += [
    # --- a loader's splits and streams (tests/support/data_tasks.py) -------------------------------
    case(f"loader {loader}", PREFLIGHT, [], ["key 'data.dataset'", *fragments], text=DATA_TASK.format(loader=loader))
    for loader, fragments in [
        ("no_validation", ["'tests.support.data_tasks:no_validation'", "without 'validation'"]),
        ("unknown_split", ["key(s) ['holdout']", "'train', 'validation'"]),
        ("split_not_a_pair", ["split 'validation'", "expected (x, y) arrays or a tf.data.Dataset"]),
        ("batched_stream", ["split 'train'", "look batched", "drop the .batch()"]),
        ("infinite_stream", ["split 'train'", "is infinite"]),
        ("string_stream", ["split 'validation'", "non-numeric inputs"]),
        ("nan_stream", ["split 'train'", "NaN or infinite input values, the first in element 5"]),
        ("negative_label_stream", ["split 'train'", "label -1", "class indices"]),
        ("label_past_num_classes", ["split 'train'", "the label 3, but num_classes gives 3 classes", "0..2"]),
        ("validation_label_past_train", ["split 'validation'", "the label 6, but the train split's labels give 3",
                                         "0..2"]),
        ("label_past_num_classes_in_a_second_output", ["split 'train'", "the label 5, but num_classes gives 3"]),
        ("streamed_label_past_num_classes", ["split 'train'", "the label 9, but num_classes gives 3"]),
        ("shapes_differ", ["split 'validation'", "(4,)", "'train' has (6,)"]),
        ("bare_dataset", ["returned a tf.data.Dataset", "dict of splits"]),
        ("nan_in_named_arrays", ["split 'test'", "1 NaN or infinite input value(s), the first in example 3"]),
    ]
]
CASES += [
    # --- engines, callbacks, early stopping (tests/support/engine_tasks.py) ------------------------
    case("compiled engine for a model with its own train_step", PREFLIGHT,
         ["training.engine=compiled", "model.builder=tests.support.engine_tasks:custom_step_mlp"],
         ["training.engine", "the model overrides train_step", "expected 'fit' or 'auto'"], text=ENGINES_BINARY),
    case("compiled engine for a batch-level callback", PREFLIGHT,
         ["training.engine=compiled", "training.callbacks=[tests.support.engine_tasks:count_batches]"],
         ["training.engine", "CountBatches hook into batches"], text=ENGINES_BINARY),
    case("unknown engine", PREFLIGHT, ["training.engine=keras"], ["training.engine", "expected one of"],
         text=ENGINES_BINARY),
    case("callback factory returns no callback", PREFLIGHT,
         ["training.callbacks=[tests.support.engine_tasks:not_a_callback]"],
         ["training.callbacks", "returned int; expected a keras.callbacks.Callback"], text=ENGINES_BINARY),
    case("missing callback function", PREFLIGHT, ["training.callbacks=[tests.support.engine_tasks:no_such_function]"],
         ["training.callbacks", "no_such_function"], text=ENGINES_BINARY),
    case("early stopping on a value nobody logs", PREFLIGHT, ["training.early_stopping={monitor: val_aucc}"],
         ["training.early_stopping.monitor", "did you mean 'val_auc'"], text=ENGINES_BINARY),
    case("negative patience", PREFLIGHT, ["training.early_stopping={patience: -1}"],
         ["training.early_stopping.patience", ">= 0"], text=ENGINES_BINARY),
    # --- losses and metrics by name (tests/support/loss_tasks.py) -----------------------------------
    case("objective a regression does not log", PREFLIGHT, ["search.objective=val_auc"],
         ["search.objective", "val_auc",
          "loss, mae, half_absolute_error, val_loss, val_mae, val_half_absolute_error"],
         text=REGRESSION.format(objective="val_mae")),
    case("misspelt loss", PREFLIGHT, ["training.loss=mean_sqared_error"],
         ["training.loss", "did you mean 'mean_squared_error'"], text=REGRESSION.format(objective="val_mae")),
    case("misspelt metric", PREFLIGHT, ["training.metrics=[mae, aucc]"], ["training.metrics", "did you mean 'auc'"],
         text=REGRESSION.format(objective="val_mae")),
    case("a class loss for float targets", PREFLIGHT,
         ["training.loss=sparse_categorical_crossentropy", "search.objective=val_loss"],
         ["data.dataset", "float targets need a training.loss"], text=REGRESSION.format(objective="val_mae")),
    # --- several outputs (examples/multi_io.yaml) -----------------------------------------------------
    case("objective no output logs", PREFLIGHT, ["search.objective=val_prize_mae"],
         ["key 'search.objective'", "model's outputs category, price", "did you mean 'val_price_mae'",
          "val_category_accuracy"], text=MULTI_IO),
    case("loss for an output the model lacks", PREFLIGHT, ["training.loss={price: mse, size: mse}"],
         ["key 'training.loss'", "names 'size', not an output", "category, price"], text=MULTI_IO),
    case("early stopping on an output the model lacks", PREFLIGHT,
         ["training.early_stopping={monitor: val_size_mae}"],
         ["key 'training.early_stopping.monitor'", "'val_size_mae' is not a value", "val_price_mae"], text=MULTI_IO),
    case("built-in model for several inputs", PREFLIGHT, ["model.builder=mlp"],
         ["key 'model.builder'", "the built-in model 'mlp' takes one input array", "returns several"], text=MULTI_IO),
    *[case(f"targets wrapped in a {form} for a one-output model", PREFLIGHT,
           ["data.dataset={mod}:wrapped_targets", f"data.options={{form: {form}}}",
            "model.builder={mod}:one_named_output", "training.loss=sparse_categorical_crossentropy",
            "training.metrics=[accuracy]", "search.objective=val_accuracy"],
           ["key 'data.dataset'", f"targets as a {form} of 1 array(s)", "model has one output"], text=MULTI_IO)
      for form in ("dict", "tuple")],
    # --- several objectives (hooks: SingleObjectiveOnly, registered as 'single_only') ----------------
    case("unknown objective name", PREFLIGHT, ["search.objectives=[val_acuracy, params]"],
         ["search.objectives", "'val_acuracy'", "did you mean 'val_accuracy'"], text=MULTI_OBJECTIVE),
    case("unknown constraint name", PREFLIGHT, ["search.constraints=[paramz <= 10]"],
         ["search.constraints", "'paramz'", "did you mean 'params'"], text=MULTI_OBJECTIVE),
    case("unparsable constraint", CONFIG, ["search.constraints=[params is small]"],
         ["search.constraints", "cannot parse the constraint"], text=MULTI_OBJECTIVE),
    case("bad direction", CONFIG, ["search.objectives=[{name: params, direction: smallest}]"],
         ["search.objectives", "'minimize' or 'maximize'", "'smallest'"], text=MULTI_OBJECTIVE),
    case("best epoch of several objectives", CONFIG, ["training.keep_best_epoch=true"],
         ["key 'training.keep_best_epoch'", "no epoch is best on all of them"], text=MULTI_OBJECTIVE),
    case("keep_best_epoch not a boolean", CONFIG, ["training.keep_best_epoch=yes please"],
         ["key 'training.keep_best_epoch'", "true or false"]),
    case("searcher without several objectives", PREFLIGHT, ["search.algorithm=single_only"],
         ["search.objectives", "'single_only' cannot take several objectives"], text=MULTI_OBJECTIVE),
    case("BOHB's KDE model with several objectives", PREFLIGHT,
         ["search.algorithm=bohb", "search.options={model: kde}"],
         ["search.objectives", "'bohb' cannot take several objectives", "model 'kde' takes one objective"],
         text=MULTI_OBJECTIVE),
    case("an option the searcher lacks, with several objectives", PREFLIGHT, ["search.options={bogus: 1}"],
         ["(--set search.options={bogus: 1}), key 'search.options'", "an option is not accepted by"],
         text=MULTI_OBJECTIVE),
    case("a searcher option's value it refuses", PREFLIGHT, ["search.algorithm=bohb", "search.options={model: gpp}"],
         ["key 'search.options'", "bohb refused an option's value", "model must be one of"]),
    case("a searcher option of the wrong type", PREFLIGHT,
         ["search.algorithm=bohb", "search.options={top_n_percent: abc}"],
         ["key 'search.options'", "bohb refused an option's value", "not supported"]),
    case("an option the searcher does not take", PREFLIGHT, ["search.algorithm=random", "search.options={model: gp}"],
         ["key 'search.options'", "not accepted by random: 'model'; it takes tie_break"]),
    case("a Gaussian-process option on async BOHB's TPE", PREFLIGHT,
         ["search.algorithm=async_bohb", "search.options={model: tpe, candidates: uniform}"],
         ["key 'search.options'", "candidates: options of model 'gp'", "here model 'tpe'"]),
    case("a Gaussian-process option with several objectives", PREFLIGHT,
         ["search.algorithm=bohb", "search.options={fit_on: joint}"],
         ["key 'search.objectives'", "fit_on: options of model 'gp'", "several objectives or constraints"],
         text=MULTI_OBJECTIVE),
]


class SingleObjectiveOnly:
    """A searcher written before several objectives existed: no `objectives` argument."""

    def __init__(self, space, *, seed, direction, min_budget, max_budget, eta):
        raise AssertionError("the pre-flight must refuse it before building it with objectives")


def params(stage: str | None = None, process: bool | None = None) -> list:
    """The cases of one stage (or all), as pytest parameters named by their labels."""
    return [pytest.param(c, id=c.label) for c in CASES
            if (stage is None or c.stage == stage) and (process is None or c.process == process)]


def hooks_module(folder: Path, monkeypatch) -> str:
    """HOOKS beside the experiment, under a name no other test imported (sys.path restored after)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    name = f"hooks_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(HOOKS)
    return name


def _fill(text: str, folder: Path, module: str) -> str:
    return text.replace("{mod}", module).replace("{marker}", str(folder / "marker"))


def prepare(bad: BadInput, folder: Path, monkeypatch) -> tuple[Path, list[str], str]:
    """Write the case's experiment and its hooks into `folder`: the file, the `search` arguments, the hooks' name."""
    from hpo.search import SEARCHERS

    monkeypatch.setitem(SEARCHERS, "single_only", SingleObjectiveOnly)
    module = hooks_module(folder, monkeypatch)
    path = write_experiment(folder, bad.text)
    return path, search_args(path, folder / "study", *(_fill(o, folder, module) for o in bad.overrides)), module


def assert_refused(bad: BadInput, done, folder: Path, path: Path, module: str) -> None:
    """Exit 2, no traceback, the file (or --set) named, every fragment on stderr, nothing on disk."""
    output = done.stdout + done.stderr
    assert done.returncode == 2, output[-3000:]
    assert "Traceback" not in output
    if bad.names_file:
        assert str(path) in done.stderr, f"the message does not name the file: {output}"
    else:
        assert "--set" in done.stderr, f"the message names neither the file nor --set: {output}"
    for fragment in bad.fragments:
        fragment = _fill(fragment, folder, module)
        assert fragment in done.stderr, f"{fragment!r} missing from: {output}"
    assert not (folder / "study").exists()
    assert not (folder / "marker").exists(), "a shell command ran"
