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
    architecture signature, so a group shares it and it stays a Python constant here too.

    Each update rule is a subclass that overrides `_update` (one variable's step) and names
    its slots; `fused_optimizer` picks the subclass for the registry's optimizer."""

    # The Keras optimizer's attribute holding each slot's list, by this class's slot name.
    keras_slot_attributes: Mapping[str, str] = {}

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
        self.structure = OPTIMIZERS[kind].structural_values(params[0])
        self.hyper = {key: keras.Variable(np.array([float(p.get(key, default)) for p in params], "float32"),
                                          trainable=False, name=f"fused_{key}")
                      for key, default in OPTIMIZERS[kind].hyperparameters.items()}
        self.iterations = keras.Variable(np.zeros(self.k, "int64"), trainable=False, name="fused_iterations")
        self.slots = {name: [keras.Variable(np.zeros(v.shape, "float32"), trainable=False) for v in variables]
                      for name in self._slot_names()}

    def _slot_names(self) -> list[str]:
        """The slots this rule keeps per variable (given the group's structural values)."""
        raise NotImplementedError

    def _update(self, i: int, g, var, lr, step) -> None:
        """Variable i's step: `g` its gradient, `lr` the learning rates shaped to broadcast over
        it, `step` the [K] step counts from 1."""
        raise NotImplementedError

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
            self._update(i, g, var, self._per_trial(self.hyper["learning_rate"], i), step)
        self.iterations.assign_add(ops.ones_like(self.iterations))

    def keras_slots(self, keras_optimizer) -> dict[str, list]:
        """The unfused Keras optimizer's slot lists that match `self.slots`, by name."""
        return {name: getattr(keras_optimizer, self.keras_slot_attributes[name]) for name in self.slots}

    def import_state(self, k: int, unfused_variables, keras_optimizer) -> None:
        """Trial k's step count and slots from an unfused Keras optimizer over `unfused_variables`
        (the model's trainable variables, in the order of this optimizer's slots). Its rate stays
        the config's (set by `reset`): fused trials run no callbacks (`fusable`), so nothing moves
        a rate between a parent's checkpoint and its promotion."""
        assign_trial_slice(self.iterations, 0, k, keras_optimizer.iterations.value)
        slots = self.keras_slots(keras_optimizer)
        for name, stacked in self.slots.items():
            for fused, axis, unfused in zip(stacked, self.trial_axes, unfused_variables):
                assign_trial_slice(fused, axis, k, slots[name][keras_optimizer._get_variable_index(unfused)].value)


class _FusedAdam(FusedOptimizer):
    """Keras's Adam and AdamW (decoupled weight decay first, as Keras applies it)."""

    keras_slot_attributes = {"momentum": "_momentums", "velocity": "_velocities"}

    def _slot_names(self) -> list[str]:
        return ["momentum", "velocity"]

    def _update(self, i: int, g, var, lr, step) -> None:
        from keras import ops

        hyper, per_trial = self.hyper, self._per_trial
        decay = per_trial(hyper["weight_decay"], i) if "weight_decay" in hyper else None
        if decay is not None and not self.single_pass:
            var.assign(var - var * decay * lr)
        beta_1, beta_2 = per_trial(hyper["beta_1"], i), per_trial(hyper["beta_2"], i)
        epsilon = per_trial(hyper["epsilon"], i)
        power_1 = per_trial(ops.power(hyper["beta_1"], step), i)
        power_2 = per_trial(ops.power(hyper["beta_2"], step), i)
        alpha = lr * ops.sqrt(1 - power_2) / (1 - power_1)
        m, v = self.slots["momentum"][i], self.slots["velocity"][i]
        if self.single_pass:
            updated = single_pass_adam(var.value, m.value, v.value, g, alpha, beta_1, beta_2, epsilon, decay, lr)
            for target, value in zip((var, m, v), updated):
                target.assign(value)
            return
        m.assign_add((g - m) * (1 - beta_1))
        v.assign_add((ops.square(g) - v) * (1 - beta_2))
        var.assign_sub((m * alpha) / (ops.sqrt(v) + epsilon))


class _FusedSGD(FusedOptimizer):
    """Keras's SGD with momentum, Nesterov's too (ours keeps the momentum slots at momentum 0)."""

    keras_slot_attributes = {"momentum": "momentums"}

    def _slot_names(self) -> list[str]:
        return ["momentum"]

    def _update(self, i: int, g, var, lr, step) -> None:
        m, momentum = self.slots["momentum"][i], self._per_trial(self.hyper["momentum"], i)
        if self.structure["nesterov"]:           # Keras's form: no single-pass variant was timed
            m.assign(m * momentum - g * lr)
            var.assign_add(m * momentum - g * lr)
            return
        if self.single_pass:
            for target, value in zip((var, m), single_pass_momentum(var.value, m.value, g, lr, momentum)):
                target.assign(value)
            return
        m.assign(m * momentum - g * lr)
        var.assign_add(m)


class _FusedRMSprop(FusedOptimizer):
    """Keras's RMSprop (uncentred), step by step; its momentum is one constant for the group,
    and Keras keeps a momentum slot only when it is above 0."""

    keras_slot_attributes = {"velocity": "_velocities", "momentum": "_momentums"}

    def _slot_names(self) -> list[str]:
        return ["velocity"] + ["momentum"] * (self.structure["momentum"] > 0)

    def _update(self, i: int, g, var, lr, step) -> None:
        from keras import ops

        rho, epsilon = self._per_trial(self.hyper["rho"], i), self._per_trial(self.hyper["epsilon"], i)
        velocity = self.slots["velocity"][i]
        velocity.assign(rho * velocity + (1 - rho) * ops.square(g))
        increment = (lr * g) / ops.sqrt(velocity + epsilon)
        momentum = self.structure["momentum"]
        if momentum > 0:
            m = self.slots["momentum"][i]
            m.assign(momentum * m + increment)
            var.assign_sub(m)
        else:
            var.assign_sub(increment)


# The fused update of each Keras class the registry names. An optimizer whose class is not
# here trains unfused (`has_fused_update`); tests/training/test_optimizer_records.py checks
# that every registry optimizer has one, so a new record without one is a decision, not a slip.
_FUSED_BY_KERAS_CLASS: dict[str, type[FusedOptimizer]] = {"Adam": _FusedAdam, "AdamW": _FusedAdam,
                                                          "SGD": _FusedSGD, "RMSprop": _FusedRMSprop}
assert set(_FUSED_BY_KERAS_CLASS) <= {record.keras_class for record in OPTIMIZERS.values()}


def has_fused_update(kind: str) -> bool:
    """Whether the registry's optimizer `kind` has a fused update."""
    return OPTIMIZERS[kind].keras_class in _FUSED_BY_KERAS_CLASS


def fused_optimizers() -> tuple[str, ...]:
    """The registry's optimizers that have a fused update, in its order."""
    return tuple(kind for kind in OPTIMIZERS if has_fused_update(kind))


def fused_optimizer(kind: str, params: Sequence[Mapping[str, Any]], variables: list, trial_axes: Sequence[int],
                    single_pass: bool = False) -> FusedOptimizer:
    """The fused optimizer of the registry's `kind` (one that `has_fused_update`) over K trials'
    stacked `variables`, each trial's hyperparameters from its `params`."""
    cls = _FUSED_BY_KERAS_CLASS[OPTIMIZERS[kind].keras_class]
    return cls(kind, params, variables, trial_axes, single_pass)


def assign_trial_slice(variable, axis: int, k: int, value) -> None:
    """Trial k's slice of a stacked variable = value (the TensorFlow variable takes slice assignment)."""
    variable.value[(slice(None),) * axis + (k,)].assign(value)
