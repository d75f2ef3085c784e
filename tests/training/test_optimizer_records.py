"""The registry's optimizer records against Keras: each names a class of keras.optimizers,
its defaults are that class's own (but the learning rate, the experiment's), and the
trainer's optimizer for it is an instance of that class."""

import keras
import numpy as np
import pytest

from hpo.registry import LEARNING_RATE, OPTIMIZERS, Structural
from hpo.training.optimizers import TunableOptimizer, structural_signature


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_each_record_holds_its_keras_class_defaults(name):
    record = OPTIMIZERS[name]
    config = getattr(keras.optimizers, record.keras_class)().get_config()
    for key, default in record.hyperparameters.items():
        if key != "learning_rate":
            assert config[key] == pytest.approx(default), key
    for key, default in record.structural_defaults.items():
        assert config[key] == default, key
    assert record.hyperparameters["learning_rate"] == LEARNING_RATE


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_the_trainers_optimizer_is_the_records_keras_class_at_the_records_defaults(name):
    record = OPTIMIZERS[name]
    tunable = TunableOptimizer({"optimizer": name}, [keras.Variable(np.zeros(3, "float32"))])
    assert isinstance(tunable.optimizer, getattr(keras.optimizers, record.keras_class))
    values = [float(keras.ops.convert_to_numpy(v)) for v in tunable.hyperparameter_variables]
    assert values == pytest.approx(list(record.hyperparameters.values()))
    assert structural_signature({"optimizer": name}) == {"optimizer": name, **record.structural_defaults}


def test_a_structural_key_is_read_as_its_declared_type():
    """RMSprop's momentum is a float even where a value arrives as an int or a string; SGD's
    nesterov a bool; a record cannot declare a default of another type than its key's."""
    assert OPTIMIZERS["rmsprop"].structural_values({"momentum": 0.6}) == {"momentum": 0.6}
    assert OPTIMIZERS["rmsprop"].structural_values({"momentum": 1}) == {"momentum": 1.0}
    assert OPTIMIZERS["sgd"].structural_values({}) == {"nesterov": False}
    assert OPTIMIZERS["sgd"].structural_values({"nesterov": 1}) == {"nesterov": True}
    with pytest.raises(TypeError, match="not a float"):
        Structural(float, 0)


def test_every_record_has_a_fused_update():
    """Fused trials train every optimizer of the registry: a record added without a fused
    update would train its trials unfused, so it fails here until that is chosen on purpose."""
    from hpo.fusion.optimizer import fused_optimizers

    assert fused_optimizers() == tuple(OPTIMIZERS)
