"""`HyperParameters`: what `build_model(hp)` calls, with Keras Tuner's methods.

One object serves two purposes. Given `values` (a trial's config) it answers each call with
that value, or with the parameter's default where the config has none (an inactive
conditional parameter). While answering it records every parameter it was asked for, in
order, with the `conditional_scope`s it was asked under: running `build_model` on one is how
the search space is discovered (`hpo.tuner.discovery`). No TensorFlow here.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from hpo.space import python_values


class DeclaredTwice(ValueError):
    """One name declared with two ranges (Keras Tuner allows it in exclusive
    `conditional_scope`s): hpo's space gives each name one range."""

    def __init__(self, message: str, name: str):
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class Declared:
    """One parameter as `build_model` declared it."""

    name: str
    kind: str                       # 'int', 'float', 'choice', 'boolean', 'fixed'
    default: Any
    low: Any = None
    high: Any = None
    step: Any = None
    log: bool = False
    values: tuple[Any, ...] = ()
    # the conditional_scope(s) it was declared under: parent name -> allowed values
    conditions: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def grid(self, limit: int) -> tuple[Any, ...] | None:
        """Every value, when there are at most `limit` (None for a continuous or large range)."""
        if self.kind == "choice":
            return self.values
        if self.kind == "boolean":
            return (False, True)
        if self.kind == "int":
            step = self.step or 1
            count = (self.high - self.low) // step + 1
            return tuple(range(self.low, self.high + 1, step)) if count <= limit else None
        return None

    def signature(self) -> tuple:
        """What must agree when the same name is declared twice."""
        return (self.kind, self.low, self.high, self.step, self.log, self.values)


@dataclass
class HyperParameters:
    """Keras Tuner's `HyperParameters` as far as `build_model` uses it: `Int`, `Float`,
    `Choice`, `Boolean`, `Fixed`, `conditional_scope`, `get` and `values`."""

    values: dict[str, Any] = field(default_factory=dict)
    declared: dict[str, Declared] = field(default_factory=dict, repr=False)
    # names in the order they were asked for in the last build
    asked: list[str] = field(default_factory=list, repr=False)
    _scopes: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list, repr=False)

    # --- declarations -----------------------------------------------------------------------
    def Int(self, name: str, min_value: int, max_value: int, step: int | None = None, sampling: str = "linear",
            default: int | None = None, parent_name: str | None = None, parent_values: Any = None) -> int | None:
        min_value, max_value, step, default = python_values((min_value, max_value, step, default))
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (min_value, max_value)):
            raise ValueError(f"hp.Int({name!r}): min_value and max_value must be integers, got "
                             f"{min_value!r} and {max_value!r}")
        if min_value > max_value:
            raise ValueError(f"hp.Int({name!r}): min_value {min_value} is above max_value {max_value}")
        log = _sampling(name, sampling)
        if step is not None and step < 1:
            raise ValueError(f"hp.Int({name!r}): step must be >= 1, got {step}")
        if step is not None and log:
            raise ValueError(f"hp.Int({name!r}): a step with sampling='log' (Keras Tuner's multiplicative "
                             f"steps) is not supported; drop the step or use hp.Choice")
        default = min_value if default is None else default
        return self._declare(Declared(name, "int", default, min_value, max_value, step if step != 1 else None, log),
                             parent_name, parent_values)

    def Float(self, name: str, min_value: float, max_value: float, step: float | None = None,
              sampling: str = "linear", default: float | None = None, parent_name: str | None = None,
              parent_values: Any = None) -> float | None:
        min_value, max_value, step, default = python_values((min_value, max_value, step, default))
        if not (math.isfinite(min_value) and math.isfinite(max_value)) or min_value > max_value:
            raise ValueError(f"hp.Float({name!r}): expected finite min_value <= max_value, got "
                             f"{min_value!r} and {max_value!r}")
        log = _sampling(name, sampling)
        if log and min_value <= 0:
            raise ValueError(f"hp.Float({name!r}): sampling='log' needs min_value > 0, got {min_value}")
        if step is not None and log:
            raise ValueError(f"hp.Float({name!r}): a step with sampling='log' is not supported; "
                             f"use hp.Choice for a grid")
        default = float(min_value if default is None else default)
        return self._declare(Declared(name, "float", default, float(min_value), float(max_value), step, log),
                             parent_name, parent_values)

    def Choice(self, name: str, values: Sequence[Any], ordered: bool | None = None, default: Any = None,
               parent_name: str | None = None, parent_values: Any = None) -> Any:
        values, default = tuple(python_values(list(values))), python_values(default)
        if not values:
            raise ValueError(f"hp.Choice({name!r}): values is empty")
        kinds = {type(v) for v in values}
        mixed = len(kinds - {bool}) > 1 and kinds != {int, float}
        if not kinds <= {int, float, str, bool} or mixed:
            raise ValueError(f"hp.Choice({name!r}): values must all be ints/floats, all strings or all "
                             f"booleans, got {values!r}")
        default = values[0] if default is None else default
        if default not in values:
            raise ValueError(f"hp.Choice({name!r}): default {default!r} is not among {values!r}")
        return self._declare(Declared(name, "choice", default, values=values), parent_name, parent_values)

    def Boolean(self, name: str, default: bool = False, parent_name: str | None = None,
                parent_values: Any = None) -> bool:
        return self._declare(Declared(name, "boolean", bool(default)), parent_name, parent_values)

    def Fixed(self, name: str, value: Any, parent_name: str | None = None, parent_values: Any = None) -> Any:
        value = python_values(value)
        return self._declare(Declared(name, "fixed", value, values=(value,)), parent_name, parent_values)

    @contextlib.contextmanager
    def conditional_scope(self, parent_name: str, parent_values: Any) -> Iterator[None]:
        """Parameters declared inside are active only when `parent_name` takes one of
        `parent_values` (Keras Tuner's rule: inside an inactive scope they return None)."""
        if parent_name not in self.declared:
            raise ValueError(f"conditional_scope({parent_name!r}): declare {parent_name!r} before the scope")
        allowed = tuple(parent_values) if isinstance(parent_values, (list, tuple)) else (parent_values,)
        self._scopes.append((parent_name, allowed))
        try:
            yield
        finally:
            self._scopes.pop()

    def get(self, name: str) -> Any:
        """The parameter's value: the one set (a trial's, `get_best_hyperparameters`'), else
        its declared default, as Keras Tuner's `get` reads it."""
        if name in self.values:
            return self.values[name]
        if name not in self.declared:
            raise KeyError(f"{name!r} has not been declared")
        return self.declared[name].default

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self.declared or name in self.values

    @property
    def space(self) -> list[Declared]:
        return list(self.declared.values())

    def is_active(self, name: str) -> bool:
        return self._active(self.declared[name].conditions)

    # --- Keras Tuner's names for what we do not support --------------------------------------
    def __getattr__(self, name: str):
        if name in ("merge", "copy", "from_config", "get_config", "Fixed_", "ordered"):
            raise NotImplementedError(f"HyperParameters.{name} is Keras Tuner API that hpo does not support")
        raise AttributeError(name)

    # --- internals ----------------------------------------------------------------------------
    def _declare(self, declared: Declared, parent_name: str | None, parent_values: Any) -> Any:
        scopes = list(self._scopes)
        if parent_name is not None:
            allowed = tuple(parent_values) if isinstance(parent_values, (list, tuple)) else (parent_values,)
            scopes.append((parent_name, allowed))
        declared = Declared(**{**declared.__dict__, "conditions": tuple(scopes)})
        known = self.declared.get(declared.name)
        if known is not None and known.signature() != declared.signature():
            raise DeclaredTwice(f"hyperparameter {declared.name!r} is declared twice with different ranges: "
                                f"{known.signature()} and {declared.signature()}", declared.name)
        if known is None:
            self.declared[declared.name] = declared
        if declared.name not in self.asked:
            self.asked.append(declared.name)
        if not self._active(declared.conditions):
            return None
        value = declared.default if declared.kind == "fixed" else self.values.get(declared.name, declared.default)
        # As in Keras Tuner, `values` holds every active parameter once asked for: a
        # HyperParameters that built a model lists the values it built with.
        self.values.setdefault(declared.name, value)
        return value

    def _active(self, conditions) -> bool:
        for parent, allowed in conditions:
            if parent not in self.declared or not self._active(self.declared[parent].conditions):
                return False
            if self.get(parent) not in allowed:
                return False
        return True


def _sampling(name: str, sampling: str | None) -> bool:
    sampling = (sampling or "linear").lower()
    if sampling not in ("linear", "log"):
        raise ValueError(f"hp {name!r}: sampling {sampling!r} is not supported by hpo; expected 'linear' or 'log' "
                         f"(Keras Tuner's 'reverse_log' has no hpo counterpart)")
    return sampling == "log"


def values_of(hp: "HyperParameters | Mapping[str, Any]") -> dict[str, Any]:
    return dict(hp.values) if isinstance(hp, HyperParameters) else dict(hp)
