"""The Python face as users write it (issue 59): schedules that cannot run, builders that
return something else or cannot travel to workers, data search cannot read, every searcher,
a rerun of a finished search, Ctrl-C. Each error is raised before any file is written and
names the Python argument, never a YAML key or a CLI flag. Tiny data, one or two epochs."""

import logging
import os
import signal
import threading

import numpy as np
import pytest

import hpo
import hpo.keras_tuner as kt
from hpo.registry import default_algorithm
from hpo.search import SEARCHERS
from hpo.study import DB_NAME, Study

CLI_WORDS = ("--study-dir", "output.dir", "--fresh", "search.", "execution.")


@pytest.fixture(scope="module")
def tiny():
    """64 examples of 8 features, two classes: x, y."""
    rng = np.random.default_rng(0)
    return rng.normal(size=(64, 8)).astype("float32"), rng.integers(0, 2, 64)


def mlp(hp, units=(8, 16)):
    import keras
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(hp.Choice("units", list(units)), activation="relu"),
                              keras.layers.Dense(2, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def refused(tmp_path, tuner, tiny, message, kind=ValueError, **search):
    x, y = tiny
    arguments = {"x": x, "y": y, "validation_data": (x, y), "verbose": 0, **search}
    with pytest.raises(kind, match=message) as caught:
        tuner.search(**arguments)
    assert not any(word in str(caught.value) for word in CLI_WORDS), str(caught.value)
    assert not any(tmp_path.iterdir()), "nothing is written"
    return str(caught.value)


def folder(tmp_path):
    return {"directory": str(tmp_path), "project_name": "p"}


def unconfigured_logging(monkeypatch) -> None:
    """As in a script or a notebook, no logging is set up (pytest's capture handler, added to
    the root logger for the test's call, and what an in-process `hpo` command of an earlier
    test left on the `hpo` logger are put aside), so search(verbose=1) prints its own lines
    on stdout."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    hpo_logger = logging.getLogger("hpo")
    monkeypatch.setattr(hpo_logger, "handlers", [])
    monkeypatch.setattr(hpo_logger, "propagate", True)
    monkeypatch.setattr(hpo_logger, "level", logging.NOTSET)


@pytest.mark.parametrize("make, message", [
    (lambda d: kt.Hyperband(mlp, objective="val_accuracy", max_epochs=0, **d),
     r"Hyperband\(\), argument 'max_epochs': expected max_epochs >= 1 \(a whole number of epochs\), got 0"),
    (lambda d: kt.Hyperband(mlp, objective="val_accuracy", max_epochs=3, factor=1, **d),
     r"Hyperband\(\), argument 'factor': expected factor >= 2 \(the halving rate"),
    (lambda d: kt.RandomSearch(mlp, objective="val_accuracy", max_trials=0, **d),
     r"RandomSearch\(\), argument 'max_trials': expected max_trials >= 1, got 0"),
    (lambda d: hpo.Tuner(lambda c: mlp(kt.HyperParameters()), {"units": {"type": "choice", "values": [8, 16]}},
                         max_epochs=9, min_epochs=0, **d),
     r"Tuner\(\), argument 'min_epochs': expected min_epochs >= 1"),
    (lambda d: hpo.Tuner(lambda c: mlp(kt.HyperParameters()), {"units": {"type": "choice", "values": [8, 16]}},
                         max_epochs=3, min_epochs=9, **d),
     r"Tuner\(\), argument 'min_epochs': expected min_epochs <= max_epochs"),
    (lambda d: kt.Hyperband(mlp, objective="val_accuracy", max_epochs=3, hyperband_iterations=0, **d),
     r"Hyperband\(\), argument 'hyperband_iterations': expected hyperband_iterations >= 1, got 0"),
    (lambda d: kt.Hyperband(mlp, objective="val_accuracy", max_epochs=3, workers=None, **d),
     r"Hyperband\(\), argument 'workers': expected workers >= 1, got None"),
])
def test_a_schedule_that_cannot_run_is_refused_naming_the_python_argument(tmp_path, tiny, make, message):
    refused(tmp_path, make(folder(tmp_path)), tiny, message)


@pytest.mark.parametrize("several, message", [
    ("list of inputs", r"x: several arrays \(a list of 2\) are not supported by the Keras Tuner face: a model "
                       r"with several inputs or outputs runs with `hpo search`"),
    ("list of targets", r"y: several arrays \(a list of 2\)"),
    ("dataset of dicts", r"x: a dataset whose elements hold several arrays \(a dict of 2\)"),
])
def test_several_input_or_target_arrays_are_refused_saying_where_they_run(tmp_path, tiny, several, message):
    import tensorflow as tf

    x, y = tiny
    arguments = {"list of inputs": {"x": [x[:, :4], x[:, 4:]]}, "list of targets": {"y": [y, y]},
                 "dataset of dicts": {"x": tf.data.Dataset.from_tensor_slices(({"a": x, "b": x}, y)).batch(16),
                                      "y": None,
                                      "validation_data": tf.data.Dataset.from_tensor_slices((x, y)).batch(16)}}
    tuner = kt.RandomSearch(mlp, objective="val_accuracy", max_trials=1, **folder(tmp_path))
    refused(tmp_path, tuner, tiny, message, **arguments[several])


def test_a_batch_larger_than_the_training_examples_is_refused_before_anything_is_written(tmp_path, tiny):
    tuner = kt.RandomSearch(mlp, objective="val_accuracy", max_trials=1, **folder(tmp_path))
    refused(tmp_path, tuner, tiny, r"search\(batch_size=\)': a batch of 500 is larger than the 64 training examples "
            r"given to search, so every trial would fail; expected a batch_size of at most 64", batch_size=500)


def test_a_column_of_class_indices_trains_as_keras_fit_takes_it(tmp_path, tiny):
    x, y = tiny
    tuner = kt.RandomSearch(mlp, objective="val_accuracy", max_trials=1, **folder(tmp_path))
    tuner.search(x, y.reshape(-1, 1), validation_data=(x, y.reshape(-1, 1)), epochs=1, verbose=0)
    assert [t.status for t in tuner.oracle.trials.values()] == ["COMPLETED"]


def test_labels_that_are_no_class_indices_are_refused_naming_searchs_data_not_a_loader(tmp_path, tiny):
    x, y = tiny
    tuner = kt.RandomSearch(mlp, objective="val_accuracy", max_trials=1, **folder(tmp_path))
    message = refused(tmp_path, tuner, tiny, r"the data given to search cannot be used: search's training data "
                      r"\(x, y\) holds labels of shape \(64,\) and dtype int64; expected one class index",
                      y=y - 5)
    assert "hpo.tuner.data" not in message


def test_a_learning_rate_the_optimizer_does_not_follow_is_refused_though_its_default_matches(tmp_path, tiny):
    import keras

    def unused_rate(hp):
        hp.Float("learning_rate", 1e-3, 1e-2, sampling="log")     # declared; the optimizer keeps its own
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2, activation="softmax")])
        model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
        return model
    tuner = kt.RandomSearch(unused_rate, objective="val_accuracy", max_trials=2, **folder(tmp_path))
    refused(tmp_path, tuner, tiny, r"hyperparameter 'learning_rate' has the name of a setting hpo's trainer reads "
            r"\(the optimizer\) but another value")


def test_a_batch_size_hyperparameter_is_told_where_the_batch_size_comes_from(tmp_path, tiny):
    def batch_size_in_the_model(hp):
        hp.Int("batch_size", 16, 64, step=16)
        return mlp(hp)
    tuner = kt.RandomSearch(batch_size_in_the_model, objective="val_accuracy", max_trials=1, **folder(tmp_path))
    refused(tmp_path, tuner, tiny, r"hyperparameter 'batch_size' has the name of a setting hpo's trainer takes from "
            r"search\(batch_size=\), not from build_model; rename it")


def test_a_build_model_returning_a_dict_is_told_it_returned_a_dict(tmp_path, tiny):
    def returns_a_dict(hp):
        return {"units": hp.Int("units", 8, 16)}

    tuner = kt.RandomSearch(returns_a_dict, objective="val_accuracy", max_trials=1, **folder(tmp_path))
    refused(tmp_path, tuner, tiny, "build_model returned a dict, expected a keras.Model")


def test_data_search_cannot_read_is_refused_saying_what_to_pass(tmp_path, tiny):
    import tensorflow as tf

    x, y = tiny
    tuner = kt.RandomSearch(mlp, objective="val_accuracy", max_trials=1, **folder(tmp_path))
    unbatched = tf.data.Dataset.from_tensor_slices((x, y))
    refused(tmp_path, tuner, tiny, r"the dataset yields single examples .* pass x=dataset\.batch\(32\)",
            x=unbatched, y=None, validation_data=unbatched.batch(16))

    def batches():
        yield x[:32], y[:32]

    refused(tmp_path, tuner, tiny, r"a generator cannot be searched over: .* Pass arrays \(x, y\), or a batched "
                                   r"tf\.data\.Dataset", x=batches())
    refused(tmp_path, tuner, tiny, r"x has 64 examples but y has 10; pass one target per example", y=y[:10])


def test_a_study_folder_that_is_a_file_names_directory_and_project_name(tmp_path, tiny):
    (tmp_path / "p").write_text("")
    tuner = kt.RandomSearch(mlp, objective="val_accuracy", max_trials=1, **folder(tmp_path))
    x, y = tiny
    with pytest.raises(ValueError, match="is a file; expected a study folder: choose another directory= or "
                                         "project_name=") as caught:
        tuner.search(x, y, validation_data=(x, y), verbose=0)
    assert not any(word in str(caught.value) for word in CLI_WORDS)


def test_every_searcher_is_accepted_by_both_faces_from_one_list():
    assert set(SEARCHERS) == set(kt.CLASSES)
    for name in SEARCHERS:
        assert hpo.Tuner(mlp, algorithm=name).algorithm == name
        assert kt.CLASSES[name](mlp, objective="val_accuracy").algorithm == name
    # Left out, the algorithm is the CLI's default for the backend the workers pick.
    assert [hpo.Tuner(mlp, **kw).algorithm for kw in ({}, {"workers": 2}, {"scheduler": "tcp://a:1"})] == \
        [default_algorithm("inline"), default_algorithm("local"), default_algorithm("dask")] == \
        ["bohb", "async_bohb", "async_bohb"]
    with pytest.raises(ValueError, match=r"Tuner\(algorithm='freeze_thow'\): expected one of .*did you mean "
                                         r"'freeze_thaw'"):
        hpo.Tuner(mlp, algorithm="freeze_thow")


@pytest.mark.slow
@pytest.mark.parametrize("face", ["native", "keras_tuner"])
def test_freeze_thaw_searches_from_both_faces(tmp_path, tiny, face):
    x, y = tiny
    if face == "native":
        tuner = hpo.Tuner(lambda c: mlp(kt.HyperParameters(values=c)),
                          {"units": {"type": "choice", "values": [8, 16]}}, algorithm="freeze_thaw",
                          objective="val_accuracy", max_epochs=3, max_trials=4, **folder(tmp_path))
    else:
        tuner = kt.FreezeThaw(mlp, objective="val_accuracy", max_epochs=3, **folder(tmp_path))
    tuner.search(x, y, validation_data=(x, y), verbose=0)
    trials = tuner.oracle.trials.values()
    assert len(trials) == (4 if face == "native" else 6)        # kt: Hyperband's count for 1..3 epochs
    assert all(t.status == "COMPLETED" for t in trials)
    assert tuner.summary_.stopped_because == "max_trials"


def test_a_finished_search_run_again_says_it_is_complete_and_how_to_extend_it(tmp_path, tiny, monkeypatch, capsys):
    unconfigured_logging(monkeypatch)
    x, y = tiny
    tuner = kt.RandomSearch(mlp, objective="val_accuracy", max_trials=2, **folder(tmp_path))
    tuner.search(x, y, validation_data=(x, y), epochs=1, verbose=0)
    capsys.readouterr()
    again = kt.RandomSearch(mlp, objective="val_accuracy", max_trials=2, **folder(tmp_path))
    again.search(x, y, validation_data=(x, y), epochs=1, verbose=1)
    out = capsys.readouterr().out
    assert f"[hpo] the study in {tmp_path / 'p'} is complete: it has run 2 trials (max_trials=2). To extend it, " \
           "pass max_trials=4 (its finished trials are kept); overwrite=True starts afresh" in out
    assert again.summary_.trials_finished_now == 0
    smaller = kt.RandomSearch(mlp, objective="val_accuracy", max_trials=1, **folder(tmp_path))
    smaller.search(x, y, validation_data=(x, y), epochs=1, verbose=1)
    assert "is complete: it has run 2 trials (max_trials=1). To extend it, pass max_trials=4" in capsys.readouterr().out


def test_an_epochs_hyperband_does_not_use_is_said_on_the_console_and_in_the_studys_log(tmp_path, tiny, monkeypatch,
                                                                                     capsys):
    unconfigured_logging(monkeypatch)
    x, y = tiny
    tuner = kt.Hyperband(mlp, objective="val_accuracy", max_epochs=2, factor=2, **folder(tmp_path))
    tuner.search(x, y, validation_data=(x, y), epochs=50, verbose=1)
    said = "search(epochs=50) is not used: Hyperband trains up to max_epochs=2"
    assert f"[hpo] {said}" in capsys.readouterr().out
    assert said in (tmp_path / "p" / "hpo.log").read_text()


def test_overwrite_shows_no_trials_of_the_study_it_will_move_aside_until_it_searches(tmp_path, tiny, capsys):
    x, y = tiny
    kt.RandomSearch(mlp, objective="val_accuracy", max_trials=2, **folder(tmp_path)).search(
        x, y, validation_data=(x, y), epochs=1, verbose=0)
    fresh = kt.RandomSearch(mlp, objective="val_accuracy", max_trials=1, overwrite=True, **folder(tmp_path))
    assert fresh.oracle.trials == {} and fresh.get_best_models(1) == []
    fresh.search(x, y, validation_data=(x, y), epochs=1, verbose=0)
    assert len(fresh.oracle.trials) == 1 and len(list(tmp_path.glob("p.old-*"))) == 1


def test_a_tuner_that_leaves_out_the_algorithm_resumes_a_study_with_its_own(tmp_path, tiny):
    # A study run with another algorithm (as one made before the default was BOHB): the
    # script run again, algorithm still left out, resumes it rather than refusing the change.
    x, y = tiny
    space = {"units": {"type": "choice", "values": [8, 16]}}

    def build(config):
        return mlp(kt.HyperParameters(values=config))
    hpo.Tuner(build, space, algorithm="hyperband", max_epochs=2, max_trials=2, **folder(tmp_path)).search(
        x, y, validation_data=(x, y), verbose=0)
    again = hpo.Tuner(build, space, max_epochs=2, max_trials=3, **folder(tmp_path))
    assert again.algorithm == "bohb"                   # constructing reads nothing
    again.search(x, y, validation_data=(x, y), verbose=0)
    assert again.algorithm == "hyperband" and again.summary_.trials_finished_now == 1
    study = Study.open(tmp_path / "p", read_only=True)
    try:
        assert study.experiment()["search"]["algorithm"] == "hyperband" and len(study.trials()) == 3
    finally:
        study.close()


def test_ctrl_c_raises_keyboard_interrupt_once_the_study_is_safe_and_says_once_how_to_resume(tmp_path, tiny,
                                                                                               monkeypatch, capsys):
    unconfigured_logging(monkeypatch)
    x, y = tiny

    fired = []

    def interrupted_in_its_second_trial(hp):
        # Armed once the study holds a finished trial (read from the study, not from a log line,
        # which the logger state an earlier test in this process left may keep from a handler):
        # the next build is a running trial's.
        if not fired and (tmp_path / "p" / DB_NAME).exists():
            study = Study.open(tmp_path / "p", read_only=True)
            try:
                finished = [t for t in study.trials() if t.state.finished]
            finally:
                study.close()
            if finished:
                fired.append(True)
                os.kill(os.getpid(), signal.SIGINT)
        return wide(hp)

    tuner = kt.RandomSearch(interrupted_in_its_second_trial, objective="val_accuracy", max_trials=4,
                            **folder(tmp_path))
    # A script starts with Python's own Ctrl-C handler; this test process may not have it (a
    # process started in the background ignores SIGINT, and so do the workers it forks).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            tuner.search(x, y, validation_data=(x, y), epochs=1, verbose=1)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert fired
    out, err = capsys.readouterr()
    lines = [line for line in (out + err).splitlines() if "interrupt" in line]
    assert len(lines) == 1, out + err
    assert lines[0].startswith(f"[hpo] search interrupted: the study in {tmp_path / 'p'} is saved; run search "
                               f"again (or the script) to resume it; trial 1 will run again")
    # Safe: the study resumes, and the interrupted trial runs again.
    resumed = kt.RandomSearch(wide, objective="val_accuracy", max_trials=4, **folder(tmp_path))
    resumed.search(x, y, validation_data=(x, y), epochs=1, verbose=0)
    assert sorted(t.status for t in resumed.oracle.trials.values()) == ["COMPLETED"] * 4


def wide(hp):
    """`mlp` with four configs, so that a random search of four trials runs four."""
    return mlp(hp, units=(8, 12, 16, 24))


def closes_over_a_lock():
    lock = threading.Lock()

    def build_model(hp):
        with lock:
            return mlp(hp)
    return build_model


def test_a_build_model_that_cannot_be_pickled_is_refused_before_any_file_naming_the_object(tmp_path, tiny):
    tuner = kt.RandomSearch(closes_over_a_lock(), objective="val_accuracy", max_trials=2, workers=2,
                            **folder(tmp_path))
    message = refused(tmp_path, tuner, tiny, r"build_model cannot be sent to the worker processes \(workers=2\): "
                                             r"lock, which it refers to \(.*build_model -> lock\), is a _thread.lock")
    assert "Create it inside build_model (each worker then makes its own), or use workers=1." in message


def test_a_build_model_writing_to_an_open_file_is_refused_naming_the_file(tmp_path, tiny):
    log_path = tmp_path.parent / f"{tmp_path.name}-builds.txt"
    with open(log_path, "w") as log_file:
        def build_model(hp):
            log_file.write("built\n")
            return mlp(hp)

        tuner = kt.RandomSearch(build_model, objective="val_accuracy", max_trials=2, workers=2, **folder(tmp_path))
        refused(tmp_path, tuner, tiny, rf"log_file, which it refers to \(.*build_model -> log_file\), is a "
                                       rf"_io.TextIOWrapper \(the file '{log_path}' opened with mode 'w'\), and that "
                                       rf"cannot be pickled \(PicklingError: Cannot pickle files")


def test_a_build_model_carrying_a_large_global_array_is_warned_naming_the_array(caplog, monkeypatch):
    """A script's build_model that reads a global array (for its shape) pickles with the whole
    array, sent to every worker at each start: the warning names the array and its size."""
    from hpo.tuner.shipping import LARGE_BUILD_BYTES, check_shippable

    # An in-process `hpo` command of an earlier test may have turned the `hpo` logger's
    # propagation off, which would keep its records from caplog's handler on the root.
    monkeypatch.setattr(logging.getLogger("hpo"), "propagate", True)

    script = {"__name__": "__main__", "x_train": np.zeros(LARGE_BUILD_BYTES // 2, "float32")}
    exec("def build_model(hp):\n    return x_train.shape[1:]\n", script)       # as in a script's __main__
    with caplog.at_level(logging.WARNING, logger="hpo.tuner"):
        check_shippable(script["build_model"], "workers=2")
    message = "\n".join(r.getMessage() for r in caplog.records)
    assert "build_model pickles to 2.1 MB, copied to every worker process (workers=2)" in message
    assert "2.1 MB of it is x_train (build_model -> x_train, a numpy.ndarray)" in message

    caplog.clear()
    small = {"__name__": "__main__", "input_shape": script["x_train"].shape[1:]}
    exec("def build_model(hp):\n    return input_shape\n", small)
    with caplog.at_level(logging.WARNING, logger="hpo.tuner"):
        check_shippable(small["build_model"], "workers=2")
    assert not caplog.records


def test_a_changed_space_on_resume_is_refused_with_the_differences_in_python_terms(tmp_path, tiny):
    x, y = tiny
    kt.RandomSearch(mlp, objective="val_accuracy", max_trials=1, **folder(tmp_path)).search(
        x, y, validation_data=(x, y), verbose=0)

    def wider(hp):
        return mlp(hp, units=(8, 32))

    with pytest.raises(ValueError, match="Differences") as caught:
        kt.RandomSearch(wider, objective="val_accuracy", max_trials=1, **folder(tmp_path)).search(
            x, y, validation_data=(x, y), verbose=0)
    assert "space.units.values" in str(caught.value)
    assert "Pass overwrite=True to start a new study there" in str(caught.value)
    assert not any(word in str(caught.value) for word in ("--study-dir", "output.dir", "--fresh"))
    # Other epochs, other data: said as search's arguments, not as the study's keys.
    with pytest.raises(ValueError, match="Differences") as caught:
        kt.RandomSearch(mlp, objective="val_accuracy", max_trials=1, **folder(tmp_path)).search(
            x[:48], y[:48], validation_data=(x, y), epochs=2, verbose=0)
    differences = str(caught.value).split("Differences (stored -> now):\n")[1]
    assert differences.count("search(epochs=): 1.0 -> 2.0") == 1
    assert "the data given to search (x, y, validation_data or validation_split)" in differences
    assert "search." not in differences and "data.options" not in differences, differences


def test_max_consecutive_failed_trials_stops_the_search_as_in_keras_tuner(tmp_path, tiny):
    """Keras Tuner raises a RuntimeError once that many trials in a row failed; so does hpo,
    and the study keeps the trials run so far."""
    x, y = tiny

    def only_the_default_builds(hp):
        if hp.Choice("units", [8, 16, 32, 64]) != 8:
            raise ValueError("this width does not build")
        return mlp(hp, units=(8, 16, 32, 64))

    tuner = kt.RandomSearch(only_the_default_builds, objective="val_accuracy", max_trials=30, seed=0,
                            max_consecutive_failed_trials=2, **folder(tmp_path))
    with pytest.raises(RuntimeError, match=r"the last 2 trials all failed; the last error was: .*this width does "
                                           r"not build.*max_consecutive_failed_trials=2"):
        tuner.search(x, y, validation_data=(x, y), epochs=1, verbose=0)
    statuses = [t.status for _, t in sorted(tuner.oracle.trials.items())]
    assert statuses[-2:] == ["FAILED", "FAILED"] and len(statuses) < 30


def test_a_damaged_study_is_refused_saying_overwrite_starts_anew_and_stays_as_it_was(tmp_path, tiny):
    x, y = tiny
    study = tmp_path / folder(tmp_path)["project_name"]
    study.mkdir()
    (study / DB_NAME).write_bytes(b"")
    with pytest.raises(ValueError) as caught:
        kt.RandomSearch(mlp, objective="val_accuracy", max_trials=1, **folder(tmp_path)).search(
            x, y, validation_data=(x, y), verbose=0)
    assert "empty" in str(caught.value) and "not deleted): overwrite=True." in str(caught.value)
    assert not any(word in str(caught.value) for word in CLI_WORDS + ("hpo.optimize",))
    assert (study / DB_NAME).read_bytes() == b""
