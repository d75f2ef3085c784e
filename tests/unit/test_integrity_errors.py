"""Library callers catch ValueError and TypeError, as with scikit-learn and Optuna."""

import pytest

import hpo
from hpo.errors import ConfigError, ConfigTypeError

SPACE = {"x": {"type": "float", "low": 0, "high": 1}}


def objective(config, budget):
    return config["x"]


def test_a_bad_value_is_a_value_error_naming_the_argument():
    with pytest.raises(ValueError, match=r"hpo.optimize\(\), argument 'max_budget'.*finite") as info:
        hpo.optimize(objective, SPACE, min_budget=1, max_budget=float("nan"))
    assert isinstance(info.value, ConfigError)


def test_a_bad_space_is_a_value_error():
    with pytest.raises(ValueError, match="space.x"):
        hpo.optimize(objective, {"x": {"type": "float", "low": 2, "high": 1}}, min_budget=1, max_budget=3)


def test_a_value_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="argument 'min_budget': expected a number") as info:
        hpo.optimize(objective, SPACE, min_budget="one", max_budget=3)
    assert isinstance(info.value, ConfigTypeError) and isinstance(info.value, ValueError)


def test_a_negative_seed_is_refused():
    with pytest.raises(ValueError, match="argument 'seed'"):
        hpo.optimize(objective, SPACE, min_budget=1, max_budget=3, seed=-1)


def test_an_errors_line_is_its_own_words_past_what_tensorflow_and_keras_wrap_it_in():
    from hpo.errors import ConfigError, error_line
    keras_call = ValueError("Exception encountered when calling Sequential.call().\n\n\x1b[1mInput 0 of layer "
                            "'dense' is incompatible with the layer\x1b[0m\n\nArguments received by Sequential.call():")
    assert error_line(keras_call) == "Input 0 of layer 'dense' is incompatible with the layer"
    assert error_line(RuntimeError("{{function_node __wrapped__Sum}} loss became nan\n[[node]]")) == "loss became nan"
    assert error_line(ConfigError("bad key", key="a.b")) == "bad key"      # its message, not the located text
    assert error_line(RuntimeError("")) == "RuntimeError"
    assert error_line(ValueError("x" * 400), limit=10) == "x" * 10
