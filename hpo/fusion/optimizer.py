"""The fused optimizer step: Adam, AdamW, SGD with momentum (Nesterov's too) or RMSprop over K
trials' stacked variables.

Each trial's hyperparameters are one entry of a [K] vector, broadcast along each variable's
trial axis, so one compiled update serves K configurations. The update is written out per
element as Keras computes it, so each trial's slice moves exactly as its unfused optimizer
would move it (`tests/training/test_fused.py`). Scaling each trial's loss instead would not do:
Adam's step does not depend on the gradient's scale.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from hpo.registry import OPTIMIZERS
from hpo.training.optimizers import single_pass_adam, single_pass_momentum, structural_signature


class FusedOptimizer:
    """Adam, AdamW, SGD with momentum or RMSprop over stacked variables, hyperparameters as [K]
    vectors, computed as Keras's own optimizers compute them. What Keras branches on in Python
    (the registry's structural keys: SGD's `nesterov`, RMSprop's `momentum`) is in the
    architecture signature, so a group shares it and it stays a Python constant here too."""

    def __init__(self, kind: str, params: Sequence[Mapping[str, Any]], variables: list, trial_axes: Sequence[int],
                 single_pass: bool = False):
        import keras

        self.kind = kind
        self.rule = _RULES[kind]
        self.single_pass = single_pass          # `single_pass_adam` / `_momentum` (see xla_fusion)
        self.k = len(params)
        self.trial_axes = list(trial_axes)
        self.shapes = [tuple(v.shape) for v in variables]
        structural = structural_signature(params[0])
        if any(structural_signature(p) != structural for p in params):
            raise ValueError(f"fused trials must share the optimizer's structure ({structural})")
        self.structure = OPTIMIZERS[kind].structure(params[0])
        self.hyper = {key: keras.Variable(np.array([float(p.get(key, default)) for p in params], "float32"),
                                          trainable=False, name=f"fused_{key}")
                      for key, default in OPTIMIZERS[kind].hyperparameters.items()}
        self.iterations = keras.Variable(np.zeros(self.k, "int64"), trainable=False, name="fused_iterations")
        self.slots = {name: [keras.Variable(np.zeros(v.shape, "float32"), trainable=False) for v in variables]
                      for name in self.rule.slots(self.structure)}

    @property
    def state(self) -> list:
        """What a new group zeroes: the step counts and the slots."""
        return [self.iterations] + [slot for slots in self.slots.values() for slot in slots]

    @property
    def hyperparameter_variables(self) -> list:
        """The [K] hyperparameter vectors, in `hyperparameter_values` order."""
        return list(self.hyper.values())

    def hyperparameter_values(self, params: Sequence[Mapping[str, Any]]) -> list[np.ndarray]:
        return [np.array([float(p.get(key, default)) for p in params], "float32")
                for key, default in OPTIMIZERS[self.kind].hyperparameters.items()]

    def per_trial(self, values, i: int):
        """A [K] vector shaped to broadcast over variable i (K on its trial axis)."""
        from keras import ops
        shape = [1] * len(self.shapes[i])
        shape[self.trial_axes[i]] = self.k
        return ops.reshape(values, shape)

    def apply(self, grads, variables) -> None:
        from keras import ops

        step = ops.cast(self.iterations + 1, "float32")                 # [K]
        for i, (g, var) in enumerate(zip(grads, variables)):
            self.rule.update(self, i, g, var, self.per_trial(self.hyper["learning_rate"], i), step)
        self.iterations.assign_add(ops.ones_like(self.iterations))

    def keras_slots(self, keras_optimizer) -> dict[str, list]:
        """The unfused Keras optimizer's slot lists that match `self.slots`, by name."""
        return {name: getattr(keras_optimizer, self.rule.keras_slots[name]) for name in self.slots}

    def import_state(self, k: int, unfused_variables, keras_optimizer) -> None:
        """Trial k's step count and slots from an unfused Keras optimizer over `unfused_variables`
        (the model's trainable variables, in the order of this optimizer's slots)."""
        assign_trial_slice(self.iterations, 0, k, keras_optimizer.iterations.value)
        slots = self.keras_slots(keras_optimizer)
        for name, stacked in self.slots.items():
            for fused, axis, unfused in zip(stacked, self.trial_axes, unfused_variables):
                assign_trial_slice(fused, axis, k, slots[name][keras_optimizer._get_variable_index(unfused)].value)


class _AdamRule:
    """Keras's Adam and AdamW (decoupled weight decay first, as Keras applies it)."""

    keras_slots = {"momentum": "_momentums", "velocity": "_velocities"}

    @staticmethod
    def slots(structure: Mapping[str, Any]) -> list[str]:
        return ["momentum", "velocity"]

    @staticmethod
    def update(opt: FusedOptimizer, i: int, g, var, lr, step) -> None:
        from keras import ops

        decay = opt.per_trial(opt.hyper["weight_decay"], i) if "weight_decay" in opt.hyper else None
        if decay is not None and not opt.single_pass:
            var.assign(var - var * decay * lr)
        beta_1, beta_2 = opt.per_trial(opt.hyper["beta_1"], i), opt.per_trial(opt.hyper["beta_2"], i)
        epsilon = opt.per_trial(opt.hyper["epsilon"], i)
        power_1 = opt.per_trial(ops.power(opt.hyper["beta_1"], step), i)
        power_2 = opt.per_trial(ops.power(opt.hyper["beta_2"], step), i)
        alpha = lr * ops.sqrt(1 - power_2) / (1 - power_1)
        m, v = opt.slots["momentum"][i], opt.slots["velocity"][i]
        if opt.single_pass:
            updated = single_pass_adam(var.value, m.value, v.value, g, alpha, beta_1, beta_2, epsilon, decay, lr)
            for target, value in zip((var, m, v), updated):
                target.assign(value)
            return
        m.assign_add((g - m) * (1 - beta_1))
        v.assign_add((ops.square(g) - v) * (1 - beta_2))
        var.assign_sub((m * alpha) / (ops.sqrt(v) + epsilon))


class _SGDRule:
    """Keras's SGD with momentum, Nesterov's too (ours keeps the momentum slots at momentum 0)."""

    keras_slots = {"momentum": "momentums"}

    @staticmethod
    def slots(structure: Mapping[str, Any]) -> list[str]:
        return ["momentum"]

    @staticmethod
    def update(opt: FusedOptimizer, i: int, g, var, lr, step) -> None:
        m, momentum = opt.slots["momentum"][i], opt.per_trial(opt.hyper["momentum"], i)
        if opt.structure["nesterov"]:           # Keras's form: no single-pass variant was timed
            m.assign(m * momentum - g * lr)
            var.assign_add(m * momentum - g * lr)
            return
        if opt.single_pass:
            for target, value in zip((var, m), single_pass_momentum(var.value, m.value, g, lr, momentum)):
                target.assign(value)
            return
        m.assign(m * momentum - g * lr)
        var.assign_add(m)


class _RMSpropRule:
    """Keras's RMSprop (uncentred), step by step; its momentum is one constant for the group,
    and Keras keeps a momentum slot only when it is above 0."""

    keras_slots = {"velocity": "_velocities", "momentum": "_momentums"}

    @staticmethod
    def slots(structure: Mapping[str, Any]) -> list[str]:
        return ["velocity"] + ["momentum"] * (structure["momentum"] > 0)

    @staticmethod
    def update(opt: FusedOptimizer, i: int, g, var, lr, step) -> None:
        from keras import ops

        rho, epsilon = opt.per_trial(opt.hyper["rho"], i), opt.per_trial(opt.hyper["epsilon"], i)
        velocity = opt.slots["velocity"][i]
        velocity.assign(rho * velocity + (1 - rho) * ops.square(g))
        increment = (lr * g) / ops.sqrt(velocity + epsilon)
        momentum = opt.structure["momentum"]
        if momentum > 0:
            m = opt.slots["momentum"][i]
            m.assign(momentum * m + increment)
            var.assign_sub(m)
        else:
            var.assign_sub(increment)


# The fused update of each of the registry's optimizers, by its Keras class.
_BY_KERAS_CLASS = {"Adam": _AdamRule, "AdamW": _AdamRule, "SGD": _SGDRule, "RMSprop": _RMSpropRule}
_RULES = {name: _BY_KERAS_CLASS[record.keras_class] for name, record in OPTIMIZERS.items()
          if record.keras_class in _BY_KERAS_CLASS}


def fused_update_for(kind: str) -> bool:
    """Whether the registry's optimizer `kind` has a fused update."""
    return kind in _RULES


def assign_trial_slice(variable, axis: int, k: int, value) -> None:
    """Trial k's slice of a stacked variable = value (the TensorFlow variable takes slice assignment)."""
    variable.value[(slice(None),) * axis + (k,)].assign(value)
