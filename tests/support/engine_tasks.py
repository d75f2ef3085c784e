"""Builders and callbacks for the engine tests (tests/training/test_engines.py): a model with its own
`train_step`, a two-input model, callbacks that stop a trial or hook into batches."""

import keras

# Each trace of `CustomStepModel.train_step` appends here: proof that Keras's fit ran it.
TRACED_TRAIN_STEPS = []


class CustomStepModel(keras.Model):
    """A functional model with its own `train_step` (Keras's guide "customizing what happens
    in fit"): what the compiled engine cannot honour, so `auto` sends it to `fit`."""

    def train_step(self, data):
        import tensorflow as tf

        TRACED_TRAIN_STEPS.append(1)
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred)
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply(gradients, self.trainable_variables)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return self.get_metrics_result()


def custom_step_mlp(config, input_shape, num_classes):
    inputs = keras.Input(input_shape)
    x = keras.layers.Dense(int(config.get("units", 16)), activation="relu")(inputs)
    return CustomStepModel(inputs, keras.layers.Dense(1, activation="sigmoid")(x))


def two_input_model(config, input_shape, num_classes):
    a, b = keras.Input(input_shape), keras.Input(input_shape)
    joined = keras.layers.Concatenate()([keras.layers.Dense(4)(a), keras.layers.Dense(4)(b)])
    return keras.Model([a, b], keras.layers.Dense(1)(joined))


class StopAfter(keras.callbacks.Callback):
    """Sets `model.stop_training` at the end of the second epoch of a job."""

    def __init__(self, epochs=2):
        super().__init__()
        self.epochs, self.seen = epochs, []

    def on_epoch_end(self, epoch, logs=None):
        self.seen.append((epoch, dict(logs or {})))
        if len(self.seen) >= self.epochs:
            self.model.stop_training = True


def stop_after_two():
    return StopAfter(2)


class CountBatches(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        pass


def count_batches():
    return CountBatches()


class RecordBatches(keras.callbacks.Callback):
    """Every batch index Keras hands `on_train_batch_end`, in order (one list per process)."""
    seen: list[int] = []

    def on_train_batch_end(self, batch, logs=None):
        RecordBatches.seen.append(batch)


def record_batches():
    return RecordBatches()


def not_a_callback():
    return 42


class FailingStepModel(keras.Model):
    def train_step(self, data):
        raise ValueError("this train_step refuses to train")


def failing_step_mlp(config, input_shape, num_classes):
    inputs = keras.Input(input_shape)
    return FailingStepModel(inputs, keras.layers.Dense(1, activation="sigmoid")(inputs))


def halve_learning_rate():
    """Keras's own LearningRateScheduler: the rate halves from the second epoch of a job on."""
    return keras.callbacks.LearningRateScheduler(lambda epoch, rate: rate / 2 if epoch else rate)


def halve_learning_rate_each_epoch():
    """A stateful schedule: each epoch halves the rate the optimizer holds, so a promotion
    continues correctly only from the rate its parent ended with."""
    return keras.callbacks.LearningRateScheduler(lambda epoch, rate: rate / 2)
