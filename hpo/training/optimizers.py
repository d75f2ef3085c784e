"""Keras optimizers whose hyperparameters are variables.

A Python float handed to a Keras optimizer is baked into the traced training step, so a
reused step would silently train every later trial with the first trial's value. Here every
numeric hyperparameter is a variable the step reads, and a new trial assigns new values.
What Keras branches on in Python (the optimizer's kind, SGD's nesterov, RMSprop's
momentum > 0) stays structural and goes into the architecture signature instead.
"""

from __future__ import annotations

from typing import Any, Mapping

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from hpo.errors import TrialFailed
from hpo.registry import DEFAULT_OPTIMIZER, OPTIMIZERS, OptimizerRecord

__all__ = ["TunableOptimizer", "optimizer_name", "structural_signature"]


def optimizer_name(params: Mapping[str, Any]) -> str:
    name = str(params.get("optimizer", DEFAULT_OPTIMIZER)).lower()
    if name not in OPTIMIZERS:
        raise TrialFailed(f"unknown optimizer {name!r}; expected {', '.join(OPTIMIZERS)}")
    return name


def structural_signature(params: Mapping[str, Any]) -> dict[str, Any]:
    """The optimizer choices that need their own trace (RMSprop only branches on momentum > 0,
    but its value is baked in, so it is structural whole)."""
    name = optimizer_name(params)
    return {"optimizer": name, **OPTIMIZERS[name].structural_values(params)}


class TunableOptimizer:
    """A built Keras optimizer plus the variables holding its hyperparameters."""

    def __init__(self, params: Mapping[str, Any], variables: list, single_pass: bool = False):
        self.name = optimizer_name(params)
        self.record = OPTIMIZERS[self.name]
        # Keras keeps the learning rate in a variable of its own (set through its property);
        # the others become variables here.
        self.values = {key: keras.Variable(float(params.get(key, default)), dtype="float32", trainable=False,
                                           name=key)
                       for key, default in self.record.hyperparameters.items() if key != "learning_rate"}
        self.optimizer = _make(self.record, params, self.values)
        _skip_single_replica_all_reduce(self.optimizer)
        # Adam(W) in one pass over memory; only worth it where XLA fuses the pass (xla_fusion).
        # (SGD keeps Keras's form unfused: see `single_pass_momentum`.)
        self.optimizer.single_pass = single_pass and isinstance(self.optimizer, _SinglePassAdamMixin)
        self.optimizer.build(variables)
        # What a new trial zeroes: the step count and the slots (not the hyperparameters).
        hyper = self.hyperparameter_variables
        self.state = [v for v in self.optimizer.variables if not any(v is h for h in hyper)]

    def assign(self, params: Mapping[str, Any], learning_rate: bool = True) -> None:
        """The config's hyperparameters into their variables; `learning_rate=False` leaves the
        rate as it is (a checkpoint's: where a callback's schedule left it)."""
        for key, variable, value in zip(self.record.hyperparameters, self.hyperparameter_variables,
                                        self.hyperparameter_values(params)):
            if learning_rate or key != "learning_rate":
                variable.assign(value)

    @property
    def hyperparameter_variables(self) -> list:
        """The variables holding the hyperparameters, in `hyperparameter_values` order (Keras
        keeps the learning rate in its own)."""
        return [self.optimizer.learning_rate if key == "learning_rate" else self.values[key]
                for key in self.record.hyperparameters]

    def hyperparameter_values(self, params: Mapping[str, Any]) -> list[np.ndarray]:
        return [np.float32(params.get(key, default)) for key, default in self.record.hyperparameters.items()]

    @property
    def learning_rate(self) -> float:
        return float(ops.convert_to_numpy(self.optimizer.learning_rate))


def _skip_single_replica_all_reduce(optimizer: keras.optimizers.Optimizer) -> None:
    """Outside a distribution strategy, Keras's TensorFlow optimizer sums each gradient over
    one replica, an identity that `tf.custom_gradient` wraps; traced, that registers a
    gradient function in TensorFlow's global registry which is never removed and keeps the
    whole traced step alive. Every new architecture then leaked its step graph, about 3 MB
    (benchmarks/worker_memory.py). Without a strategy the gradients pass through unchanged,
    the same values; under one, Keras's sum runs as before."""
    keras_sum = optimizer._all_reduce_sum_gradients

    def all_reduce_sum_gradients(grads_and_vars):
        return keras_sum(grads_and_vars) if tf.distribute.has_strategy() else list(grads_and_vars)

    optimizer._all_reduce_sum_gradients = all_reduce_sum_gradients


def _make(record: OptimizerRecord, params: Mapping[str, Any], values: Mapping[str, Any]) -> keras.optimizers.Optimizer:
    """The record's Keras optimizer (ours where `_TRAINING_CLASSES` has a subclass of it),
    reading its numeric hyperparameters from `values` and named as Keras names it."""
    lr = float(params.get("learning_rate", record.hyperparameters["learning_rate"]))
    cls = _TRAINING_CLASSES.get(record.keras_class) or getattr(keras.optimizers, record.keras_class)
    return cls(lr, **values, **record.structural_values(params), name=record.keras_class.lower())


class _MomentumSGD(keras.optimizers.SGD):
    """SGD with the momentum in a variable. Keras's SGD tests `momentum != 0` in Python;
    here the momentum slots always exist, and momentum 0 reduces exactly to plain SGD."""

    def __init__(self, learning_rate, momentum, nesterov: bool = False, name: str = "sgd"):
        # momentum nonzero: build() makes the slots; named as Keras names its SGD (a root name scope
        # may not start with "_", as the class name would give).
        super().__init__(learning_rate, momentum=0.5, nesterov=nesterov, name=name)
        self.momentum_value = momentum

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        mu = ops.cast(self.momentum_value, variable.dtype)
        m = self.momentums[self._get_variable_index(variable)]
        self.assign(m, ops.subtract(ops.multiply(m, mu), ops.multiply(gradient, lr)))
        if self.nesterov:
            self.assign_add(variable, ops.subtract(ops.multiply(m, mu), ops.multiply(gradient, lr)))
        else:
            self.assign_add(variable, m)


def single_pass_momentum(variable, m, gradient, learning_rate, momentum):
    """One SGD-with-momentum update from the old values -> (new variable, new m): the
    variable's step written apart from the slot's, as in `single_pass_adam`, so that one
    loop does both (20 bytes per parameter instead of 24). Only the fused engine uses it: for
    an unfused step it measured slower than Keras's own form, which `_MomentumSGD` keeps."""
    new_m = m * momentum - gradient * learning_rate
    # The same products of negated factors (negation is exact): equal values, but not the
    # same HLO, so CSE leaves them apart.
    return (variable - (-m) * momentum) + gradient * (-learning_rate), new_m


def single_pass_adam(variable, m, v, gradient, alpha, beta_1, beta_2, epsilon, weight_decay=None, learning_rate=None):
    """One Adam(W) update from the old values -> (new variable, new m, new v).

    Keras assigns m, then v, then the variable from the new m and v; XLA:CPU runs that as
    three loops over memory (40 bytes per parameter). Here the variable's step is computed
    from the *old* slots through an algebraically equal form of their update, written so
    that XLA's common-subexpression pass cannot merge it with the slots' own (it would then
    have to store them before the step reads them): with multi-output fusion the three
    results come out of one loop, 28 bytes per parameter. The slots follow Keras's formula;
    the variable's step uses the other form, so it can differ from Keras's by a rounding
    of m or v (tests/training/test_single_pass_updates.py). AdamW's decay, given
    `weight_decay` and `learning_rate`, comes first, as Keras applies it."""
    from keras import ops

    new_m = m + (gradient - m) * (1 - beta_1)
    new_v = v + (ops.square(gradient) - v) * (1 - beta_2)
    step_m = m * beta_1 + gradient * (1 - beta_1)
    step_v = v * beta_2 + (gradient * (1 - beta_2)) * gradient
    decayed = variable if weight_decay is None else variable - variable * weight_decay * learning_rate
    return decayed - (step_m * alpha) / (ops.sqrt(step_v) + epsilon), new_m, new_v


class _SinglePassAdamMixin:
    """Keras's Adam and AdamW, updating through `single_pass_adam` when `single_pass` is set
    (weight decay then joins the same pass instead of a loop of its own), else through
    TensorFlow's fused Adam kernel (`_backend_update_step`)."""

    single_pass = False

    def _apply_weight_decay(self, variables):
        if not self.single_pass:
            super()._apply_weight_decay(variables)

    def update_step(self, gradient, variable, learning_rate):
        if not self.single_pass or self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        step = ops.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
        alpha = lr * ops.sqrt(1 - ops.power(beta_2, step)) / (1 - ops.power(beta_1, step))
        decay = None
        if self.weight_decay is not None and self._use_weight_decay(variable):
            decay = ops.cast(self.weight_decay, dtype)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        # Read now, before any assignment: the step is computed from the old values.
        old = [ops.convert_to_tensor(x) for x in (variable, m, v)]
        new_variable, new_m, new_v = single_pass_adam(*old, ops.cast(gradient, dtype),
                                                      alpha, beta_1, beta_2, ops.cast(self.epsilon, dtype), decay, lr)
        self.assign(variable, new_variable)
        self.assign(m, new_m)
        self.assign(v, new_v)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        """Keras's Adam update, as TensorFlow's one `ResourceApplyAdam` kernel per variable,
        with the step's scalars (beta powers, casts) computed once instead of per variable.
        The kernel computes Keras's formula in Keras's order (alpha = lr sqrt(1 - beta_2^t) /
        (1 - beta_1^t); m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2); variable -= m
        alpha / (sqrt(v) + epsilon)), so it trains bit for bit as Keras's update
        (tests/tuner/test_adam_kernel.py), as one op instead of about twenty: a new
        architecture's step traces, optimises and starts in about half the time, and a small
        CNN's step runs faster (benchmarks/RESULTS.md, "One Keras Tuner script under each
        import"). Sparse gradients, AMSGrad, the single pass and distribution strategies keep
        Keras's path."""
        if (self.single_pass or self.amsgrad or tf.distribute.has_strategy()
                or not all(isinstance(g, tf.Tensor) for g in grads)):
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        scalars: dict = {}
        for gradient, variable in zip(grads, trainable_variables):
            variable = variable.value if isinstance(variable, keras.Variable) else variable
            dtype = variable.dtype
            if dtype not in scalars:
                step = ops.cast(self.iterations + 1, dtype)
                beta_1, beta_2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
                scalars[dtype] = {"beta1_power": ops.power(beta_1, step), "beta2_power": ops.power(beta_2, step),
                                  "lr": ops.cast(learning_rate, dtype), "beta1": beta_1, "beta2": beta_2,
                                  "epsilon": ops.cast(self.epsilon, dtype)}
            index = self._get_variable_index(variable)
            tf.raw_ops.ResourceApplyAdam(var=variable.handle, m=self._momentums[index].handle,
                                         v=self._velocities[index].handle, grad=ops.cast(gradient, dtype),
                                         use_locking=False, **scalars[dtype])


class _Adam(_SinglePassAdamMixin, keras.optimizers.Adam):
    pass


class _AdamW(_SinglePassAdamMixin, keras.optimizers.AdamW):
    pass


# The registry's Keras classes that train as a subclass of ours (the others as Keras's own).
_TRAINING_CLASSES = {"Adam": _Adam, "AdamW": _AdamW, "SGD": _MomentumSGD}
assert set(_TRAINING_CLASSES) <= {record.keras_class for record in OPTIMIZERS.values()}
