"""VariableWriter: the one-call assign and zero that reused programs reset trials with."""

import keras
import numpy as np
import pytest

from hpo.training.variable_writer import VariableWriter


def test_assigns_and_zeroes_every_variable_of_any_dtype_and_keeps_doing_so():
    weights = keras.Variable(np.ones((3, 4), "float32"))
    steps = keras.Variable(np.array(7, "int64"))
    seeds = keras.Variable(np.array([1, 2], "uint32"))
    writer = VariableWriter([weights, steps, seeds])
    for round_ in range(3):          # the compiled call is reused, with new values each time
        writer.assign([np.full((3, 4), round_ + 0.5, "float32"), np.array(round_, "int64"),
                       np.array([round_, 9], "uint32")])
        np.testing.assert_array_equal(weights.numpy(), np.full((3, 4), round_ + 0.5))
        assert int(steps.numpy()) == round_
        np.testing.assert_array_equal(seeds.numpy(), [round_, 9])
        writer.zero()
        assert not np.any(weights.numpy()) and int(steps.numpy()) == 0 and not np.any(seeds.numpy())
    assert seeds.dtype == "uint32" and steps.dtype == "int64"


def test_wrong_values_are_refused_and_leave_the_variables_alone():
    weights = keras.Variable(np.ones((3, 4), "float32"))
    bias = keras.Variable(np.ones(4, "float32"))
    writer = VariableWriter([weights, bias])
    with pytest.raises(ValueError, match="1 values for 2 variables"):
        writer.assign([np.zeros((3, 4), "float32")])
    with pytest.raises(ValueError, match="shape"):
        writer.assign([np.zeros((4, 4), "float32"), np.zeros(4, "float32")])
    np.testing.assert_array_equal(weights.numpy(), np.ones((3, 4)))
    np.testing.assert_array_equal(bias.numpy(), np.ones(4))
