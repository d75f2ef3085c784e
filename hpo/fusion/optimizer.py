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

from hpo.training.optimizers import HYPERPARAMETERS, single_pass_adam, single_pass_momentum, structural_signature


class FusedOptimizer:
    """Adam, AdamW, SGD with momentum or RMSprop over stacked variables, hyperparameters as [K]
    vectors, computed as Keras's own optimizers compute them. What Keras branches on in Python
    (SGD's `nesterov`, RMSprop's `momentum`) is in the architecture signature, so a group
    shares it and it stays a Python constant here too."""

    def __init__(self, kind: str, params: Sequence[Mapping[str, Any]], variables: list, trial_axes: Sequence[int],
                 single_pass: bool = False):
        import keras

        self.kind = kind
        self.single_pass = single_pass          # `single_pass_adam` / `_momentum` (see xla_fusion)
        self.k = len(params)
        self.trial_axes = list(trial_axes)
        self.shapes = [tuple(v.shape) for v in variables]
        structural = structural_signature(params[0])
        if any(structural_signature(p) != structural for p in params):
            raise ValueError(f"fused trials must share the optimizer's structure ({structural})")
        self.nesterov = bool(structural.get("nesterov", False))
        self.rmsprop_momentum = float(structural.get("momentum", 0.0)) if kind == "rmsprop" else 0.0
        self.hyper = {key: keras.Variable(np.array([float(p.get(key, default)) for p in params], "float32"),
                                          trainable=False, name=f"fused_{key}")
                      for key, default in HYPERPARAMETERS[kind].items()}
        self.iterations = keras.Variable(np.zeros(self.k, "int64"), trainable=False, name="fused_iterations")
        # Keras's slots for the kind (RMSprop keeps momentum only when it is above 0).
        names = {"sgd": ["momentum"], "rmsprop": ["velocity"] + ["momentum"] * (self.rmsprop_momentum > 0)}
        self.slots = {name: [keras.Variable(np.zeros(v.shape, "float32"), trainable=False) for v in variables]
                      for name in names.get(kind, ["momentum", "velocity"])}

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
                for key, default in HYPERPARAMETERS[self.kind].items()]

    def _per_trial(self, values, i: int):
        """A [K] vector shaped to broadcast over variable i (K on its trial axis)."""
        from keras import ops
        shape = [1] * len(self.shapes[i])
        shape[self.trial_axes[i]] = self.k
        return ops.reshape(values, shape)

    def apply(self, grads, variables) -> None:
        from keras import ops

        step = ops.cast(self.iterations + 1, "float32")                 # [K]
        for i, (g, var) in enumerate(zip(grads, variables)):
            lr = self._per_trial(self.hyper["learning_rate"], i)
            if self.kind == "rmsprop":
                self._rmsprop(g, var, i, lr)
                continue
            if self.kind == "sgd":
                m, momentum = self.slots["momentum"][i], self._per_trial(self.hyper["momentum"], i)
                if self.nesterov:               # Keras's form: no single-pass variant was timed
                    m.assign(m * momentum - g * lr)
                    var.assign_add(m * momentum - g * lr)
                    continue
                if self.single_pass:
                    for target, value in zip((var, m), single_pass_momentum(var.value, m.value, g, lr, momentum)):
                        target.assign(value)
                    continue
                m.assign(m * momentum - g * lr)
                var.assign_add(m)
                continue
            if self.kind == "adamw" and not self.single_pass:
                var.assign(var - var * self._per_trial(self.hyper["weight_decay"], i) * lr)
            beta_1, beta_2 = self._per_trial(self.hyper["beta_1"], i), self._per_trial(self.hyper["beta_2"], i)
            epsilon = self._per_trial(self.hyper["epsilon"], i)
            power_1 = self._per_trial(ops.power(self.hyper["beta_1"], step), i)
            power_2 = self._per_trial(ops.power(self.hyper["beta_2"], step), i)
            alpha = lr * ops.sqrt(1 - power_2) / (1 - power_1)
            m, v = self.slots["momentum"][i], self.slots["velocity"][i]
            if self.single_pass:
                decay = self._per_trial(self.hyper["weight_decay"], i) if self.kind == "adamw" else None
                updated = single_pass_adam(var.value, m.value, v.value, g, alpha, beta_1, beta_2, epsilon, decay, lr)
                for target, value in zip((var, m, v), updated):
                    target.assign(value)
                continue
            m.assign_add((g - m) * (1 - beta_1))
            v.assign_add((ops.square(g) - v) * (1 - beta_2))
            var.assign_sub((m * alpha) / (ops.sqrt(v) + epsilon))
        self.iterations.assign_add(ops.ones_like(self.iterations))

    def _rmsprop(self, g, var, i: int, lr) -> None:
        """Keras's RMSprop (uncentred), step by step; its momentum is one constant for the group."""
        from keras import ops

        rho, epsilon = self._per_trial(self.hyper["rho"], i), self._per_trial(self.hyper["epsilon"], i)
        velocity = self.slots["velocity"][i]
        velocity.assign(rho * velocity + (1 - rho) * ops.square(g))
        increment = (lr * g) / ops.sqrt(velocity + epsilon)
        if self.rmsprop_momentum > 0:
            m = self.slots["momentum"][i]
            m.assign(self.rmsprop_momentum * m + increment)
            var.assign_sub(m)
        else:
            var.assign_sub(increment)

    def keras_slots(self, keras_optimizer) -> dict[str, list]:
        """The unfused Keras optimizer's slot lists that match `self.slots`, by name."""
        if self.kind == "sgd":
            lists = {"momentum": keras_optimizer.momentums}
        else:
            lists = {"momentum": keras_optimizer._momentums, "velocity": keras_optimizer._velocities}
        return {name: lists[name] for name in self.slots}

    def import_state(self, k: int, unfused_variables, keras_optimizer) -> None:
        """Trial k's step count and slots from an unfused Keras optimizer over `unfused_variables`
        (the model's trainable variables, in the order of this optimizer's slots)."""
        assign_trial_slice(self.iterations, 0, k, keras_optimizer.iterations.value)
        slots = self.keras_slots(keras_optimizer)
        for name, stacked in self.slots.items():
            for fused, axis, unfused in zip(stacked, self.trial_axes, unfused_variables):
                assign_trial_slice(fused, axis, k, slots[name][keras_optimizer._get_variable_index(unfused)].value)


def assign_trial_slice(variable, axis: int, k: int, value) -> None:
    """Trial k's slice of a stacked variable = value (the TensorFlow variable takes slice assignment)."""
    variable.value[(slice(None),) * axis + (k,)].assign(value)
