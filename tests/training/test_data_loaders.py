"""Every form a loader may return, every built-in loader, and a streamed search on both
engines. (The pre-flight's refusals of bad data, exit 2 naming the loader, the split and what
was wrong: the catalogue, tests/support/bad_inputs.py.)"""

import textwrap

import numpy as np
import pytest

from hpo.cli import main
from hpo.config import DataConfig
from hpo.data import LOADERS, load_dataset
from hpo.errors import ConfigError
from tests.support.experiments import DATA_TASK


def load(ref, class_labels=True, **options):
    return load_dataset(DataConfig(dataset=ref, validation_split=0.2, test_split=0.1, options=options), seed=0,
                        class_labels=class_labels)


# --- the forms -----------------------------------------------------------------------------------

def test_arrays_with_or_without_a_source_are_shuffled_and_split():
    two, three = load("tests.support.data_tasks:pair"), load("tests.support.data_tasks:triple")
    assert (two.examples("train"), two.examples("validation"), two.examples("test")) == (84, 24, 12)
    assert three.source == "three arrays" and two.source == "tests.support.data_tasks:pair"
    np.testing.assert_array_equal(two.x_train, three.x_train)        # the same seeded split
    assert not two.streamed and two.num_classes == 3


def test_named_array_splits_are_used_as_given_and_test_is_optional():
    from tests.support import data_tasks

    given = data_tasks.array_splits()
    dataset = load("tests.support.data_tasks:array_splits")
    np.testing.assert_array_equal(dataset.x_train, given["train"][0])     # no shuffle, no re-split
    np.testing.assert_array_equal(dataset.y_val, given["validation"][1])
    assert dataset.examples("test") == 20 and not dataset.streamed
    assert load("tests.support.data_tasks:array_splits", with_test=False).examples("test") == 0


def test_tf_data_splits_stay_streams_counted_once_with_their_classes():
    dataset = load("tests.support.data_tasks:stream_splits")
    assert dataset.streamed and set(dataset.streams) == {"train", "validation", "test"}
    # A generator's length is unknown to tf.data: counted at load; the array test split streams too.
    assert [dataset.examples(s) for s in ("train", "validation", "test")] == [80, 20, 20]
    assert dataset.num_classes == 3 and dataset.input_shape == (6,)
    x, y = dataset.first(4)
    assert x.shape == (4, 6) and x.dtype == np.float32 and y.dtype == np.int32
    batches = list(dataset.streams["train"].batches(32, drop_remainder=True))
    assert [int(b[0].shape[0]) for b in batches] == [32, 32]


@pytest.mark.parametrize("targets, shape, dtype, classes", [
    ("float", (), np.float32, 1), ("binary", (), np.int32, 2), ("onehot", (3,), np.float32, 3),
    ("multilabel", (2,), np.float32, 2)])
def test_targets_of_every_kind_stream_with_a_loss_that_reads_them(targets, shape, dtype, classes):
    dataset = load("tests.support.data_tasks:stream_splits", class_labels=False, targets=targets)
    train = dataset.streams["train"]
    assert train.target_shape == shape and dataset.num_classes == classes
    assert dataset.first(3)[1].dtype == dtype


def test_one_hot_array_targets_give_their_width_as_classes():
    from tests.support import data_tasks

    x, y = data_tasks.pair()
    onehot = np.eye(3, dtype="float32")[y]
    from hpo.data.checks import LoaderProblem
    from hpo.data.loading import _arrays_result
    _, checked, _ = _arrays_result((x, onehot), LoaderProblem("t"), class_labels=False)
    assert checked.shape == (120, 3)
    from hpo.data import num_classes
    assert num_classes(checked) == 3


# --- the built-in loaders ------------------------------------------------------------------------

@pytest.mark.parametrize("name, rows, features, classes", [
    ("iris", 150, 4, 3), ("wine", 178, 13, 3), ("breast_cancer", 569, 30, 2), ("diabetes", 442, 10, 1)])
def test_scikit_learn_bundled_sets(name, rows, features, classes):
    dataset = load(name, class_labels=classes > 1)
    assert sum(dataset.examples(s) for s in ("train", "validation", "test")) == rows
    assert dataset.input_shape == (features,) and dataset.num_classes == classes
    assert abs(float(dataset.x_train.mean())) < 0.2          # standardised columns


def test_npz_by_names_and_in_keras_layout(tmp_path):
    x, y = np.arange(40, dtype="float32").reshape(20, 2), np.arange(20) % 2
    np.savez(tmp_path / "named.npz", inputs=x, labels=y)
    np.savez(tmp_path / "keras.npz", x_train=x[:15], y_train=y[:15], x_test=x[15:], y_test=y[15:])
    named = load("npz", path=str(tmp_path / "named.npz"), x="inputs", y="labels")
    assert sum(named.examples(s) for s in ("train", "validation", "test")) == 20 and named.num_classes == 2
    joined = load("npz", path=str(tmp_path / "keras.npz"))
    assert sum(joined.examples(s) for s in ("train", "validation", "test")) == 20
    with pytest.raises(ConfigError, match="no array 'x'.*data.options.x"):
        load("npz", path=str(tmp_path / "named.npz"))


def test_csv_by_header_name_or_index_and_class_words(tmp_path):
    rows = ["a,b,kind,score"] + [f"{i},{i % 3},{'cat' if i % 2 else 'dog'},{i / 10}" for i in range(30)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "n.csv").write_text("\n".join(f"{i},{i % 3},{i / 10}" for i in range(30)) + "\n")
    classes = load("csv", path=str(tmp_path / "t.csv"), target="kind")
    assert classes.input_shape == (3,) and classes.num_classes == 2 and "['cat', 'dog']" in classes.source
    scores = load("csv", class_labels=False, path=str(tmp_path / "n.csv"))       # no header: the last column
    assert scores.y_train.dtype == np.float32 and scores.input_shape == (2,)
    by_index = load("csv", path=str(tmp_path / "n.csv"), target=1)
    assert by_index.num_classes == 3
    with pytest.raises(ConfigError, match="no column 'nope'"):
        load("csv", path=str(tmp_path / "t.csv"), target="nope")
    with pytest.raises(ConfigError, match="line 2: 'dog' is not a number"):
        load("csv", class_labels=False, path=str(tmp_path / "t.csv"), target="score")


def test_image_folder_streams_one_class_per_subfolder(tmp_path):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    for label in ("ants", "bees"):
        (tmp_path / label).mkdir()
        for i in range(5):
            pixels = tf.constant(rng.integers(0, 255, (10, 12, 3)).astype("uint8"))
            tf.io.write_file(str(tmp_path / label / f"{i}.png"), tf.io.encode_png(pixels))
    dataset = load("image_folder", path=str(tmp_path), image_size=[8, 8], validation_split=0.2)
    assert dataset.streamed and dataset.num_classes == 2 and dataset.input_shape == (8, 8, 3)
    assert dataset.examples("train") + dataset.examples("validation") == 10
    x, _ = dataset.first(2)
    assert 0.0 <= x.min() and x.max() <= 1.0


def test_an_offline_keras_dataset_says_where_to_put_the_file(tmp_path, monkeypatch):
    import keras.src.backend.config as keras_config

    import hpo.data.keras_datasets as keras_datasets
    monkeypatch.setattr(keras_config, "_KERAS_DIR", str(tmp_path))     # an empty cache
    monkeypatch.setattr(keras_datasets, "NETWORK_TIMEOUT_S", 1.0)
    with pytest.raises(ConfigError) as caught:
        LOADERS["boston_housing"]()
    assert caught.value.key == "data.dataset"
    assert f"put it at {tmp_path / 'datasets' / 'boston_housing.npz'}" in str(caught.value)



@pytest.mark.slow
def test_streamed_splits_train_on_the_fit_engine_as_on_the_compiled_one(tmp_path, capsys):
    """The fit engine reads a streamed epoch batch by batch (`WholeStream`), and scores the
    same trial as the compiled engine: same seeded weights, same batches in the stream's own
    order, so only the order of float32 sums differs (see tests/training/test_engines.py).
    Each search loads the data once: the inline trainer trains on what the pre-flight loaded."""
    from hpo.study import Study
    from tests.support import data_tasks

    values = {}
    for engine in ("compiled", "fit"):
        data_tasks.STREAM_LOADS[0] = 0
        path = tmp_path / f"{engine}.yaml"
        path.write_text(textwrap.dedent(DATA_TASK.format(loader="stream_splits")) +
                        f"training: {{engine: {engine}, compile: graph}}\n")
        study_dir = tmp_path / engine
        code = main(["search", str(path), "--study-dir", str(study_dir)])
        output = "".join(capsys.readouterr())
        assert code == 0, output
        assert data_tasks.STREAM_LOADS[0] == 1
        assert f"trains with the {engine} engine: training.engine is {engine}" in (study_dir / "hpo.log").read_text()
        study = Study.open(study_dir, read_only=True)
        (trial,) = study.trials()
        assert trial.state.value == "complete", trial.error
        values[engine] = [m for _, _, m in study.epochs(trial.trial_id)][-1]
    for name in ("loss", "accuracy", "val_loss", "val_accuracy"):
        assert values["fit"][name] == pytest.approx(values["compiled"][name], rel=1e-4, abs=1e-6), name
