"""Fused trials (after HFTA, Wang et al., MLSys 2021): K trials of one architecture trained
by one compiled step.

Every weight of the K models is stacked into one variable with a trial axis. The K trials
of a group see the same batches (a study shares one data order), so the first weight layer
meets one shared input: a Dense layer becomes one wide matmul [batch, in] x [in, K*out] and
a Conv2D one convolution with K*filters output channels. On this CPU that wide matmul ran
at about twice the FLOP rate of K narrow ones in one graph (a lone trial's own matmul is
nearly as fast: benchmarks/matmul_rates.py; fusion's gain there is mostly in the
elementwise work, Adam and the loss, done once for K trials). Later Dense layers are one
einsum over [K, batch, in] x [K, in, out]; later convolutions are one grouped
convolution in graph mode where the device can train it (grouped_conv.py), else run per
trial inside the same graph; pooling folds K into the batch. Each trial keeps its own
dropout rate and random stream (its TunableDropout seed generator and `inverted_dropout`,
the same draws as unfused) and its own optimizer hyperparameters as [K] vectors. BatchNormalization takes
each trial's statistics over that trial's own batch and keeps its own moving averages;
LayerNormalization is per sample anyway; both keep a per-trial scale and offset.

The loss is the *sum* of the per-trial mean losses, so each trial's slice of every gradient
is exactly its stand-alone gradient; `hpo.fusion.optimizer.FusedOptimizer` then updates every
trial with its own [K]-shaped hyperparameters.

Initialisation is exact by construction: each trial's initial values are what the builder
gives under the trial's seed (`Trainer.fresh_weights`), so fan-in is the unfused layer's.
After training, every trial's checkpoint is written from one host copy of the stacked
state, in the unfused layout, so promotions continue fused or unfused.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import keras
import numpy as np

from hpo.fusion.grouped_conv import trains_grouped_convolutions
from hpo.fusion.optimizer import assign_trial_slice, fused_optimizer, fused_optimizers, has_fused_update
from hpo.metric_names import DEFAULT_LOSS, DEFAULT_METRICS
from hpo.models.layers import inverted_dropout
from hpo.training.bulk_variables import BulkAssign, BulkRead
from hpo.training.compiled_step import UPDATE_SCOPE
from hpo.training.loss_metrics import output_activation
from hpo.training.optimizers import optimizer_name

_SHAPE_ONLY = ("InputLayer", "Flatten", "Reshape", "MaxPooling2D")
# Normalisation layers and their variables, in the order Keras creates them.
_NORMALISATION = {"BatchNormalization": ("gamma", "beta", "moving_mean", "moving_variance"),
                  "LayerNormalization": ("gamma", "beta")}


def unfusable_measures(training) -> str | None:
    """None when the fused step computes the experiment's loss and metrics (the defaults:
    sparse categorical cross-entropy on logits, accuracy), else why not."""
    if training.engine == "fit":
        return "training.engine is fit: Keras's model.fit trains every trial"
    if training.callbacks or training.early_stopping is not None:
        return "callbacks and early stopping stop trials one by one; a fused group trains its trials together"
    if training.loss != DEFAULT_LOSS:
        return f"the fused step computes only the loss {DEFAULT_LOSS!r}, not training.loss {training.loss!r}"
    if tuple(training.metrics) != DEFAULT_METRICS:
        return (f"the fused step computes only the metrics {list(DEFAULT_METRICS)}, not training.metrics "
                f"{list(training.metrics)}")
    return None


def fusable(model, params: Mapping[str, Any]) -> str | None:
    """None when `model` can be fused, else why not."""
    if type(model).train_step is not keras.Model.train_step:
        return "the model trains with its own train_step"
    if len(getattr(model, "inputs", None) or ()) > 1 or len(getattr(model, "outputs", None) or ()) > 1:
        return "the model has several inputs or outputs (Keras's model.fit trains it)"
    activation = output_activation(model)
    if activation is not None:
        return f"the model ends in {activation}; the fused step's loss takes logits"
    if not has_fused_update(optimizer_name(params)):
        return (f"optimizer {optimizer_name(params)!r} has no fused update; the optimizers that fuse are "
                f"{', '.join(fused_optimizers())}")
    previous = None
    for layer in model.layers:
        kind = type(layer).__name__
        if kind not in _SHAPE_ONLY + ("Dense", "Conv2D", "TunableDropout", *_NORMALISATION):
            return f"layer {layer.name} ({kind}) has no fused form"
        if kind == "Conv2D" and (layer.groups != 1 or layer.data_format != "channels_last"):
            return f"layer {layer.name}: only channels-last, ungrouped convolutions fuse"
        if kind in _NORMALISATION and not _normalises_last_axis(layer):
            return f"layer {layer.name}: only {kind} over the last axis fuses"
        if kind == "BatchNormalization" and (getattr(layer, "renorm", False) or not layer.trainable):
            return f"layer {layer.name}: batch renormalisation and frozen BatchNormalization do not fuse"
        inbound = [node for node in getattr(layer, "_inbound_nodes", [])]
        if previous is not None and inbound:
            parents = {id(t._keras_history.operation) for n in inbound for t in n.input_tensors}
            if parents != {id(previous)}:
                return f"layer {layer.name} is not fed by the layer before it (only chains fuse)"
        previous = layer
    return None


def _normalises_last_axis(layer) -> bool:
    rank = len(layer.input.shape)
    axes = layer.axis if isinstance(layer.axis, (list, tuple)) else [layer.axis]
    return [a % rank for a in axes] == [rank - 1]


class FusedProgram:
    """K models of one architecture as one set of stacked variables and one compiled step.

    `template` is an ordinary model of the architecture (its layers give the structure);
    `values[k]` is trial k's initial `model.variables`.
    """

    def __init__(self, template, values: Sequence[Sequence], params: Sequence[Mapping[str, Any]],
                 x_train, y_train, mode: str, single_pass: bool = False, device: str = "/device:CPU:0"):
        import keras
        import tensorflow as tf

        self.k = len(values)
        # Later convolutions: one grouped convolution (K groups) runs 1.9x faster than K
        # convolutions on an AVX-512 CPU in graph mode (oneDNN), but XLA's CPU backward pass
        # for a grouped convolution took 1.07 s against 31 ms for the K separate ones, and
        # without oneDNN graph mode has no CPU gradient for it at all (grouped_conv.py).
        # (Only asked where there is a later convolution: the probe compiles a graph.)
        later_convs = sum(type(layer).__name__ == "Conv2D" for layer in template.layers) > 1
        self._grouped_conv = mode != "xla" and later_convs and trains_grouped_convolutions(device)
        self.optimizer_kind = optimizer_name(params[0])
        if any(optimizer_name(p) != self.optimizer_kind for p in params):
            raise ValueError("fused trials must share the optimizer kind")
        position = {id(v): i for i, v in enumerate(template.variables)}
        self._layers = []          # (kind, layer, {name: stacked variable})
        self._sources = []         # (stacked variable, trial axis, index into model.variables)
        self._generators = []      # (K seed generators, index of the layer's state in model.variables)
        trainable = {}             # id(template variable) -> (stacked variable, trial axis)
        shared_input = True        # until the first weight layer, every trial sees the same tensor
        for layer in template.layers:
            kind = type(layer).__name__
            stacked = {}
            if kind in ("Dense", "Conv2D"):
                for name in ("kernel", "bias") if layer.use_bias else ("kernel",):
                    source = getattr(layer, name)
                    # The first layer's kernel keeps K next to its output axis, so the shared
                    # input meets all K kernels in one wide matmul or convolution.
                    axis = len(source.shape) - 1 if shared_input and name == "kernel" else 0
                    stacked[name] = self._stack(keras.Variable(np.zeros(_with_axis(source.shape, axis, self.k),
                                                                        "float32"), name=f"fused_{layer.name}_{name}"),
                                                axis, position[id(source)])
                    trainable[id(source)] = (stacked[name], axis)
                stacked["shared_input"] = shared_input
                shared_input = False
            elif kind in _NORMALISATION:
                shared_input = False
                for name in _NORMALISATION[kind]:
                    source = getattr(layer, name, None)
                    if source is None:          # center=False or scale=False
                        continue
                    stacked[name] = self._stack(keras.Variable(np.zeros((self.k, *source.shape), "float32"),
                                                               trainable=source.trainable,
                                                               name=f"fused_{layer.name}_{name}"),
                                                0, position[id(source)])
                    if source.trainable:
                        trainable[id(source)] = (stacked[name], 0)
            elif kind == "TunableDropout":
                shared_input = False
                stacked["rate"] = self._stack(keras.Variable(np.zeros(self.k, "float32"), trainable=False,
                                                             name=f"fused_{layer.name}_rate"),
                                              0, position[id(layer.rate)])
                generators = [keras.random.SeedGenerator(0) for _ in range(self.k)]
                self._generators.append((generators, position[id(layer.seed_generator.state)]))
                stacked["generators"] = generators
            self._layers.append((kind, layer, stacked))
        # The unfused model's trainable order: checkpoints map optimizer slots by it.
        self.weights = [trainable[id(v)][0] for v in template.trainable_variables]
        self.trial_axes = [trainable[id(v)][1] for v in template.trainable_variables]
        self.optimizer = fused_optimizer(self.optimizer_kind, params, self.weights, self.trial_axes, single_pass)
        self._loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        self.traces = [0]
        self._x_train, self._y_train = x_train, y_train
        self._start: BulkAssign | None = None
        self._reader: BulkRead | None = None
        self.reset(values, params)
        signature = [tf.TensorSpec([None, None], tf.int32)]
        # The forward pass and the update are plain Python over fixed lists of layers and
        # variables, and the step loop is an explicit tf.while_loop: nothing for AutoGraph to
        # rewrite, yet it would transpile every method called, ~1 s of AST work on a process's
        # first fused trace. So both functions are traced with AutoGraph off.
        steps = self._train_steps
        self.train_steps = steps if mode == "eager" else tf.function(steps, input_signature=signature,
                                                                    jit_compile=(mode == "xla"), autograph=False)
        self.evaluate = self._evaluate if mode == "eager" else tf.function(self._evaluate, reduce_retracing=True,
                                                                           autograph=False)

    def _stack(self, variable, axis: int, source_index: int):
        self._sources.append((variable, axis, source_index))
        return variable

    # --- the fused forward pass ---------------------------------------------------------------
    def forward(self, x, training: bool):
        """x: one batch [batch, ...], the same for every trial -> logits [K, batch, classes]."""
        from keras import ops

        shared = True
        for kind, layer, stacked in self._layers:
            if kind == "InputLayer":
                continue
            lead = (ops.shape(x)[0],) if shared else (self.k, ops.shape(x)[1])
            if kind == "Flatten":
                x = ops.reshape(x, (*lead, -1))
            elif kind == "Reshape":
                x = ops.reshape(x, (*lead, *layer.target_shape))
            elif kind == "MaxPooling2D":
                if shared:
                    x = layer(x)
                else:
                    pooled = layer(ops.reshape(x, (-1, *x.shape[2:])))
                    x = ops.reshape(pooled, (*lead, *pooled.shape[1:]))
            elif kind in ("Dense", "Conv2D"):
                x = self._dense(x, stacked) if kind == "Dense" else self._conv(x, layer, stacked)
                shared = False
                x = layer.activation(x)
            elif kind in _NORMALISATION or kind == "TunableDropout":
                if shared:                     # per-trial state from here on: a copy of the input each
                    x = ops.broadcast_to(x[None], (self.k, *ops.shape(x)))
                    shared = False
                if kind in _NORMALISATION:
                    x = self._normalise(x, kind, layer, stacked, training)
                elif training:
                    # Each trial's own generator and rate: the masks its unfused layer would draw.
                    x = inverted_dropout(x, ops.stack([g.next() for g in stacked["generators"]]), stacked["rate"])
        return x

    def _dense(self, x, stacked):
        from keras import ops

        kernel = stacked["kernel"]
        if stacked["shared_input"]:           # [batch, in] @ [in, K*out]: one wide matmul
            units_in, _, units_out = kernel.shape
            y = ops.matmul(x, ops.reshape(kernel, (units_in, self.k * units_out)))
            x = ops.transpose(ops.reshape(y, (ops.shape(x)[0], self.k, units_out)), (1, 0, 2))
        else:
            x = ops.einsum("kbi,kio->kbo", x, kernel)
        if "bias" in stacked:
            x = x + stacked["bias"][:, None, :]
        return x

    def _normalise(self, x, kind: str, layer, stacked, training: bool):
        """Each trial's own statistics and scale: x is [K, batch, ..., channels]; written as
        Keras computes the layer, so fused and unfused trials agree."""
        from keras import ops

        per_trial = (self.k,) + (1,) * (len(x.shape) - 2) + (x.shape[-1],)
        gamma, beta = (ops.reshape(stacked[n], per_trial) if n in stacked else None for n in ("gamma", "beta"))
        if kind == "LayerNormalization":
            mean, variance = ops.moments(x, axes=[-1], keepdims=True)
            inv = ops.rsqrt(variance + layer.epsilon)
            inv = inv * gamma if gamma is not None else inv
            shift = -mean * inv
            return x * inv + (shift + beta if beta is not None else shift)
        if training:                           # statistics over each trial's own batch
            mean, variance = ops.moments(x, axes=list(range(1, len(x.shape) - 1)))     # [K, channels]
            moving_mean, moving_variance = stacked["moving_mean"], stacked["moving_variance"]
            moving_mean.assign(moving_mean * layer.momentum + mean * (1.0 - layer.momentum))
            moving_variance.assign(moving_variance * layer.momentum + variance * (1.0 - layer.momentum))
        else:
            mean, variance = stacked["moving_mean"], stacked["moving_variance"]
        return ops.batch_normalization(x, ops.reshape(mean, per_trial), ops.reshape(variance, per_trial), axis=-1,
                                       offset=beta, scale=gamma, epsilon=layer.epsilon)

    def _conv(self, x, layer, stacked):
        import tensorflow as tf
        from keras import ops

        kernel = stacked["kernel"]
        conv = dict(strides=layer.strides, padding=layer.padding.upper(), dilations=layer.dilation_rate)
        if stacked["shared_input"]:           # one convolution with K x filters output channels
            h, w, channels, _, filters = kernel.shape
            y = tf.nn.conv2d(x, ops.reshape(kernel, (h, w, channels, self.k * filters)), **conv)
            x = self._trials_first(y, filters)
        elif self._grouped_conv:             # [K, batch, h, w, c] -> [batch, h, w, K*c]: group k sees trial k
            batch, height, width, channels = (ops.shape(x)[i] for i in range(1, 5))
            h, w, _, filters = kernel.shape[1:]
            grouped = ops.reshape(ops.transpose(x, (1, 2, 3, 0, 4)), (batch, height, width, self.k * channels))
            y = tf.nn.conv2d(grouped, ops.reshape(ops.transpose(kernel, (1, 2, 3, 0, 4)),
                                                  (h, w, channels, self.k * filters)), **conv)
            x = self._trials_first(y, filters)
        else:
            x = ops.stack([tf.nn.conv2d(x[k], kernel[k], **conv) for k in range(self.k)])
        if "bias" in stacked:
            x = x + ops.reshape(stacked["bias"], (self.k, 1, 1, 1, -1))
        return x

    def _trials_first(self, y, filters: int):
        """A convolution's [batch, h, w, K*filters] output, trial k in channel block k ->
        [K, batch, h, w, filters]."""
        from keras import ops
        return ops.transpose(ops.reshape(y, (*ops.shape(y)[:3], self.k, filters)), (3, 0, 1, 2, 4))

    def _train_steps(self, batch_indices):
        """batch_indices [steps, batch], shared by the K trials -> (loss sums [K], correct [K])."""
        import tensorflow as tf

        self.traces[0] += 1
        def step(i, total_loss, correct):
            idx = batch_indices[i]
            xb = tf.gather(self._x_train, idx)
            yb = tf.broadcast_to(tf.gather(self._y_train, idx)[None], [self.k, tf.shape(idx)[0]])
            with tf.GradientTape() as tape:
                logits = self.forward(xb, training=True)
                per_trial = tf.reduce_mean(self._loss(yb, logits), axis=1)     # [K]
                loss = tf.reduce_sum(per_trial)
            grads = tape.gradient(loss, self.weights)
            with tf.name_scope(UPDATE_SCOPE):
                self.optimizer.apply(grads, self.weights)
            hits = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), yb), tf.int64)
            return i + 1, total_loss + per_trial, correct + tf.reduce_sum(hits, axis=1)

        steps = tf.shape(batch_indices)[0]
        _, total_loss, correct = tf.while_loop(lambda i, *_: i < steps, step,
                                               (tf.constant(0), tf.zeros([self.k]), tf.zeros([self.k], tf.int64)))
        return total_loss, correct

    def _evaluate(self, x, y):
        """Shared validation data -> (per-trial loss sums [K], correct [K])."""
        import tensorflow as tf
        logits = self.forward(x, training=False)
        labels = tf.broadcast_to(y[None], [self.k, tf.shape(y)[0]])
        losses = tf.reduce_sum(self._loss(labels, logits), axis=1)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.int64),
                                axis=1)
        return losses, correct

    def reset(self, values: Sequence[Sequence], params: Sequence[Mapping[str, Any]]) -> None:
        """Reuse this compiled program for K new trials of the same architecture: weights,
        dropout rates and generator states from `values[k]` (trial k's fresh
        `model.variables`), optimizer state zeroed, their hyperparameters assigned; in one
        call (`bulk_variables`)."""
        import tensorflow as tf

        if len(values) != self.k:
            raise ValueError(f"{len(values)} trials for a program of {self.k}")
        if self._start is None:
            self._start = BulkAssign(self._trial_variables() + self.optimizer.hyperparameter_variables,
                                     zeroed=self.optimizer.state)
        # Stacked on the device, not through NumPy: 1.1 against 2.4 ms for a 2x128 MLP at K=8.
        stacked = [tf.stack([v[index] for v in values], axis=axis) for _, axis, index in self._sources]
        states = [trial_values[index] for _, index in self._generators for trial_values in values]
        self._start(stacked + states + self.optimizer.hyperparameter_values(params))

    @property
    def stacked_variables(self) -> list:
        """The K models' variables, each stacked along its trial axis."""
        return [variable for variable, _, _ in self._sources]

    def _trial_variables(self) -> list:
        """What each trial's fresh values fill: the stacked variables, then every generator's
        state, trial by trial."""
        return self.stacked_variables + [g.state for generators, _ in self._generators for g in generators]

    # --- back to ordinary, unfused trials --------------------------------------------------------
    def checkpoint_arrays(self, model, optimizer) -> Callable[[int], tuple[list, list]]:
        """Every trial's checkpoint contents from one copy of the stacked state to the host:
        returns `arrays(k)` -> (model.variables values, optimizer.optimizer.variables values) of
        trial k, as an unfused trial's checkpoint holds them. `optimizer` is the scratch
        `TunableOptimizer`; its hyperparameter variables are matched by identity and filled
        from this program's [K] vectors (assigning them per trial cost ~0.8 ms each)."""
        slots = self.optimizer.slots
        if self._reader is None:
            self._reader = BulkRead(self._trial_variables() + [v for variables in slots.values() for v in variables]
                                    + [self.optimizer.iterations] + list(self.optimizer.hyper.values()))
        # In the reader's order.
        values = iter(self._reader.read())
        host = {id(v): next(values) for v, _, _ in self._sources}
        generator_states = [[next(values) for _ in generators] for generators, _ in self._generators]
        host_slots = {name: [next(values) for _ in variables] for name, variables in slots.items()}
        host_slots["iterations"] = next(values)
        hyper = {key: next(values) for key in self.optimizer.hyper}
        keras_optimizer = optimizer.optimizer
        hyper_keys = {id(variable): key for key, variable in optimizer.values.items()}
        hyper_keys[id(keras_optimizer.learning_rate)] = "learning_rate"
        n_weights = len(model.variables)
        unfused = model.trainable_variables
        keras_slots = self.optimizer.keras_slots(keras_optimizer)
        # Where each optimizer variable comes from: the step count, a slot, or a hyperparameter.
        layout = []
        for variable in keras_optimizer.variables:
            if variable is keras_optimizer.iterations:
                source = ("iterations",)
            elif id(variable) in hyper_keys:
                source = ("hyper", hyper_keys[id(variable)])
            else:
                source = None
            for name, keras_list in keras_slots.items():
                for i, u in enumerate(unfused):
                    if keras_list[keras_optimizer._get_variable_index(u)] is variable:
                        source = ("slot", name, i)
            if source is None:
                raise ValueError(f"optimizer variable {variable.path} has no fused counterpart")
            layout.append(source)

        def arrays(k: int) -> tuple[list, list]:
            weights = [None] * n_weights
            for variable, axis, index in self._sources:
                weights[index] = np.take(host[id(variable)], k, axis=axis)
            for (_, index), states in zip(self._generators, generator_states):
                weights[index] = states[k]
            optimizer_values = []
            for source in layout:
                if source[0] == "iterations":
                    optimizer_values.append(host_slots["iterations"][k])
                elif source[0] == "slot":
                    _, name, i = source
                    optimizer_values.append(np.take(host_slots[name][i], k, axis=self.optimizer.trial_axes[i]))
                else:
                    optimizer_values.append(hyper[source[1]][k])
            return weights, optimizer_values
        return arrays

    def import_trial(self, k: int, model, keras_optimizer) -> None:
        """The reverse: load trial k's state from an unfused model and optimizer (a checkpoint
        restored into them), for a fused continuation."""
        sources = model.variables
        for variable, axis, index in self._sources:
            assign_trial_slice(variable, axis, k, sources[index].value)
        for generators, index in self._generators:
            generators[k].state.assign(sources[index].value)
        self.optimizer.import_state(k, model.trainable_variables, keras_optimizer)


def _with_axis(shape, axis: int, k: int) -> tuple:
    """An unfused variable's shape with the trial axis inserted at `axis`."""
    shape = tuple(shape)
    return shape[:axis] + (k,) + shape[axis:]
