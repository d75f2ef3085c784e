import math

import numpy as np
import pytest

from hpo.errors import ConfigError
from hpo.space import ChoiceParam, FloatParam, IntParam, SearchSpace, python_values


def test_same_seed_gives_same_samples(space_dict):
    space = SearchSpace.from_dict(space_dict)
    a = [space.sample(np.random.default_rng(3)) for _ in range(5)]
    b = [space.sample(np.random.default_rng(3)) for _ in range(5)]
    assert a == b


def test_samples_stay_in_space_and_conditionals_follow_parent(space_dict):
    space = SearchSpace.from_dict(space_dict)
    rng = np.random.default_rng(0)
    seen_sgd = seen_adam = False
    for _ in range(300):
        config = space.sample(rng)
        assert space.contains(config)
        assert ("momentum" in config) == (config["optimizer"] == "sgd")
        seen_sgd |= config["optimizer"] == "sgd"
        seen_adam |= config["optimizer"] == "adam"
        assert isinstance(config["layers"], int) and 1 <= config["layers"] <= 3
        assert 1e-4 <= config["learning_rate"] <= 1e-2
    assert seen_sgd and seen_adam


def test_parents_are_ordered_before_children():
    space = SearchSpace.from_dict({"m": {"type": "float", "low": 0, "high": 1, "when": {"opt": "sgd"}},
                                   "opt": {"type": "choice", "values": ["adam", "sgd"]}})
    assert space.names == ["opt", "m"]


def test_unit_round_trip_for_every_type():
    rng = np.random.default_rng(1)
    params = [FloatParam("f", low=-2.0, high=5.0), FloatParam("lf", low=1e-4, high=1.0, log=True),
              IntParam("i", low=1, high=7), IntParam("li", low=16, high=1024, log=True),
              ChoiceParam("c", values=("a", "b", "c"))]
    for p in params:
        for _ in range(50):
            value = p.from_unit(rng.random())
            assert p.contains(value)
            back = p.from_unit(p.to_unit(value))
            if isinstance(value, float):
                assert math.isclose(back, value, rel_tol=1e-9, abs_tol=1e-12)
            else:
                assert back == value


def test_int_values_get_equal_shares_of_the_unit_interval():
    p = IntParam("i", low=1, high=3)
    counts = np.bincount([p.from_unit(u) for u in np.linspace(0, 1, 3000, endpoint=False)])
    assert list(counts[1:]) == [1000, 1000, 1000]


def test_inactive_params_are_nan_in_unit_vector(space_dict):
    space = SearchSpace.from_dict(space_dict)
    config = {"layers": 2, "units": 64, "dropout": 0.1, "learning_rate": 1e-3, "optimizer": "adam"}
    vector = space.to_unit(config)
    assert np.isnan(vector[space.names.index("momentum")])
    assert space.from_unit(vector) == pytest.approx(config)


@pytest.mark.parametrize("spec, key, fragment", [
    ({"x": {"type": "float", "low": 1, "high": 1}}, "space.x", "low < high"),
    ({"x": {"type": "float", "low": 0, "high": 1, "log": True}}, "space.x.low", "low > 0"),
    ({"x": {"type": "choice", "values": []}}, "space.x.values", "non-empty"),
    ({"x": {"type": "float", "low": 0, "high": 1, "when": {"opt": "sgd"}}}, "space.x.when", "unknown parameter 'opt'"),
    ({"x": {"type": "flaot", "low": 0, "high": 1}}, "space.x.type", "did you mean 'float'"),
    ({"x": {"type": "int", "low": 0.5, "high": 3}}, "space.x.low", "whole number"),
    ({"x": {"type": "float", "low": 0, "hgh": 1}}, "space.x.hgh", "did you mean 'high'"),
])
def test_invalid_spaces_name_the_key(spec, key, fragment):
    with pytest.raises(ConfigError) as info:
        SearchSpace.from_dict(spec)
    assert info.value.key == key
    assert fragment in str(info.value)


def test_when_value_must_be_a_parent_value():
    with pytest.raises(ConfigError, match="not a possible value"):
        SearchSpace.from_dict({"opt": {"type": "choice", "values": ["adam"]},
                               "m": {"type": "float", "low": 0, "high": 1, "when": {"opt": "sgd"}}})


def test_dict_round_trip(space_dict):
    space = SearchSpace.from_dict(space_dict)
    assert SearchSpace.from_dict(space.to_dict()).to_dict() == space.to_dict()


def test_numeric_strings_from_a_yaml_1_1_loader_are_numbers():
    """`yaml.safe_load` reads `1e-4` as a string; a library caller passing its space straight
    to `from_dict` gets the number the CLI's loader would read. NaN and text stay errors."""
    import yaml

    raw = yaml.safe_load("lr: {type: float, low: 1e-4, high: 1e-1, log: true}\nu: {type: int, low: '8', high: 64}")
    space = SearchSpace.from_dict(raw)
    assert space.to_dict()["lr"]["low"] == 1e-4 and space.to_dict()["u"]["low"] == 8
    for bad in ("nan", "inf", "ten"):
        with pytest.raises(ConfigError, match="'low' must be a number"):
            SearchSpace.from_dict({"x": {"type": "float", "low": bad, "high": 1.0}})


def test_a_condition_on_a_float_parameter_is_refused_since_it_could_never_hold():
    """A sampled float never equals the value named, so its child would never be active."""
    with pytest.raises(ConfigError, match=r"float parameter 'lr'.*'momentum' would never be active") as err:
        SearchSpace.from_dict({"lr": {"type": "float", "low": 0.001, "high": 0.1},
                               "momentum": {"type": "float", "low": 0.0, "high": 0.9, "when": {"lr": 0.01}}})
    assert err.value.key == "space.momentum.when.lr"
    conditioned_on_int = SearchSpace.from_dict({"layers": {"type": "int", "low": 1, "high": 3},
                                                "units_3": {"type": "int", "low": 8, "high": 64,
                                                            "when": {"layers": 3}}})
    assert "units_3" in conditioned_on_int.names


def test_numpy_values_become_python_at_any_depth_and_tuples_keep_their_kind():
    import collections
    Pair = collections.namedtuple("Pair", "low high")
    got = python_values({"a": [np.int64(1), (np.float32(0.5),)], "b": Pair(np.int32(2), np.array([3, 4])), "c": "x"})
    assert got == {"a": [1, (0.5,)], "b": Pair(2, [3, 4]), "c": "x"} and type(got["b"]) is Pair
    assert type(got["a"][0]) is int and type(got["a"][1]) is tuple and type(got["b"].high) is list


@pytest.mark.parametrize("bound, value", [("low", float("nan")), ("high", float("inf")), ("low", float("-inf"))])
def test_a_bound_that_is_not_finite_is_refused_naming_it(bound, value):
    """A NaN bound passes `low >= high`, and the searchers would propose NaN."""
    body = {"type": "float", "low": 0.0, "high": 1.0, bound: value}
    with pytest.raises(ConfigError, match=rf"key 'space.x.{bound}': '{bound}' must be a finite number"):
        SearchSpace.from_dict({"x": body})
    from hpo.search import BOHB
    with pytest.raises(ConfigError, match="must be a finite number"):
        BOHB({"x": body}, min_budget=1, max_budget=9)


def test_a_finite_space_counts_and_lists_its_configs_and_others_do_not():
    finite = SearchSpace.from_dict({"kind": {"type": "choice", "values": ["a", "b"]},
                                    "n": {"type": "int", "low": 1, "high": 3}})
    assert finite.config_count() == 6
    assert finite.every_config() == [{"kind": k, "n": n} for k in "ab" for n in (1, 2, 3)]
    assert SearchSpace.from_dict({"x": {"type": "float", "low": 0.0, "high": 1.0}}).config_count() is None
    conditional = {"kind": {"type": "choice", "values": ["a", "b"]},
                   "n": {"type": "int", "low": 1, "high": 3, "when": {"kind": "b"}}}
    assert SearchSpace.from_dict(conditional).config_count() is None


def test_a_range_wider_than_the_largest_float_is_refused():
    with pytest.raises(ConfigError, match=r"key 'space.x': expected a range narrower than the largest float"):
        SearchSpace.from_dict({"x": {"type": "float", "low": -1e308, "high": 1e308}})
    assert SearchSpace.from_dict({"x": {"type": "float", "low": -1e307, "high": 1e307}}).params[0].high == 1e307


def test_true_and_1_are_two_choices_and_1_and_1_0_one():
    """Python has True == 1: a model keyed by `==` would credit one with the other's results."""
    space = SearchSpace.from_dict({"c": {"type": "choice", "values": ["x", 0, False, 1, True]},
                                   "d": {"type": "choice", "values": [1, 2], "when": {"c": True}}})
    c = space["c"]
    assert [c.index(v) for v in ("x", 0, False, 1, True)] == [0, 1, 2, 3, 4]
    assert c.index(1.0) == c.index(np.int64(1)) == 3 and c.index(np.bool_(True)) == 4
    assert len({c.to_unit(v) for v in c.values}) == 5
    assert space["d"].is_active({"c": True}) and not space["d"].is_active({"c": 1})
    only_one = SearchSpace.from_dict({"c": {"type": "choice", "values": [0, 1]}})
    assert only_one.why_not({"c": True}) and not only_one.why_not({"c": 1.0})
    with pytest.raises(ConfigError, match=r"duplicates: 1 and 1.0 are equal once typed"):
        SearchSpace.from_dict({"c": {"type": "choice", "values": [1, 1.0, True]}})
    with pytest.raises(ConfigError, match=r"duplicates: 8 is listed twice in \[8, 16, 8\]"):
        SearchSpace.from_dict({"c": {"type": "choice", "values": [8, 16, 8]}})


def test_bohb_learns_which_of_false_and_0_is_good():
    from hpo.search import BOHB
    searcher = BOHB({"c": {"type": "choice", "values": ["x", 0, False, 1, True]},
                     "y": {"type": "float", "low": 0, "high": 1}}, seed=0, min_budget=1, max_budget=1)
    for _ in range(80):
        job = searcher.ask()
        searcher.tell(job, (0.0 if job.config["c"] is False else 1.0) + job.config["y"])
    late = [job.config["c"] for job, _ in searcher.history[40:]]
    assert sum(value is False for value in late) >= 30, late


def test_a_space_built_from_a_list_refuses_a_name_listed_twice():
    with pytest.raises(ConfigError, match="parameter 'x' is listed twice"):
        SearchSpace([FloatParam(name="x", low=0, high=1), FloatParam(name="x", low=5, high=6)])


def test_hpo_optimize_takes_0_and_false_as_two_choices():
    """Only hpo's trainer reads false as 0; a function's own config keeps them apart."""
    import hpo
    seen = set()

    def objective(config, budget):
        seen.add(repr(config["c"]))
        return 0.0
    hpo.optimize(objective, {"c": {"type": "choice", "values": [0, False]}}, "random", min_budget=1, max_budget=1,
                 max_trials=2, seed=0)
    assert seen == {"0", "False"}


def test_the_column_wise_round_trip_matches_the_config_one_bit_for_bit():
    """`units_round_trip` and `active_mask` decode a column at a time what `from_unit` and
    `to_unit` do a config at a time, over every kind: log and linear floats and ints, choices
    of strings, booleans and numbers (1 and 1.0 listed as one value), a choice and an int as
    parents, a grandchild, and units that are NaN, outside [0, 1] or at its edges."""
    space = SearchSpace([
        ChoiceParam("opt", values=("sgd", "adam", True, 1, 1.0)),
        IntParam("layers", low=1, high=4),
        FloatParam("lr", low=1e-5, high=0.3, log=True),
        FloatParam("momentum", low=0, high=1, when={"opt": ("sgd", True)}),
        IntParam("units", low=8, high=1024, log=True, when={"layers": (2, 3)}),
        ChoiceParam("nesterov", values=(False, True), when={"opt": ("sgd",)}),
        FloatParam("decay", low=-2.5, high=7, when={"nesterov": (True,)}),
        IntParam("width", low=-3, high=3, when={"units": (8, 9, 1024), "opt": (1, "adam")}),
    ])
    rng = np.random.default_rng(0)
    points = rng.random((400, len(space)))
    points[rng.random(points.shape) < 0.1] = np.nan
    points[rng.random(points.shape) < 0.05] = rng.choice([-0.3, -0.0, 0.0, 1.0, 1.7, np.inf])
    by_config = np.array([space.to_unit(space.from_unit(row)) for row in points])
    np.testing.assert_array_equal(space.units_round_trip(points), by_config)
    assert (space.units_round_trip(points).view(np.int64) == by_config.view(np.int64)).all()
    np.testing.assert_array_equal(space.active_mask(points), ~np.isnan(by_config))
    assert space.active_mask(points).all(axis=0).sum() == 3 and space.active_mask(points).any(axis=0).all()
