import textwrap
from pathlib import Path

import pytest

from hpo.config import apply_overrides, binding_differences, diff_experiments, experiment_from_dict, load_experiment
from hpo.errors import ConfigError, UserInputError

MINIMAL = {"name": "t", "data": {"dataset": "digits"}, "space": {"units": {"type": "int", "low": 8, "high": 64}}}


def write(tmp_path, text):
    path = tmp_path / "exp.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_minimal_experiment_gets_defaults():
    e = experiment_from_dict(MINIMAL)
    assert e.search.algorithm == "bohb"
    assert e.search.direction == "maximize"   # val_accuracy is maximised by default
    assert e.training.compile == "auto"
    assert str(e.study_dir) == "runs/t"


def test_parallel_backends_default_to_asynchronous_scheduling():
    # Synchronous BOHB would leave workers idle at its rung barriers.
    for backend in ("local", "dask"):
        assert experiment_from_dict({**MINIMAL, "execution": {"backend": backend}}).search.algorithm == \
            "async_bohb"
    explicit = {**MINIMAL, "execution": {"backend": "local"}, "search": {"algorithm": "hyperband"}}
    assert experiment_from_dict(explicit).search.algorithm == "hyperband"


def test_fuse_takes_a_group_size_or_auto():
    assert experiment_from_dict({**MINIMAL, "training": {"fuse": "auto"}}).training.fuse == "auto"
    assert experiment_from_dict({**MINIMAL, "training": {"fuse": 8}}).training.fuse == 8
    assert experiment_from_dict(MINIMAL).training.fuse == 1
    for backend in ("inline", "local", "dask"):      # every backend fuses (per worker)
        assert experiment_from_dict({**MINIMAL, "training": {"fuse": 4},
                                     "execution": {"backend": backend}}).training.fuse == 4


def test_direction_follows_a_loss_objective():
    e = experiment_from_dict({**MINIMAL, "search": {"objective": "val_loss"}})
    assert e.search.direction == "minimize"


def test_repository_experiments_are_valid():
    names = sorted(str(p) for p in (Path(__file__).resolve().parents[2] / "experiments").glob("*.yaml"))
    assert {Path(n).name for n in names} >= {"mnist.yaml", "mnist_fused.yaml", "smoke.yaml"}
    for name in names:
        assert load_experiment(name).name


def test_scientific_notation_is_a_number(tmp_path):
    path = write(tmp_path, """
        name: t
        data: {dataset: digits}
        space: {lr: {type: float, low: 1e-4, high: 1e-2, log: true}}
        """)
    assert load_experiment(path).space["lr"].low == pytest.approx(1e-4)


def test_unknown_key_names_file_line_and_suggestion(tmp_path):
    path = write(tmp_path, """
        name: t
        data: {dataset: digits}
        space: {units: {type: int, low: 8, high: 64}}
        serch: {algorithm: random}
        """)
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    text = str(info.value)
    assert str(path) in text and "line 5" in text and "did you mean 'search'" in text


def test_nested_error_points_at_the_line(tmp_path):
    path = write(tmp_path, """
        name: t
        data: {dataset: digits}
        space:
          units: {type: int, low: 8, high: 64}
          lr: {type: float, low: 0, high: 1, log: true}
        """)
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    assert info.value.line == 6 and info.value.key == "space.lr.low"


def test_yaml_syntax_error_gives_line_and_column(tmp_path):
    path = write(tmp_path, "name: t\ndata: {dataset: digits\nspace: {}\n")
    with pytest.raises(UserInputError, match=r"line \d+, column \d+"):
        load_experiment(path)


def test_deep_brackets_are_refused_at_their_line_and_quoted_or_commented_ones_do_not_count(tmp_path):
    from hpo.config.yaml_source import MAX_FLOW_DEPTH, parse_yaml

    deep = "[" * (MAX_FLOW_DEPTH + 1) + "]" * (MAX_FLOW_DEPTH + 1)
    path = write(tmp_path, f"name: t\ndata: {{dataset: digits}}\nextra: {deep}\n")
    with pytest.raises(ConfigError, match=f"nested too deeply: more than {MAX_FLOW_DEPTH} levels .* at line 3"):
        load_experiment(path)
    at_the_limit = "[" * MAX_FLOW_DEPTH + "]" * MAX_FLOW_DEPTH
    assert parse_yaml(f"x: {at_the_limit}") is not None
    many = "[" * (2 * MAX_FLOW_DEPTH)
    assert parse_yaml(f"a: '{many}'\nb: \"{many}\\\"\"\nc: 1  # {many}\nd: it's [fine]\n") == {
        "a": many, "b": many + '"', "c": 1, "d": "it's [fine]"}


@pytest.mark.parametrize("section, value, fragment", [
    ({"search": {"algorithm": "bohbb"}}, None, "did you mean 'bohb'"),
    ({"model": {"builder": "resnet"}}, None, "'mlp', 'cnn'"),
    ({"data": {"dataset": "cifar"}}, None, "'mnist', 'digits', 'synthetic'"),
    ({"training": {"compile": "jit"}}, None, "'auto', 'xla', 'graph', 'eager'"),
    ({"search": {"min_budget": 10, "max_budget": 3}}, None, "min_budget <= max_budget"),
    ({"search": {"eta": 1.5}}, None, "eta >= 2"),
    ({"search": {"max_trials": "many"}}, None, "a whole number"),
    ({"data": {"dataset": "nosuchpkg.mod:load"}}, None, "cannot import module 'nosuchpkg.mod'"),
    ({"execution": {"backend": "ray"}}, None, "'inline', 'local', 'dask'"),
    ({"execution": {"scheduler": "tcp://h:8786"}}, None, "only applies to backend 'dask'"),
    ({"execution": {"max_retries": -1}}, None, "a value >= 0"),
    ({"training": {"fuse": 0}}, None, "a whole number from 1 to 64, or 'auto'"),
    ({"training": {"fuse": "many"}}, None, "training.fuse.*a whole number from 1 to 64, or 'auto'"),
])
def test_bad_values_are_rejected_with_what_was_expected(section, value, fragment):
    raw = {**MINIMAL, **{k: {**MINIMAL.get(k, {}), **v} for k, v in section.items()}}
    with pytest.raises(ConfigError, match=fragment):
        experiment_from_dict(raw)


@pytest.mark.parametrize("space, params, key, fragment", [
    ({"batch_size": {"type": "int", "low": 0, "high": 4}}, {}, "space.batch_size.low",
     "an integer >= 1 .the trainer's batch_size., got 0"),
    ({"batch_size": {"type": "choice", "values": [16, 32.5]}}, {}, "space.batch_size.values", "got 32.5"),
    ({"learning_rate": {"type": "float", "low": -1, "high": -0.5}}, {}, "space.learning_rate.low",
     "a number >= 0 .the trainer's learning_rate., got -1.0"),
    ({"momentum": {"type": "float", "low": 0.5, "high": 2.0}}, {}, "space.momentum.high", "<= 1"),
    ({}, {"momentum": 5}, "model.params.momentum", "<= 1 .the trainer's momentum., got 5"),
    ({"batch_size": {"type": "choice", "values": [16.0, 32.0]}}, {}, "space.batch_size.values", "got 16.0"),
    ({"beta_1": {"type": "float", "low": 0.5, "high": 1.5}}, {}, "space.beta_1.high", "<= 1"),
    ({"epsilon": {"type": "choice", "values": [1e-7, -1.0]}}, {}, "space.epsilon.values", "got -1.0"),
    ({}, {"weight_decay": -0.1}, "model.params.weight_decay", ">= 0"),
])
def test_a_trainer_setting_searched_or_fixed_out_of_its_range_is_refused_before_training(space, params, key,
                                                                                          fragment):
    raw = {**MINIMAL, "space": {**MINIMAL["space"], **space}, "model": {"builder": "mlp", "params": params}}
    with pytest.raises(ConfigError, match=fragment) as caught:
        experiment_from_dict(raw)
    assert caught.value.key == key
    # A plain function's parameters are its own: hpo.optimize's objective reads them itself.
    no_data = {k: v for k, v in raw.items() if k not in ("data", "model")}
    if space:
        experiment_from_dict(no_data, needs_data=False)


def test_keras_short_name_acc_is_a_metric_and_val_acc_is_maximised():
    raw = {**MINIMAL, "training": {"metrics": ["acc"]}, "search": {"objective": "val_acc"}}
    experiment = experiment_from_dict(raw)
    assert experiment.training.metrics == ("acc",) and experiment.search.direction == "maximize"


def test_an_error_in_a_value_set_by_set_names_the_option_not_a_line_of_the_file(tmp_path):
    path = write(tmp_path, """\
        name: t
        data: {dataset: digits}
        space:
          units: {type: int, low: 8, high: 64}
        search: {eta: 2}
        """)
    with pytest.raises(ConfigError) as caught:
        load_experiment(path, ["search.eta=1"])
    assert str(caught.value).startswith(f"{path} (--set search.eta=1), key 'search.eta': expected eta >= 2")
    assert "line" not in str(caught.value).split(":")[0]
    with pytest.raises(ConfigError) as caught:      # the file's own value keeps its line
        load_experiment(write(tmp_path, "name: t\ndata: {dataset: digits}\nspace: {}\nsearch: {eta: 1}\n"))
    assert ", line " in str(caught.value)


def test_overrides_parse_values_as_yaml():
    raw = apply_overrides(MINIMAL, ["search.max_trials=5", "search.eta=2", "training.learning_rate=1e-3",
                                    "output.dir=/tmp/x"])
    e = experiment_from_dict(raw)
    assert e.search.max_trials == 5 and e.search.eta == 2.0
    assert e.training.learning_rate == pytest.approx(1e-3)
    assert e.output.dir == "/tmp/x"
    assert "search" not in MINIMAL  # the caller's dict is untouched


def test_malformed_override_is_an_error():
    with pytest.raises(ConfigError, match="key.path=value"):
        apply_overrides(MINIMAL, ["search.max_trials"])


def test_overriding_a_field_of_a_parameter_the_space_lacks_names_that_parameter():
    with pytest.raises(ConfigError) as caught:
        apply_overrides(MINIMAL, ["space.unitz.low=0"])
    message = str(caught.value)
    assert "no parameter 'unitz'" in message and "did you mean 'units'" in message and "'type'" not in message
    assert apply_overrides(MINIMAL, ["space.units.low=0"])["space"]["units"]["low"] == 0
    added = apply_overrides(MINIMAL, ["space.width={type: int, low: 1, high: 4}"])    # a whole new one is fine
    assert experiment_from_dict(added).space.names == ["units", "width"]


def test_missing_file_is_user_error(tmp_path):
    with pytest.raises(UserInputError, match="not found"):
        load_experiment(tmp_path / "nope.yaml")


def test_an_option_dropped_is_one_line_naming_it():
    """An empty mapping against a full one: the differing keys, not a line for `{}` too."""
    a = experiment_from_dict({**MINIMAL, "search": {"algorithm": "bohb", "options": {"climbers": 0}}}).to_dict()
    b = experiment_from_dict({**MINIMAL, "search": {"algorithm": "bohb"}}).to_dict()
    assert diff_experiments(a, b) == ["search.options.climbers: 0 -> '<absent>'"]
    assert diff_experiments(b, a) == ["search.options.climbers: '<absent>' -> 0"]
    # Not binding: the resume's replay decides (tests/unit/test_runner_resume.py).
    assert binding_differences(a, b) == []


def test_binding_differences_ignore_resumable_keys():
    a = experiment_from_dict(MINIMAL).to_dict()
    b = experiment_from_dict({**MINIMAL, "search": {"max_trials": 99, "eta": 4}, "name": "renamed",
                              # Fused or not, in a graph or under XLA, so many steps a call: trials train the same.
                              "training": {"fuse": "auto", "compile": "xla", "steps_per_call": 8}}).to_dict()
    diffs = binding_differences(a, b)
    assert diffs == ["search.eta: 3.0 -> 4.0"]


@pytest.mark.parametrize("word, options, meant", [
    ("lgo", ["type", "low", "high", "log", "step"], "log"),           # the same letters: difflib said 'low'
    ("opt", ["lr", "dropout", "optimizer", "units"], "optimizer"),    # the only one it begins: it said 'dropout'
    ("bohbb", ["random", "bohb", "async_bohb"], "bohb"),
    ("val_acc", ["val_accuracy", "val_loss"], "val_accuracy"),
    ("zz", ["units", "lr"], None),
])
def test_a_misspelt_name_is_matched_to_the_one_meant(word, options, meant):
    from hpo.errors import closest, did_you_mean

    assert closest(word, options) == meant
    assert did_you_mean(word, options) == ("" if meant is None else f" (did you mean '{meant}'?)")
