"""The Adam a user compiles trains in hpo as Keras's own Adam would: the trainer's update runs
as TensorFlow's fused `ResourceApplyAdam` kernel (one op per variable, which halves a new
architecture's start-up), and that kernel must give Keras's update bit for bit."""

import numpy as np
import pytest


def _conv_net(seed: int):
    import keras
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((8, 8, 1))
    x = keras.layers.Conv2D(12, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(16, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(10)(x))


def _train(make_optimizer, x, y, steps: int) -> list[np.ndarray]:
    """`steps` compiled steps on a fresh seeded model of the optimizer `make_optimizer(variables)`
    gives; the model's variables and the optimizer's slots after them."""
    import keras
    import tensorflow as tf

    model = _conv_net(3)
    optimizer = make_optimizer(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    for i in range(steps):
        rows = slice(32 * i, 32 * (i + 1))
        step(x[rows], y[rows])
    slots = [v for v in optimizer.variables if "momentum" in v.name or "velocity" in v.name]
    assert len(slots) == 2 * len(model.trainable_variables)
    return [v.numpy() for v in model.variables] + [v.numpy() for v in slots]


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_the_trainers_adam_updates_bit_for_bit_as_keras_adam(digits, name):
    import keras

    from hpo.training.optimizers import TunableOptimizer

    x, y = digits[0], digits[1]
    params = {"optimizer": name, "learning_rate": 3e-3, "beta_1": 0.8, "beta_2": 0.99, "epsilon": 1e-6,
              "weight_decay": 0.01}

    def keras_own(variables):
        # Keras's class, with the hyperparameters in float32 variables as the trainer holds them.
        held = {k: keras.Variable(params[k], dtype="float32", trainable=False)
                for k in ("beta_1", "beta_2", "epsilon", "weight_decay")}
        if name == "adam":
            held.pop("weight_decay")
        optimizer = (keras.optimizers.Adam if name == "adam" else keras.optimizers.AdamW)(params["learning_rate"],
                                                                                           **held)
        optimizer.build(variables)
        return optimizer

    def trainers(variables):
        optimizer = TunableOptimizer(params, variables).optimizer
        updates = _update_ops(optimizer, variables)
        assert updates["ResourceApplyAdam"] == len(variables)
        # Adam's step is the kernel alone; AdamW's decay assigns before it, as in Keras.
        assert updates.get("AssignSubVariableOp", 0) == (0 if name == "adam" else len(variables))
        return optimizer

    theirs = _train(keras_own, x, y, steps=12)
    ours = _train(trainers, x, y, steps=12)
    assert len(ours) == len(theirs)
    for a, b in zip(theirs, ours):
        np.testing.assert_array_equal(a, b)


def _update_ops(optimizer, variables) -> dict[str, int]:
    """The variable updates of a traced `apply_gradients` (fused kernels and the subtraction
    Keras's own Adam ends with), by op type; traced only, so nothing is updated."""
    import tensorflow as tf

    @tf.function
    def apply():
        optimizer.apply_gradients(zip([tf.ones_like(v) for v in variables], variables))

    graph = apply.get_concrete_function().graph
    counts: dict[str, int] = {}
    for op in graph.get_operations():
        if op.type.startswith("ResourceApply") or op.type in ("AssignSubVariableOp",):
            counts[op.type] = counts.get(op.type, 0) + 1
    return counts
