"""Fused trials (after HFTA, Wang et al., MLSys 2021): K trials of one architecture trained
by one compiled step.

Every weight of the K models is stacked into one variable with a leading K axis; a Dense
layer is one einsum over [K, batch, in] x [K, in, out], so the K trials cost one op and
one dispatch where they cost K. Convolutions run per trial inside the same graph, and
pooling folds K into the batch. Each trial keeps its own data order (its own batch
indices), its own dropout rate and random stream (its TunableDropout seed generator, same
draws as unfused), and its own optimizer hyperparameters as [K] vectors.

The loss is the *sum* of the per-trial mean losses, so each trial's slice of every gradient
is exactly its stand-alone gradient; the optimizer update is written out per element
(Adam, AdamW, SGD with momentum as Keras computes them) with [K]-shaped hyperparameters.
Scaling each trial's loss instead would not do: Adam's step does not depend on the
gradient's scale.

Initialisation is exact by construction: each trial's model is built by the builder under
the trial's seed and its weights are copied into the stack, so fan-in is the unfused
layer's. After training, each trial's weights and optimizer state are written back into an
ordinary program (`export_trial`) and checkpointed like any unfused trial.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hpo.models.layers import TunableDropout
from hpo.training.optimizers import HYPERPARAMETERS, optimizer_name

FUSABLE_OPTIMIZERS = ("adam", "adamw", "sgd")
_SHAPE_ONLY = ("InputLayer", "Flatten", "Reshape", "MaxPooling2D")


def fusable(model, params: Mapping[str, Any]) -> str | None:
    """None when `model` can be fused, else why not."""
    if optimizer_name(params) not in FUSABLE_OPTIMIZERS:
        return f"optimizer {optimizer_name(params)!r} has no fused update (only {', '.join(FUSABLE_OPTIMIZERS)})"
    if params.get("nesterov"):
        return "nesterov momentum has no fused update"
    previous = None
    for layer in model.layers:
        kind = type(layer).__name__
        if kind not in _SHAPE_ONLY + ("Dense", "Conv2D", "TunableDropout"):
            return f"layer {layer.name} ({kind}) has no fused form"
        if kind == "Conv2D" and (layer.groups != 1 or layer.data_format != "channels_last"):
            return f"layer {layer.name}: only channels-last, ungrouped convolutions fuse"
        inbound = [node for node in getattr(layer, "_inbound_nodes", [])]
        if previous is not None and inbound:
            parents = {id(t._keras_history.operation) for n in inbound for t in n.input_tensors}
            if parents != {id(previous)}:
                return f"layer {layer.name} is not fed by the layer before it (only chains fuse)"
        previous = layer
    return None


class FusedProgram:
    """K models of one architecture as one set of stacked variables and one compiled step."""

    def __init__(self, models: Sequence, params: Sequence[Mapping[str, Any]], x_train, y_train, mode: str):
        import keras
        import tensorflow as tf

        self.k = len(models)
        self.template = models[0]
        self.optimizer_kind = optimizer_name(params[0])
        if any(optimizer_name(p) != self.optimizer_kind for p in params):
            raise ValueError("fused trials must share the optimizer kind")
        self._layers = []          # (kind, layer, {name: stacked variable})
        self.weights: list = []    # trainable stacked variables, in a fixed order
        self.dropout_rates: list = []
        self.seed_generators: list[list] = []   # per dropout layer: K generators
        for index, layer in enumerate(self.template.layers):
            kind = type(layer).__name__
            stacked = {}
            if kind in ("Dense", "Conv2D"):
                for name in ("kernel", "bias") if layer.use_bias else ("kernel",):
                    values = np.stack([keras.ops.convert_to_numpy(getattr(m.layers[index], name)) for m in models])
                    variable = keras.Variable(values, name=f"fused_{layer.name}_{name}")
                    stacked[name] = variable
                    self.weights.append(variable)
            elif kind == "TunableDropout":
                rates = [float(keras.ops.convert_to_numpy(m.layers[index].rate)) for m in models]
                stacked["rate"] = keras.Variable(np.array(rates, "float32"), trainable=False,
                                                 name=f"fused_{layer.name}_rate")
                generators = []
                for m in models:
                    generator = keras.random.SeedGenerator(0)
                    generator.state.assign(m.layers[index].seed_generator.state.value)
                    generators.append(generator)
                stacked["generators"] = generators
            self._layers.append((kind, layer, stacked))
        self.optimizer = FusedOptimizer(self.optimizer_kind, params, self.weights)
        self._loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        self.traces = [0]
        self._x_train, self._y_train = x_train, y_train
        signature = [tf.TensorSpec([None, self.k, None], tf.int32)]
        steps = self._train_steps
        self.train_steps = steps if mode == "eager" else tf.function(steps, input_signature=signature,
                                                                    jit_compile=(mode == "xla"))
        self.evaluate = self._evaluate if mode == "eager" else tf.function(self._evaluate, reduce_retracing=True)

    # --- the fused forward pass ---------------------------------------------------------------
    def forward(self, x, training: bool):
        """x: [K, batch, ...] -> logits [K, batch, classes]."""
        import keras
        import tensorflow as tf
        from keras import ops

        for kind, layer, stacked in self._layers:
            if kind == "InputLayer":
                continue
            if kind == "Flatten":
                x = ops.reshape(x, (self.k, ops.shape(x)[1], -1))
            elif kind == "Reshape":
                x = ops.reshape(x, (self.k, ops.shape(x)[1], *layer.target_shape))
            elif kind == "Dense":
                x = ops.einsum("kbi,kio->kbo", x, stacked["kernel"])
                if "bias" in stacked:
                    x = x + stacked["bias"][:, None, :]
                x = layer.activation(x)
            elif kind == "Conv2D":
                outputs = []
                for k in range(self.k):
                    y = tf.nn.conv2d(x[k], stacked["kernel"][k], strides=layer.strides,
                                     padding=layer.padding.upper(), dilations=layer.dilation_rate)
                    if "bias" in stacked:
                        y = y + stacked["bias"][k]
                    outputs.append(y)
                x = layer.activation(ops.stack(outputs))
            elif kind == "MaxPooling2D":
                shape = ops.shape(x)
                folded = ops.reshape(x, (-1, *x.shape[2:]))
                pooled = layer(folded)
                x = ops.reshape(pooled, (self.k, shape[1], *pooled.shape[1:]))
            elif kind == "TunableDropout" and training:
                # The same draws as each trial's own layer: its generator, the per-trial shape.
                masks = [keras.random.uniform(ops.shape(x)[1:], seed=g) for g in stacked["generators"]]
                rates = ops.cast(stacked["rate"], x.dtype)
                rates = ops.reshape(rates, (self.k,) + (1,) * (len(x.shape) - 1))
                keep = ops.cast(ops.stack(masks) >= rates, x.dtype)
                x = x * keep / (1.0 - rates)
        return x

    def _train_steps(self, batch_indices):
        """batch_indices [steps, K, batch] -> (per-trial loss sums [K], correct [K])."""
        import tensorflow as tf

        self.traces[0] += 1
        total_loss = tf.zeros([self.k])
        correct = tf.zeros([self.k], tf.int64)
        for i in tf.range(tf.shape(batch_indices)[0]):
            idx = batch_indices[i]
            xb = tf.gather(self._x_train, idx)          # [K, batch, ...]
            yb = tf.gather(self._y_train, idx)
            with tf.GradientTape() as tape:
                logits = self.forward(xb, training=True)
                per_trial = tf.reduce_mean(self._loss(yb, logits), axis=1)     # [K]
                loss = tf.reduce_sum(per_trial)
            grads = tape.gradient(loss, self.weights)
            self.optimizer.apply(grads, self.weights)
            total_loss += per_trial
            correct += tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), yb), tf.int64),
                                     axis=1)
        return total_loss, correct

    def _evaluate(self, x, y):
        """Shared validation data -> (per-trial loss sums [K], correct [K])."""
        import tensorflow as tf
        logits = self.forward(tf.broadcast_to(x[None], [self.k, *x.shape]), training=False)
        labels = tf.broadcast_to(y[None], [self.k, tf.shape(y)[0]])
        losses = tf.reduce_sum(self._loss(labels, logits), axis=1)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.int64),
                                axis=1)
        return losses, correct

    def reset(self, models: Sequence, params: Sequence[Mapping[str, Any]]) -> None:
        """Reuse this compiled program for K new trials of the same architecture: weights,
        dropout rates and generator states from their freshly built models, optimizer
        state zeroed, their hyperparameters assigned."""
        import keras
        for index, (kind, layer, stacked) in enumerate(self._layers):
            if kind in ("Dense", "Conv2D"):
                for name, variable in stacked.items():
                    variable.assign(np.stack([keras.ops.convert_to_numpy(getattr(m.layers[index], name))
                                              for m in models]))
            elif kind == "TunableDropout":
                stacked["rate"].assign(np.array([float(keras.ops.convert_to_numpy(m.layers[index].rate))
                                                 for m in models], "float32"))
                for generator, m in zip(stacked["generators"], models):
                    generator.state.assign(m.layers[index].seed_generator.state.value)
        self.optimizer.reset(params)

    # --- back to ordinary, unfused trials --------------------------------------------------------
    def export_trial(self, k: int, model, keras_optimizer) -> None:
        """Write trial k's weights, dropout state and optimizer state into an unfused model and
        its (built) Keras optimizer, so the ordinary checkpoint code saves it."""
        for index, (kind, layer, stacked) in enumerate(self._layers):
            target = model.layers[index]
            if kind in ("Dense", "Conv2D"):
                for name, variable in stacked.items():
                    getattr(target, name).assign(variable[k])
            elif kind == "TunableDropout":
                target.rate.assign(stacked["rate"][k])
                target.seed_generator.state.assign(stacked["generators"][k].state.value)
        self.optimizer.export(k, self.weights, model.trainable_variables, keras_optimizer)

    def import_trial(self, k: int, model, keras_optimizer) -> None:
        """The reverse: load trial k's state from an unfused model and optimizer (a checkpoint
        restored into them), for a fused continuation."""
        for index, (kind, layer, stacked) in enumerate(self._layers):
            source = model.layers[index]
            if kind in ("Dense", "Conv2D"):
                for name, variable in stacked.items():
                    _assign_row(variable, k, getattr(source, name).value)
            elif kind == "TunableDropout":
                _assign_row(stacked["rate"], k, source.rate.value)
                stacked["generators"][k].state.assign(source.seed_generator.state.value)
        self.optimizer.import_state(k, self.weights, model.trainable_variables, keras_optimizer)


class FusedOptimizer:
    """Adam, AdamW or SGD with momentum over stacked variables, hyperparameters as [K] vectors,
    computed as Keras's own optimizers compute them."""

    def __init__(self, kind: str, params: Sequence[Mapping[str, Any]], variables: list):
        import keras

        self.kind = kind
        self.k = len(params)
        self.hyper = {key: keras.Variable(np.array([float(p.get(key, default)) for p in params], "float32"),
                                          trainable=False, name=f"fused_{key}")
                      for key, default in HYPERPARAMETERS[kind].items()}
        self.iterations = keras.Variable(np.zeros(self.k, "int64"), trainable=False, name="fused_iterations")
        zeros = [keras.Variable(np.zeros(v.shape, "float32"), trainable=False) for v in variables]
        if kind == "sgd":
            self.slots = {"momentum": zeros}
        else:
            self.slots = {"momentum": zeros,
                          "velocity": [keras.Variable(np.zeros(v.shape, "float32"), trainable=False)
                                       for v in variables]}

    def reset(self, params: Sequence[Mapping[str, Any]]) -> None:
        for key, default in HYPERPARAMETERS[self.kind].items():
            self.hyper[key].assign(np.array([float(p.get(key, default)) for p in params], "float32"))
        self.iterations.assign(np.zeros(self.k, "int64"))
        for slots in self.slots.values():
            for slot in slots:
                slot.assign(np.zeros(slot.shape, "float32"))

    def _per_trial(self, name: str, like):
        from keras import ops
        return ops.reshape(self.hyper[name], (self.k,) + (1,) * (len(like.shape) - 1))

    def apply(self, grads, variables) -> None:
        from keras import ops

        step = ops.cast(self.iterations + 1, "float32")                 # [K]
        for i, (g, var) in enumerate(zip(grads, variables)):
            lr = self._per_trial("learning_rate", var)
            if self.kind == "sgd":
                mu = self._per_trial("momentum", var)
                m = self.slots["momentum"][i]
                m.assign(m * mu - g * lr)
                var.assign_add(m)
                continue
            if self.kind == "adamw":
                var.assign(var - var * self._per_trial("weight_decay", var) * lr)
            beta_1, beta_2 = self._per_trial("beta_1", var), self._per_trial("beta_2", var)
            epsilon = self._per_trial("epsilon", var)
            shape = (self.k,) + (1,) * (len(var.shape) - 1)
            power_1 = ops.reshape(ops.power(self.hyper["beta_1"], step), shape)
            power_2 = ops.reshape(ops.power(self.hyper["beta_2"], step), shape)
            alpha = lr * ops.sqrt(1 - power_2) / (1 - power_1)
            m, v = self.slots["momentum"][i], self.slots["velocity"][i]
            m.assign_add((g - m) * (1 - beta_1))
            v.assign_add((ops.square(g) - v) * (1 - beta_2))
            var.assign_sub((m * alpha) / (ops.sqrt(v) + epsilon))
        self.iterations.assign_add(ops.ones_like(self.iterations))

    def _keras_slots(self, keras_optimizer) -> dict[str, list]:
        if self.kind == "sgd":
            return {"momentum": keras_optimizer.momentums}
        return {"momentum": keras_optimizer._momentums, "velocity": keras_optimizer._velocities}

    def export(self, k: int, variables, unfused_variables, keras_optimizer) -> None:
        keras_optimizer.iterations.assign(self.iterations[k])
        slots = self._keras_slots(keras_optimizer)
        for name, stacked in self.slots.items():
            for fused, unfused in zip(stacked, unfused_variables):
                slots[name][keras_optimizer._get_variable_index(unfused)].assign(fused[k])

    def import_state(self, k: int, variables, unfused_variables, keras_optimizer) -> None:
        _assign_row(self.iterations, k, keras_optimizer.iterations.value)
        slots = self._keras_slots(keras_optimizer)
        for name, stacked in self.slots.items():
            for fused, unfused in zip(stacked, unfused_variables):
                _assign_row(fused, k, slots[name][keras_optimizer._get_variable_index(unfused)].value)


def stack_indices(orders: Sequence[np.ndarray]) -> np.ndarray:
    """Per-trial batch index arrays [steps, batch] -> the fused step's [steps, K, batch]."""
    return np.stack(orders, axis=1).astype("int32")


def group_key(params: Mapping[str, Any], signature: str, epochs: tuple[int, int]) -> tuple:
    """Trials fuse when they share the traced graph, the batch size and the epochs to train."""
    return signature, int(params["batch_size"]), epochs


def _assign_row(variable, k: int, value) -> None:
    """variable[k] = value for a Keras variable (the TensorFlow variable under it takes slices)."""
    variable.value[k].assign(value)
