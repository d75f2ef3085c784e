"""Typed search spaces, mapped to and from the unit hypercube.

Every parameter maps its values to [0, 1] so that every searcher (random, Hyperband, the
KDE inside BOHB) works on one shape of space. Conditional parameters (`when:`) are only
active when their parent has one of the given values; inactive ones are absent from the
config dict and NaN in the unit vector.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from hpo.errors import ConfigError, did_you_mean, one_of

PARAM_TYPES = ("float", "int", "choice")


@dataclass(frozen=True)
class Param:
    name: str
    # parent name -> the parent values under which this parameter is active
    when: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)

    def is_active(self, config: Mapping[str, Any]) -> bool:
        return all(parent in config and config[parent] in allowed
                   for parent, allowed in self.when.items())

    # Subclasses implement these four.
    def from_unit(self, u: float) -> Any: raise NotImplementedError
    def to_unit(self, value: Any) -> float: raise NotImplementedError
    def contains(self, value: Any) -> bool: raise NotImplementedError
    def to_dict(self) -> dict[str, Any]: raise NotImplementedError

    def _when_dict(self) -> dict[str, Any]:
        if not self.when:
            return {}
        return {"when": {k: (list(v) if len(v) > 1 else v[0]) for k, v in self.when.items()}}


@dataclass(frozen=True)
class FloatParam(Param):
    """Reals in [low, high], uniform or (log=True) log-uniform."""
    low: float = 0.0
    high: float = 1.0
    log: bool = False

    def from_unit(self, u: float) -> float:
        u = min(max(float(u), 0.0), 1.0)
        if self.log:
            return float(math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low))))
        return float(self.low + u * (self.high - self.low))

    def to_unit(self, value: Any) -> float:
        if self.log:
            return (math.log(value) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (float(value) - self.low) / (self.high - self.low)

    def contains(self, value: Any) -> bool:
        return isinstance(value, (int, float)) and self.low <= value <= self.high

    def to_dict(self) -> dict[str, Any]:
        """The YAML / `from_dict` form."""
        return {"type": "float", "low": self.low, "high": self.high, "log": self.log, **self._when_dict()}


@dataclass(frozen=True)
class IntParam(Param):
    """Integers in [low, high]; each integer owns an equal slice of [0, 1] (of log space if log)."""

    low: int = 0
    high: int = 1
    log: bool = False

    def _edges(self) -> tuple[float, float]:
        lo, hi = self.low - 0.5, self.high + 0.5
        return (math.log(lo), math.log(hi)) if self.log else (lo, hi)

    def from_unit(self, u: float) -> int:
        u = min(max(float(u), 0.0), 1.0)
        lo, hi = self._edges()
        x = lo + u * (hi - lo)
        value = math.floor((math.exp(x) if self.log else x) + 0.5)  # not round(): no banker's rounding
        return int(min(max(value, self.low), self.high))

    def to_unit(self, value: Any) -> float:
        lo, hi = self._edges()
        x = math.log(value) if self.log else float(value)
        return (x - lo) / (hi - lo)

    def contains(self, value: Any) -> bool:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
            and self.low <= value <= self.high

    def to_dict(self) -> dict[str, Any]:
        """The YAML / `from_dict` form."""
        return {"type": "int", "low": self.low, "high": self.high, "log": self.log, **self._when_dict()}


@dataclass(frozen=True)
class ChoiceParam(Param):
    """One of `values` (strings, numbers or booleans), unordered."""
    values: tuple[Any, ...] = ()

    def from_unit(self, u: float) -> Any:
        index = int(min(max(float(u), 0.0), 1.0) * len(self.values))
        return self.values[min(index, len(self.values) - 1)]

    def index(self, value: Any) -> int:
        return self.values.index(value)

    def to_unit(self, value: Any) -> float:
        return (self.index(value) + 0.5) / len(self.values)

    def contains(self, value: Any) -> bool:
        return value in self.values

    def to_dict(self) -> dict[str, Any]:
        """The YAML / `from_dict` form."""
        return {"type": "choice", "values": list(self.values), **self._when_dict()}


class SearchSpace:
    """An ordered set of parameters; parents always come before their children."""

    def __init__(self, params: Sequence[Param]):
        self.params: tuple[Param, ...] = _parents_first(list(params))
        self._by_name = {p.name: p for p in self.params}

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> "SearchSpace":
        """Build from the YAML `space:` mapping; raises ConfigError naming the key."""
        if not isinstance(spec, Mapping) or not spec:
            raise ConfigError("expected a mapping of parameter name -> {type: ..., ...}", key="space")
        params = [_param_from_dict(str(name), body) for name, body in spec.items()]
        names = {p.name for p in params}
        for p in params:
            for parent, allowed in p.when.items():
                if parent not in names:
                    raise ConfigError(f"'when' names unknown parameter '{parent}'"
                                      f"{did_you_mean(parent, names)}; expected one of {one_of(sorted(names))}",
                                      key=f"space.{p.name}.when")
                if parent == p.name:
                    raise ConfigError("a parameter cannot depend on itself", key=f"space.{p.name}.when")
                parent_param = next(q for q in params if q.name == parent)
                for value in allowed:
                    if not parent_param.contains(value):
                        raise ConfigError(f"'when' value {value!r} is not a possible value of '{parent}'",
                                          key=f"space.{p.name}.when.{parent}")
        return cls(params)

    @classmethod
    def coerce(cls, space: "SearchSpace | Mapping[str, Any]") -> "SearchSpace":
        """Accept a SearchSpace or the same dict as the YAML `space:`."""
        return space if isinstance(space, SearchSpace) else cls.from_dict(space)

    def to_dict(self) -> dict[str, Any]:
        """The YAML / `from_dict` form."""
        return {p.name: p.to_dict() for p in self.params}

    # --- queries ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.params)

    def __iter__(self):
        return iter(self.params)

    def __getitem__(self, name: str) -> Param:
        return self._by_name[name]

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def contains(self, config: Mapping[str, Any]) -> bool:
        """True if config has exactly the active parameters, each within its domain."""
        for p in self.params:
            active = p.is_active(config)
            if active != (p.name in config):
                return False
            if active and not p.contains(config[p.name]):
                return False
        return set(config) <= set(self._by_name)

    # --- sampling and the unit hypercube --------------------------------------------------
    def sample(self, rng: np.random.Generator) -> dict[str, Any]:
        """A uniform random config (inactive conditionals left out)."""
        # Draw a full vector so one sample always consumes the same amount of randomness,
        # whatever is active: replayed and live searchers stay in step.
        return self.from_unit(rng.random(len(self.params)))

    def from_unit(self, vector: Sequence[float]) -> dict[str, Any]:
        config: dict[str, Any] = {}
        for p, u in zip(self.params, vector):
            if p.is_active(config):
                config[p.name] = p.from_unit(0.5 if math.isnan(u) else u)
        return config

    def to_unit(self, config: Mapping[str, Any]) -> np.ndarray:
        return np.array([p.to_unit(config[p.name]) if p.name in config else np.nan
                         for p in self.params], dtype=float)


def _parents_first(params: list[Param]) -> tuple[Param, ...]:
    ordered: list[Param] = []
    placed: set[str] = set()
    remaining = list(params)
    while remaining:
        ready = [p for p in remaining if all(parent in placed for parent in p.when)]
        if not ready:
            cycle = ", ".join(p.name for p in remaining)
            raise ConfigError(f"conditional parameters form a cycle: {cycle}", key="space")
        for p in ready:
            ordered.append(p)
            placed.add(p.name)
        remaining = [p for p in remaining if p.name not in placed]
    return tuple(ordered)


_KEYS = {"float": {"type", "low", "high", "log", "when"},
         "int": {"type", "low", "high", "log", "when"},
         "choice": {"type", "values", "when"}}


def _param_from_dict(name: str, body: Any) -> Param:
    key = f"space.{name}"
    if not isinstance(body, Mapping):
        raise ConfigError(f"expected a mapping like {{type: float, low: 0, high: 1}}, got {body!r}", key=key)
    kind = body.get("type")
    if kind not in PARAM_TYPES:
        raise ConfigError(f"'type' must be one of {one_of(PARAM_TYPES)}, got {kind!r}"
                          f"{did_you_mean(kind, PARAM_TYPES)}", key=f"{key}.type")
    for k in body:
        if k not in _KEYS[kind]:
            raise ConfigError(f"unknown key '{k}' for a {kind} parameter{did_you_mean(k, _KEYS[kind])}; "
                              f"expected {one_of(sorted(_KEYS[kind]))}", key=f"{key}.{k}")
    when = _parse_when(body.get("when"), key)
    if kind == "choice":
        values = body.get("values")
        if not isinstance(values, (list, tuple)) or len(values) == 0:
            raise ConfigError(f"'values' must be a non-empty list, got {values!r}", key=f"{key}.values")
        if len(set(map(repr, values))) != len(values):
            raise ConfigError(f"'values' has duplicates: {list(values)!r}", key=f"{key}.values")
        return ChoiceParam(name=name, when=when, values=tuple(values))

    for bound in ("low", "high"):
        value = body.get(bound)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"'{bound}' must be a number, got {value!r}", key=f"{key}.{bound}")
        if kind == "int" and not float(value).is_integer():
            raise ConfigError(f"'{bound}' must be a whole number for an int parameter, got {value!r}",
                              key=f"{key}.{bound}")
    low, high = body["low"], body["high"]
    log = body.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"'log' must be true or false, got {log!r}", key=f"{key}.log")
    if low >= high:
        raise ConfigError(f"expected low < high, got low={low} and high={high}", key=key)
    if log and low <= 0:
        raise ConfigError(f"a log-scale parameter needs low > 0, got low={low}", key=f"{key}.low")
    if kind == "int":
        return IntParam(name=name, when=when, low=int(low), high=int(high), log=log)
    return FloatParam(name=name, when=when, low=float(low), high=float(high), log=log)


def _parse_when(when: Any, key: str) -> dict[str, tuple[Any, ...]]:
    if when is None:
        return {}
    if not isinstance(when, Mapping) or not when:
        raise ConfigError(f"'when' must map a parent parameter to a value or list of values, got {when!r}",
                          key=f"{key}.when")
    return {str(parent): tuple(v) if isinstance(v, (list, tuple)) else (v,) for parent, v in when.items()}
