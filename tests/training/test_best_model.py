"""The exported model's optimizer: Keras's own class, the trial's hyperparameters and state."""

import keras
import numpy as np
import pytest

from hpo.cli.best_model import stock_optimizer
from hpo.training.optimizers import TunableOptimizer

CASES = [({"optimizer": "adam", "learning_rate": 0.015}, keras.optimizers.Adam),
         ({"optimizer": "adamw", "learning_rate": 0.002, "weight_decay": 0.01}, keras.optimizers.AdamW),
         ({"optimizer": "sgd", "learning_rate": 0.1, "momentum": 0.9, "nesterov": True}, keras.optimizers.SGD),
         ({"optimizer": "sgd", "learning_rate": 0.1, "momentum": 0.0}, keras.optimizers.SGD),
         ({"optimizer": "rmsprop", "learning_rate": 0.01, "rho": 0.8}, keras.optimizers.RMSprop),
         ({"optimizer": "rmsprop", "learning_rate": 0.01, "rho": 0.8, "momentum": 0.6}, keras.optimizers.RMSprop)]


@pytest.mark.parametrize("params, expected", CASES,
                         ids=["adam", "adamw", "sgd-nesterov", "sgd-no-momentum", "rmsprop", "rmsprop-momentum"])
def test_stock_optimizer_has_the_trials_kind_hyperparameters_and_state(params, expected):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    tunable = TunableOptimizer(params, model.trainable_variables)
    rng = np.random.default_rng(0)
    for _ in range(3):                     # some training, so the slots and step count are not zero
        grads = [rng.normal(size=v.shape).astype("float32") for v in model.trainable_variables]
        tunable.optimizer.apply(grads, model.trainable_variables)
    stock = stock_optimizer(tunable, params, model.trainable_variables)
    assert type(stock) is expected
    assert int(stock.iterations) == 3
    assert float(stock.learning_rate) == pytest.approx(params["learning_rate"])
    for key in ("momentum", "rho", "weight_decay"):
        if key in params:
            assert float(getattr(stock, key)) == pytest.approx(params[key])
    if "nesterov" in params:
        assert stock.nesterov is True
    # The next step with the stock optimizer is the step the trial's own would have taken.
    grads = [rng.normal(size=v.shape).astype("float32") for v in model.trainable_variables]
    twin = keras.models.clone_model(model)
    twin.set_weights(model.get_weights())
    stock_twin = stock_optimizer(tunable, params, twin.trainable_variables)
    tunable.optimizer.apply(grads, model.trainable_variables)
    stock_twin.apply(grads, twin.trainable_variables)
    for ours, theirs in zip(model.get_weights(), twin.get_weights()):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
