"""`hpo.models.built`: a model without weights until its first call is called once on symbolic
inputs of the data's shapes, whatever their structure; a built model is left as it is."""

import keras
import pytest

from hpo.models import built


class Joined(keras.Model):
    """Reads a dict of one array and a pair of arrays; no build(), a required `training`."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(3)

    def call(self, inputs, training):
        first, second = inputs["pair"]
        return self.dense(keras.ops.concatenate([inputs["image"], first, second], axis=-1))


def test_a_subclassed_model_of_nested_inputs_gets_its_weights_from_their_shapes():
    model = built(Joined(), {"image": (4,), "pair": ((2,), (1,))})
    assert model.built and [tuple(v.shape) for v in model.variables] == [(7, 3), (3,)]


def test_a_sequential_without_an_input_is_built_and_a_built_model_left_alone():
    sequential = built(keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(2)]), (3, 3))
    assert [tuple(v.shape) for v in sequential.variables] == [(9, 2), (2,)]
    inputs = keras.Input((5,))
    functional = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    assert built(functional, (99,)) is functional and functional.input_shape == (None, 5)


def test_a_model_that_cannot_run_on_symbolic_inputs_is_refused_with_the_shape_and_the_cause():
    class Eager(keras.Model):
        def call(self, x):
            return x * float(x.numpy().sum())       # needs values
    with pytest.raises(ValueError, match=r"not built, and calling it on keras.Input of the data's shape \(4,\)") \
            as refused:
        built(Eager(), (4,))
    assert refused.value.__cause__ is not None
