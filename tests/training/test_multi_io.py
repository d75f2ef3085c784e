"""Models with several inputs and outputs: the data layer carries dicts and tuples of arrays
(split by one permutation, checked per array, streamed as (dict, dict) elements), the
experiment gives a loss and metrics per output name, and a search ranks trials by one
output's validation metric (`val_price_mae`) on the fit engine: examples/multi_io.yaml
through the CLI in this process (a few hundred rows, two trials of two epochs)."""

import re

import numpy as np
import pytest

from examples import multi_io
from hpo.config import DataConfig
from hpo.data import load_dataset, split
from hpo.errors import ConfigError
from hpo.metric_names import infer_direction, maybe_logged, named_outputs, objective_names
from tests.support.cli import ROOT, hpo_here

EXPERIMENT = ROOT / "examples" / "multi_io.yaml"


def load(class_labels=False, **options):
    return load_dataset(DataConfig(dataset="examples.multi_io:load", validation_split=0.25, test_split=0.15,
                                   options=options), seed=3, class_labels=class_labels, announce=False)


# --- the data layer (no training) ------------------------------------------------------------------

def _named(x, y):
    """Tuples in the model's order as the dict form names them."""
    if isinstance(x, tuple):
        x, y = dict(zip("ab", x)), dict(zip(("price", "category"), y))
    return x, y


@pytest.mark.parametrize("form", ["dict", "tuple"])
def test_every_array_of_an_example_lands_in_the_same_split_by_one_permutation(form):
    original, _ = _named(*multi_io.load(form=form))
    dataset = load(form=form)
    parts = [_named(dataset.x_train, dataset.y_train), _named(dataset.x_val, dataset.y_val),
             _named(dataset.x_test, dataset.y_test)]
    assert [len(x["a"]) for x, _ in parts] == [144, 60, 36]
    np.testing.assert_array_equal(np.sort(np.concatenate([x["a"][:, 0] for x, _ in parts])),
                                  np.sort(original["a"][:, 0]))
    assert not np.array_equal(parts[0][0]["a"], original["a"][:144])      # shuffled, seeded
    for x, y in parts:     # the targets are functions of the inputs: they hold only if every array moved alike
        np.testing.assert_allclose(y["price"], x["a"][:, 0] + 0.5 * x["b"][:, 1], rtol=1e-6)
        np.testing.assert_array_equal(y["category"], (x["a"][:, 1] > 0).astype(int) + (x["b"][:, 0] > 0))
        assert y["category"].dtype == np.int32 and y["price"].dtype == np.float32
    # The builder is given one shape per input and one class count per target, in their structure.
    if form == "dict":
        assert dataset.input_shape == {"a": (4,), "b": (3,)}
        assert dataset.num_classes == {"category": 3, "price": 1}
    else:
        assert dataset.input_shape == ((4,), (3,)) and dataset.num_classes == (1, 3)


def test_named_splits_of_several_arrays_as_arrays_or_tf_data_keep_their_structure():
    arrays, streamed = load(splits="arrays"), load(splits="tf.data")
    assert not arrays.streamed and streamed.streamed
    for dataset in (arrays, streamed):
        assert [dataset.examples(s) for s in ("train", "validation", "test")] == [180, 30, 30]
        assert dataset.input_shape == {"a": (4,), "b": (3,)}
        assert dataset.num_classes == {"category": 3, "price": 1}
        x, y = dataset.first(4)
        assert set(x) == {"a", "b"} and x["b"].shape == (4, 3) and x["a"].dtype == np.float32
        assert y["category"].dtype == np.int32 and y["price"].dtype == np.float32
    np.testing.assert_array_equal(streamed.first(4)[0]["a"], arrays.x_train["a"][:4])   # no shuffle, no re-split
    train = streamed.streams["train"]
    assert train.target_shape == {"category": (), "price": ()}
    (x, y), = list(train.batches(180).take(1))
    assert set(x) == {"a", "b"} and int(y["price"].shape[0]) == 180


def test_auto_sends_several_inputs_outputs_or_target_arrays_to_fit_and_says_why():
    from hpo.config import TrainingConfig
    from hpo.training.engines import EngineChoice, choose_engine
    from tests.support import loss_tasks

    training = TrainingConfig(loss={"price": "mse", "category": "mse"}, metrics=("mae",))
    model = multi_io.build({"units": 4}, {"a": (4,), "b": (3,)}, {"price": 1, "category": 3})
    assert choose_engine(model, training).reason == "auto: the model has 2 inputs; the model has 2 outputs"
    one_output = loss_tasks.linear_output_mlp({}, (4,), 1)
    choice = choose_engine(one_output, training, y_example={"price": np.zeros(2, "float32")})
    assert choice.engine == "fit" and choice.reason == ("auto: the targets hold several arrays; "
                                                        "training.loss or training.metrics is given per output")
    # One input fed a dict of one array: Keras's fit unpacks it, the compiled step's gather cannot.
    choice = choose_engine(one_output, TrainingConfig(loss="mse", metrics=()), several_inputs=True)
    assert choice == EngineChoice("fit", "auto: the inputs hold several arrays")


def test_the_fit_engine_trains_and_is_timed_on_streamed_dict_elements():
    """(dict, dict) tf.data elements reach Keras's fit as a stream: an epoch, and the few
    batches `compile: auto` times the modes on (stacked batches are the compiled step's)."""
    from hpo.config import TrainingConfig
    from hpo.training.trainer import Trainer
    from hpo.training.training_data import WholeStream

    training = TrainingConfig(engine="fit", compile="graph", loss={"price": "mse", "category":
                              "sparse_categorical_crossentropy"}, metrics={"price": ("mae",)}, batch_size=32)
    trainer = Trainer(load(splits="tf.data"), multi_io.build, training, {"units": 8}, "/device:CPU:0")
    params = trainer.resolve({"learning_rate": 0.01})
    program = trainer.program_for(params, seed=0, engine="fit")
    batch = trainer.timing_batch(32, seed=0, steps=2, fit=True)
    assert isinstance(batch, WholeStream) and batch.batches == 2
    loss = trainer.step_call(program.train_steps, batch)()
    assert np.isfinite(loss) and loss > 0
    assert set(program.measures.results(validation=False)) == {"price_loss", "price_mae", "category_loss"}


@pytest.mark.parametrize("x, y, fragments", [
    ({"a": np.zeros((5, 2)), "b": np.zeros((4, 2))}, np.zeros(5), ["different lengths", "x['a']: 5", "x['b']: 4"]),
    ({"a": np.zeros((5, 2)), "b": np.full((5, 2), np.nan)}, np.zeros(5), ["NaN or infinite", "x['b']"]),
    (np.zeros((5, 2)), (np.zeros(5), np.array(list("abcde"))), ["labels y[1]", "dtype <U1"]),
    ({1: np.zeros((5, 2))}, np.zeros(5), ["a dict of named arrays", "input names"]),
])
def test_a_bad_array_among_several_is_named(x, y, fragments):
    from hpo.data.checks import LoaderProblem, check_arrays

    with pytest.raises(ConfigError) as err:
        check_arrays(x, y, LoaderProblem("my.loader:load"), class_labels=False)
    for fragment in fragments:
        assert fragment in str(err.value), (fragment, str(err.value))


@pytest.mark.parametrize("where, class_labels, fragment", [
    ("x", False, "NaN or infinite input values in x['b'], the first in element 7"),
    ("y", True, "the label -1 in y['category']"),
])
def test_a_bad_array_among_several_in_a_tf_data_split_is_named(where, class_labels, fragment):
    import tensorflow as tf

    from hpo.data.checks import LoaderProblem
    from hpo.data.streams import as_stream

    x = {"a": np.zeros((10, 4), "float32"), "b": np.zeros((10, 3), "float32")}
    y = {"price": np.zeros(10, "float32"), "category": np.array([0, 1, 2, 0, 0, 1, 2, 0, 1, 2])}
    if where == "x":
        x["b"][7, 1] = np.nan
    else:
        y["category"][3] = -1
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        as_stream(tf.data.Dataset.from_tensor_slices((x, y)), "train", LoaderProblem("my.loader:load"),
                  class_labels=class_labels, count_classes=True)


def test_split_keeps_a_list_of_rows_as_one_array():
    """A list of Python lists is one input array (numpy's reading), not several inputs."""
    from hpo.data.checks import LoaderProblem, check_arrays

    x, y = check_arrays([[0, 1], [2, 3], [4, 5]], [0, 1, 0], LoaderProblem("ref"), class_labels=True)
    assert x.shape == (3, 2)
    dataset = split("rows", "", x, y, DataConfig(dataset="rows", validation_split=0.34, test_split=0.0), seed=0)
    assert dataset.examples("train") == 2 and dataset.num_classes == 2


def test_names_logged_by_a_model_with_several_outputs():
    names = objective_names(("mae",), ("price", "size"))
    assert names == ("loss", "price_loss", "price_mae", "size_loss", "size_mae",
                     "val_loss", "val_price_loss", "val_price_mae", "val_size_loss", "val_size_mae")
    per_output = {"price": ("mae",), "category": ("accuracy",)}
    assert "val_category_accuracy" in objective_names(per_output) and "val_mae" not in objective_names(per_output)
    # Each output's metric points the way the metric does.
    assert [infer_direction(n) for n in ("val_category_accuracy", "val_category_f1_score", "val_price_r2_score",
                                         "val_category_auc", "val_price_mae", "val_price_loss")] == \
        ["maximize"] * 4 + ["minimize"] * 2
    # The driver never builds the model: a loss given per output names them all (the HParams metrics).
    assert named_outputs({"price": "mse", "category": "x"}, per_output) == ("price", "category")
    assert named_outputs("mse", ("mae",)) == ()
    # Before the model is built, an output's name can only be told by its form.
    assert maybe_logged("val_price_mae", ("mae",)) and maybe_logged("price_loss", ("mae",))
    assert not maybe_logged("val_auc", ("mae",)) and not maybe_logged("val__mae", ("mae",))


# --- a search through the CLI ----------------------------------------------------------------------

@pytest.mark.slow
def test_a_two_input_two_output_model_is_searched_by_one_outputs_metric_and_exported(tmp_path, capsys):
    """examples/multi_io.yaml: two trials ranked by val_price_mae; `best --export` scores the
    held-out test split per output and writes a model that loads back with its named outputs."""
    import keras

    from hpo.study import Study

    study_dir = tmp_path / "study"
    done = hpo_here(capsys, "search", EXPERIMENT, "--study-dir", study_dir)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    study = Study.open(study_dir, read_only=True)
    trials = study.trials()
    assert [t.state.value for t in trials] == ["complete", "complete"]
    logged = {"loss", "price_loss", "price_mae", "category_loss", "category_accuracy"}
    for trial in trials:
        epochs = [m for _, _, m in study.epochs(trial.trial_id)]
        assert len(epochs) == 2
        assert logged | {f"val_{n}" for n in logged} <= set(epochs[-1])
        assert "mae" not in epochs[-1] and "val_accuracy" not in epochs[-1]
        assert trial.value == pytest.approx(epochs[-1]["val_price_mae"])
    study.close()
    log = (study_dir / "hpo.log").read_text()
    assert "trains with the fit engine: auto: the model has 2 inputs; the model has 2 outputs" in log

    exported = tmp_path / "best.keras"
    done = hpo_here(capsys, "best", study_dir, "--export", exported, "--experiment", EXPERIMENT)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "held-out test set (36 examples" in done.stdout and "price_mae" in done.stdout
    model = keras.models.load_model(exported)
    predicted = model.predict({"a": np.zeros((3, 4), "float32"), "b": np.zeros((3, 3), "float32")}, verbose=0)
    assert predicted["price"].shape == (3, 1) and predicted["category"].shape == (3, 3)


TWO_VALUES = '''
import keras
import numpy as np

def load():
    x = np.random.default_rng(0).normal(size=(80, 3)).astype("float32")
    return x, {"price": x.sum(1, keepdims=True), "size": x[:, :1] * 2}

def build(config, input_shape, num_classes):
    inputs = keras.Input(input_shape)
    hidden = keras.layers.Dense(4)(inputs)
    return keras.Model(inputs, {"price": keras.layers.Dense(1, name="price")(hidden),
                                "size": keras.layers.Dense(1, name="size")(hidden)})
'''


@pytest.mark.slow
def test_one_loss_for_every_output_lists_each_outputs_names_in_the_hparams_dashboard(tmp_path, capsys, monkeypatch):
    """Neither the loss nor the metrics names an output: the names the HParams dashboard
    lists come from the model the pre-flight built, as the trials log them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    (tmp_path / "two_values.py").write_text(TWO_VALUES)
    monkeypatch.syspath_prepend(str(tmp_path))
    study_dir = tmp_path / "study"
    done = hpo_here(capsys, "search", EXPERIMENT, "--study-dir", study_dir,
                    "--set", "data.dataset=two_values:load", "--set", "model.builder=two_values:build",
                    "--set", "training.loss=mse", "--set", "training.metrics=[mae]",
                    "--set", "search.objective=val_size_mae", "--set", "search.max_trials=1",
                    "--set", "search.min_budget=1", "--set", "search.max_budget=1")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    search = EventAccumulator(str(study_dir / "tensorboard" / "search"), size_guidance={"tensors": 0}).Reload()
    content = search.SummaryMetadata("_hparams_/experiment").plugin_data.content
    tags = {m.name.tag for m in plugin_data_pb2.HParamsPluginData.FromString(content).experiment.metric_infos}
    assert {"val_price_mae", "val_size_mae", "val_price_loss", "val_size_loss", "val_loss"} <= tags
    assert "val_mae" not in tags
