"""A trial's initial weights without building a live Keras model.

A reused program needs only the *values* a fresh seeded build would give. Building the
model for real creates a TensorFlow variable per weight (2-3 ms each on a 2-core CPU) and costs
18 ms for a 2x128 MLP. Built inside a `StatelessScope(initialize_variables=False)`, Keras
records each variable's shape and initializer instead of creating it; calling those
initializers gives the same values (the seeds are drawn from Python's `random` when the
initializers are constructed, in the same order as a real build) at 8 ms.

Those 8 ms are still mostly the builder's Python, and a small model trains a whole
Hyperband rung in a few times that. So once two stateless builds of one architecture have
been seen, an `InitRecipe` replays them: it draws the same seeds from Python's `random` and
calls only the random initializers. The recipe is learnt by comparing the two builds, and
kept only if it reproduces the second one exactly. Called eagerly, each initializer is
still half a dozen dispatched operations: 3.4-4.5 ms per trial for a 2x128 MLP on the
2-core AMD EPYC. So once the eager replays of an architecture have cost what a trace costs
(`bulk_variables.TRACE_SECONDS`), its initializers are traced into one graph that takes
the seeds as a tensor (`_SeededValues`), kept only if it gives that call's eager values
bit for bit: 1.2-1.3 ms.

This leans on private attributes of Keras variables (`_initializer`, `_shape`) and on
initializers keeping their seed in `.seed`, so the trainer checks the stateless values
against a real build once per architecture (`FreshWeights.checked`), and the recipe
against a stateless build; a Keras release that changes them falls back to builds.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import time
from typing import Any, Callable, Mapping, Sequence

import keras
import numpy as np

from hpo.training.bulk_variables import EagerUntilRepaid

# Keras's `make_default_seed()`: every unseeded initializer and SeedGenerator draws one.
_SEED_LOW, _SEED_HIGH = 1, int(1e9)
_MAX_DRAWS = 10_000


@dataclasses.dataclass
class StatelessBuild:
    """What one stateless build of the builder gave, under the seed the caller set."""
    params: dict[str, Any]
    initializers: list            # per variable, `model.variables` order
    shapes: list[tuple]
    dtypes: list[str]
    values: list                  # the initialised tensors
    draws: list[int] | None       # the seeds it drew from Python's `random`, in order (None:
                                  # it used `random` otherwise, so it cannot be replayed)


def stateless_build(builder: Callable, params: Mapping[str, Any], input_shape: tuple,
                    num_classes: int, record_draws: bool = False) -> StatelessBuild | None:
    """The builder's variables as freshly initialised tensors, with what made them (the seed
    draws only if `record_draws`: finding them costs a replay of `random`); None when this
    Keras does not defer initialisation."""
    import keras
    from keras.src.backend.common import global_state

    key = "uninitialized_variables"
    before = list(global_state.get_global_attribute(key, []) or [])
    random_before = random.getstate()
    try:
        with keras.StatelessScope(initialize_variables=False):
            model = builder(params, input_shape, num_classes)
        build = StatelessBuild(dict(params), [], [], [], [], [])
        for variable in model.variables:
            initializer, shape = getattr(variable, "_initializer", None), getattr(variable, "_shape", None)
            if not callable(initializer) or shape is None:
                return None
            build.initializers.append(initializer)
            build.shapes.append(tuple(shape))
            build.dtypes.append(variable.dtype)
            build.values.append(initializer(shape, dtype=variable.dtype))
        build.draws = _seed_draws(random_before, random.getstate()) if record_draws else None
        return build
    finally:
        # The deferred variables are registered globally for a later initialize_all_variables();
        # ours are never initialised, and keeping them would leak one model per trial.
        global_state.set_global_attribute(key, before)


def same_values(model_variables: Sequence, values: Sequence | None) -> bool:
    """Whether `values` are exactly a real build's variable values."""
    from keras import ops

    if values is None or len(values) != len(model_variables):
        return False
    return all(tuple(v.shape) == tuple(value.shape) and
               np.array_equal(ops.convert_to_numpy(v.value), ops.convert_to_numpy(value))
               for v, value in zip(model_variables, values))


def _seed_draws(start_state, end_state) -> list[int] | None:
    """The seeds Keras drew between two states of Python's `random`, found by making its
    call from the start state until the end state comes back; None when the builder used
    `random` some other way."""
    rng = random.Random()
    rng.setstate(start_state)
    draws: list[int] = []
    while rng.getstate() != end_state:
        if len(draws) >= _MAX_DRAWS:
            return None
        draws.append(rng.randint(_SEED_LOW, _SEED_HIGH))
    return draws


# --- replaying a build ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Seeded:
    """A random initializer: the same object, called with the seed drawn at `draw`."""
    initializer: Any
    shape: tuple
    dtype: str
    draw: int


@dataclasses.dataclass(frozen=True)
class _DrawnIntegers:
    """An integer value holding drawn seeds (a SeedGenerator's state): `draws` maps a flat
    position to the draw it holds; every other position is as in `template`."""
    template: np.ndarray
    draws: tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class _FromParam:
    """A value filled with one of the trial's parameters (TunableDropout's rate)."""
    name: str
    shape: tuple
    dtype: str


@dataclasses.dataclass(frozen=True)
class _Fixed:
    """The same for every trial of the architecture (zero biases, an explicitly seeded kernel)."""
    value: np.ndarray


@dataclasses.dataclass(frozen=True)
class InitRecipe:
    """How one architecture's initial values follow from the trial's seed and parameters."""
    draws: int
    parts: tuple
    # The random initializers' values, eager or traced (`_SeededValues`); None: eager here.
    seeded: Any = dataclasses.field(default=None, compare=False, repr=False)
    # Tunable parameters whose value was the same in both builds it was learnt from, with that
    # value: a variable holding one reads as a constant, so it covers that value only.
    pinned: tuple[tuple[str, Any], ...] = ()
    # The second of those builds, where pinned: with a trial outside the pins it teaches a new recipe.
    learnt_from: "StatelessBuild | None" = dataclasses.field(default=None, compare=False, repr=False)

    def covers(self, params: Mapping[str, Any]) -> bool:
        """Whether `params` has every parameter the recipe fills a value from (a conditional
        one may be absent, leaving the builder's own default), and each pinned one at its value."""
        return all(part.name in params for part in self.parts if isinstance(part, _FromParam)) \
            and all(name in params and params[name] == value for name, value in self.pinned)

    def values(self, params: Mapping[str, Any]) -> list:
        """A fresh build's values under the seed the caller set; leaves Python's `random` where
        the build would."""
        return self._values(params, [random.randint(_SEED_LOW, _SEED_HIGH) for _ in range(self.draws)])

    def _values(self, params: Mapping[str, Any], draws: Sequence[int]) -> list:
        seeded = iter(self.seeded(draws) if self.seeded is not None else
                      [_initial_value(part, draws) for part in self.parts if isinstance(part, _Seeded)])
        values = []
        for part in self.parts:
            if isinstance(part, _Seeded):
                values.append(next(seeded))
            elif isinstance(part, _DrawnIntegers):
                value = part.template.copy()
                flat = value.reshape(-1)
                for position, draw in part.draws:
                    flat[position] = draws[draw]
                values.append(value)
            elif isinstance(part, _FromParam):
                values.append(np.full(part.shape, params[part.name], dtype=part.dtype))
            else:
                values.append(part.value)
        return values


def same_in_both(a: Mapping[str, Any], b: Mapping[str, Any], names: Sequence[str]) -> tuple[tuple[str, Any], ...]:
    """The `names` two trials both have at one value, with it: `learn_recipe` cannot tell such a
    parameter's value from a constant, so a recipe learnt from them is pinned to it."""
    return tuple((name, a[name]) for name in names if name in a and name in b and a[name] == b[name])


def learn_recipe(first: StatelessBuild, second: StatelessBuild, tunable: Sequence[str] = ()) -> InitRecipe | None:
    """A recipe that explains both builds (different seeds, and different values of every
    parameter a variable might hold; `tunable` names are tried first), checked by replaying
    the second exactly; None when a variable follows neither the seeds, a parameter nor a
    constant."""
    if (first.draws is None or second.draws is None or len(first.draws) != len(second.draws)
            or len(set(first.draws)) != len(first.draws)
            or first.shapes != second.shapes or first.dtypes != second.dtypes):
        return None
    position = {draw: i for i, draw in enumerate(first.draws)}
    parts = []
    for i in range(len(first.shapes)):
        part = _explain(first, second, i, position, tunable)
        if part is None:
            return None
        parts.append(part)
    recipe = InitRecipe(len(first.draws), tuple(parts))
    try:
        replayed = recipe._values(second.params, second.draws)
    except Exception:   # noqa: BLE001 - an initializer that will not take a new seed: no recipe
        return None
    if not _exactly(replayed, second.values):
        return None
    return dataclasses.replace(recipe, seeded=_SeededValues(recipe.parts))


def _initial_value(part: _Seeded, draws: Sequence[int], seed=None):
    """The part's initializer called as in a build, with the seed it drew (or `seed`)."""
    initializer = copy.copy(part.initializer)
    initializer.seed = draws[part.draw] if seed is None else seed
    return initializer(part.shape, dtype=part.dtype)


def _exactly(values: Sequence, expected: Sequence) -> bool:
    pairs = [(_numpy(a), _numpy(b)) for a, b in zip(values, expected, strict=True)]
    return all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in pairs)


class _SeededValues:
    """A recipe's random initializers -> their values for the seed draws, in the recipe's
    order: called eagerly until that has cost a trace, then as one traced function of the
    draws, kept only if it gives that call's eager values bit for bit. In the trace each
    initializer's seed is a `SeedGenerator` stand-in whose `next()` gives the draw as Keras
    makes an int seed into a tensor ([seed, 0], int64), so the graph runs the same kernels
    on the same inputs."""

    def __init__(self, parts: Sequence, trace_seconds: float | None = None):
        self._seeded = [part for part in parts if isinstance(part, _Seeded)]
        self._n_draws = 1 + max((part.draw for part in self._seeded), default=0)
        self._eager = EagerUntilRepaid(trace_seconds)
        self._traced = None            # the traced function, once it has matched
        self._settled = False          # traced, or tried and found to differ

    def __call__(self, draws: Sequence[int]) -> list:
        if self._traced is not None:
            return self._traced(np.asarray(draws[:self._n_draws], dtype=np.int64))
        started = time.perf_counter()
        values = [_initial_value(part, draws) for part in self._seeded]
        if not self._settled and self._eager.add(started):
            self._traced, self._settled = self._trace_matching(draws, values), True
        return values

    def _trace_matching(self, draws: Sequence[int], expected: list):
        import tensorflow as tf

        try:
            traced = tf.function(tf.autograph.experimental.do_not_convert(self._draw)).get_concrete_function(
                tf.TensorSpec([self._n_draws], tf.int64))
            exact = _exactly(traced(np.asarray(draws[:self._n_draws], dtype=np.int64)), expected)
        except Exception:   # noqa: BLE001 - an initializer that will not trace: eager it stays
            return None
        return traced if exact else None

    def _draw(self, draws):
        return [_initial_value(part, (), seed=_DrawnSeed(draws[part.draw])) for part in self._seeded]

    @property
    def traced(self) -> bool:
        return self._traced is not None


class _DrawnSeed(keras.random.SeedGenerator):
    """One drawn seed, as Keras's `draw_seed` makes an int seed into a tensor."""

    def __init__(self, seed):          # no state variable: nothing advances
        self._drawn = seed

    def next(self, ordered: bool = True):
        import tensorflow as tf
        return tf.stack([self._drawn, tf.zeros_like(self._drawn)])


def _explain(first: StatelessBuild, second: StatelessBuild, i: int, position: dict[int, int],
             tunable: Sequence[str]):
    a, b = _numpy(first.values[i]), _numpy(second.values[i])
    shape, dtype = first.shapes[i], first.dtypes[i]
    seed = getattr(first.initializers[i], "seed", None)
    if isinstance(seed, int) and not isinstance(seed, bool) and seed in position:
        return _Seeded(first.initializers[i], shape, dtype, position[seed])
    if np.issubdtype(a.dtype, np.integer):
        drawn = tuple((p, position[int(v)]) for p, v in enumerate(a.reshape(-1)) if int(v) in position)
        if drawn:
            return _DrawnIntegers(a, drawn)
    if np.array_equal(a, b):
        return _Fixed(a)
    shared = set(first.params) & set(second.params)
    for name in [n for n in tunable if n in shared] + sorted(shared - set(tunable)):
        try:
            held_a = np.full(shape, first.params[name], dtype=a.dtype)
            held_b = np.full(shape, second.params[name], dtype=b.dtype)
        except (TypeError, ValueError):
            continue
        if np.array_equal(a, held_a) and np.array_equal(b, held_b):
            return _FromParam(name, shape, dtype)
    return None


def _numpy(value) -> np.ndarray:
    from keras import ops
    return np.asarray(ops.convert_to_numpy(value))
