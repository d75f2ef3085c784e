"""Typed search spaces, mapped to and from the unit hypercube.

Every parameter maps its values to [0, 1] so that every searcher (random, Hyperband, the
KDE inside BOHB) works on one shape of space. Conditional parameters (`when:`) are only
active when their parent has one of the given values; inactive ones are absent from the
config dict and NaN in the unit vector.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from hpo.errors import ConfigError, did_you_mean, one_of

PARAM_TYPES = ("float", "int", "choice")
PRIOR_CONFIDENCES = ("low", "medium", "high")
# How tightly a prior is sampled around: the sd of a Gaussian in the unit interval for numbers,
# and the probability of the prior's own value for choices (else any other, uniformly).
PRIOR_SD = {"low": 0.25, "medium": 0.12, "high": 0.05}
PRIOR_KEEP = {"low": 0.5, "medium": 0.7, "high": 0.9}


@dataclass(frozen=True)
class Param:
    name: str
    # parent name -> the parent values under which this parameter is active
    when: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    # the user's guess at a good value (None: no guess), and how sure they are of it
    prior: Any = None
    prior_confidence: str = "medium"

    def is_active(self, config: Mapping[str, Any]) -> bool:
        return all(parent in config and is_among(config[parent], allowed) for parent, allowed in self.when.items())

    # Subclasses implement these six.
    def from_unit(self, u: float) -> Any: raise NotImplementedError
    def to_unit(self, value: Any) -> float: raise NotImplementedError
    def contains(self, value: Any) -> bool: raise NotImplementedError
    def to_dict(self) -> dict[str, Any]: raise NotImplementedError

    def units_round_trip(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For a column of units in [0, 1]: `to_unit(from_unit(u))` of each, and a numeric key
        of each decoded value (`value_of` turns a key into that value), bit for bit as the
        scalar methods compute them: the same operations, elementwise."""
        raise NotImplementedError

    def value_of(self, key: Any) -> Any: raise NotImplementedError

    def _when_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.when:
            out["when"] = {k: (list(v) if len(v) > 1 else v[0]) for k, v in self.when.items()}
        if self.prior is not None:
            out["prior"] = self.prior
            out["prior_confidence"] = self.prior_confidence
        return out

    def sample_prior(self, u: float, z: float) -> Any:
        """A value around the prior from two uniform draws (u, z in [0, 1)): a Gaussian of
        PRIOR_SD in the unit interval for numbers (folded back inside), the prior value with
        probability PRIOR_KEEP for choices."""
        centre = self.to_unit(self.prior)
        x = centre + PRIOR_SD[self.prior_confidence] * math.sqrt(2) * _erfinv(2 * u - 1)
        x = abs(x) % 2.0                              # fold into [0, 1]: mass stays near the prior
        return self.from_unit(2.0 - x if x > 1 else x)


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

    def units_round_trip(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        u = np.clip(u, 0.0, 1.0)
        if self.log:
            low, high = math.log(self.low), math.log(self.high)
            values = _elementwise(math.exp, low + u * (high - low))
            return (_elementwise(math.log, values) - low) / (high - low), values
        values = self.low + u * (self.high - self.low)
        return (values - self.low) / (self.high - self.low), values

    def value_of(self, key: Any) -> float:
        return float(key)

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

    def units_round_trip(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self._edges()
        x = lo + np.clip(u, 0.0, 1.0) * (hi - lo)
        values = np.clip(np.floor((_elementwise(math.exp, x) if self.log else x) + 0.5), self.low, self.high)
        return ((_elementwise(math.log, values) if self.log else values) - lo) / (hi - lo), values

    def value_of(self, key: Any) -> int:
        return int(key)

    def contains(self, value: Any) -> bool:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
            and self.low <= value <= self.high

    def to_dict(self) -> dict[str, Any]:
        """The YAML / `from_dict` form."""
        return {"type": "int", "low": self.low, "high": self.high, "log": self.log, **self._when_dict()}


def choice_key(value: Any) -> tuple[bool, Any]:
    """What a choice value is compared by: Python has True == 1 and False == 0, but as
    choices they are apart (a model that merged them would credit one with the other's
    results); 1 and 1.0 stay one number, as do numpy's scalars and Python's."""
    return isinstance(value, (bool, np.bool_)), value


def is_among(value: Any, values: Sequence[Any]) -> bool:
    """Whether `value` is one of `values`, compared by `choice_key`."""
    key = choice_key(value)
    return any(choice_key(v) == key for v in values)


@dataclass(frozen=True)
class ChoiceParam(Param):
    """One of `values` (strings, numbers or booleans), unordered."""
    values: tuple[Any, ...] = ()

    def from_unit(self, u: float) -> Any:
        index = int(min(max(float(u), 0.0), 1.0) * len(self.values))
        return self.values[min(index, len(self.values) - 1)]

    def index(self, value: Any) -> int:
        key = choice_key(value)
        for i, candidate in enumerate(self.values):
            if choice_key(candidate) == key:
                return i
        raise ValueError(f"{value!r} is not one of {list(self.values)!r}")

    def to_unit(self, value: Any) -> float:
        return (self.index(value) + 0.5) / len(self.values)

    def units_round_trip(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        slots = np.minimum((np.clip(u, 0.0, 1.0) * len(self.values)).astype(np.int64), len(self.values) - 1)
        # A value listed twice (1 and 1.0) encodes as its first listing, as `index` finds it.
        first = np.array([self.index(v) for v in self.values], dtype=np.int64)
        return (first[slots] + 0.5) / len(self.values), slots

    def value_of(self, key: Any) -> Any:
        return self.values[int(key)]

    def contains(self, value: Any) -> bool:
        return is_among(value, self.values)

    def to_dict(self) -> dict[str, Any]:
        """The YAML / `from_dict` form."""
        return {"type": "choice", "values": list(self.values), **self._when_dict()}

    def sample_prior(self, u: float, z: float) -> Any:
        if u < PRIOR_KEEP[self.prior_confidence] or len(self.values) == 1:
            return self.prior
        others = [v for v in self.values if choice_key(v) != choice_key(self.prior)]
        return others[min(int(z * len(others)), len(others) - 1)]


class SearchSpace:
    """An ordered set of parameters; parents always come before their children."""

    def __init__(self, params: Sequence[Param]):
        self.params: tuple[Param, ...] = _parents_first(list(params))
        self._by_name = {p.name: p for p in self.params}
        if len(self._by_name) != len(self.params):      # `from_dict`'s mapping cannot repeat a name; a list can
            names = [p.name for p in self.params]
            raise ConfigError(f"parameter {next(n for n in names if names.count(n) > 1)!r} is listed twice",
                              key="space")

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> "SearchSpace":
        """Build from the YAML `space:` mapping; raises ConfigError naming the key."""
        if not isinstance(spec, Mapping) or not spec:
            raise ConfigError("expected a mapping of parameter name -> {type: ..., ...}", key="space")
        params = [_param_from_dict(str(name), body) for name, body in python_values(spec).items()]
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
                if isinstance(parent_param, FloatParam):
                    raise ConfigError(f"'when' names the float parameter '{parent}', whose sampled values never "
                                      f"equal {allowed[0]!r}, so '{p.name}' would never be active; expected a "
                                      f"condition on a choice or int parameter", key=f"space.{p.name}.when.{parent}")
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

    def finite_values(self) -> list[tuple[Any, ...]] | None:
        """Each parameter's values, in order, where the space is finite and plainly so: every
        parameter an int or a choice, none conditional. None otherwise."""
        if any(param.when or isinstance(param, FloatParam) for param in self.params):
            return None
        return [param.values if isinstance(param, ChoiceParam) else tuple(range(param.low, param.high + 1))
                for param in self.params]

    def config_count(self) -> int | None:
        """How many distinct configs a finite space holds (`finite_values`); None otherwise."""
        values = self.finite_values()
        return None if values is None else math.prod(len(v) for v in values)

    def every_config(self) -> list[dict[str, Any]]:
        """Every config of a finite space (`finite_values`), in the parameters' order."""
        names = [param.name for param in self.params]
        return [dict(zip(names, combo)) for combo in itertools.product(*self.finite_values())]

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

    def why_not(self, config: Mapping[str, Any]) -> str | None:
        """Why `config` is not a config of this space (None if it is), naming the parameter."""
        for name in config:
            if name not in self._by_name:
                return f"unknown parameter '{name}'{did_you_mean(name, self._by_name)}"
        for p in self.params:
            active = p.is_active(config)
            if active and p.name not in config:
                return f"parameter '{p.name}' is missing"
            if not active and p.name in config:
                return f"parameter '{p.name}' is inactive here (its 'when' is not met) and must be left out"
            if active and not p.contains(config[p.name]):
                return f"{config[p.name]!r} is not a possible value of '{p.name}' ({p.to_dict()})"
        return None

    # --- sampling and the unit hypercube --------------------------------------------------
    def sample(self, rng: np.random.Generator) -> dict[str, Any]:
        """A uniform random config (inactive conditionals left out)."""
        # Draw a full vector so one sample always consumes the same amount of randomness,
        # whatever is active: replayed and live searchers stay in step.
        return self.from_unit(rng.random(len(self.params)))

    @property
    def has_prior(self) -> bool:
        return any(p.prior is not None for p in self.params)

    def sample_prior(self, rng: np.random.Generator) -> dict[str, Any]:
        """A config drawn around the priors (uniform where a parameter has none)."""
        # Fixed draws per parameter, whatever is active, as in `sample`.
        u, z = rng.random(len(self.params)), rng.random(len(self.params))
        config: dict[str, Any] = {}
        for p, ui, zi in zip(self.params, u, z):
            if p.is_active(config):
                config[p.name] = p.from_unit(ui) if p.prior is None else p.sample_prior(ui, zi)
        return config

    def from_unit(self, vector: Sequence[float]) -> dict[str, Any]:
        config: dict[str, Any] = {}
        for p, u in zip(self.params, vector):
            if p.is_active(config):
                config[p.name] = p.from_unit(0.5 if math.isnan(u) else u)
        return config

    def to_unit(self, config: Mapping[str, Any]) -> np.ndarray:
        return np.array([p.to_unit(config[p.name]) if p.name in config else np.nan
                         for p in self.params], dtype=float)

    def units_round_trip(self, points: np.ndarray) -> np.ndarray:
        """Unit-cube rows as the configs they decode to encode them: `to_unit(from_unit(row))`
        for every row (an int or a choice at its slot's centre, NaN where the row's parents make
        a parameter inactive), bit for bit, computed a column at a time rather than a config at
        a time: a model scores hundreds of candidates per ask in a conditional space."""
        active, encoded = self._decode_columns(points, encode=True)
        return np.where(active, encoded, np.nan)

    def active_mask(self, points: np.ndarray) -> np.ndarray:
        """Per row and parameter of unit-cube rows, whether the parameter is in the config the
        row decodes to (`from_unit`): its parents active, with values that switch it on."""
        return self._decode_columns(points, encode=False)[0]

    def _decode_columns(self, points: np.ndarray, encode: bool) -> tuple[np.ndarray, np.ndarray]:
        """(active, encoded) for `units_round_trip` and `active_mask` (`encode` False: only the
        parents' columns are decoded, the mask needs no more); NaN units decode as 0.5, as in
        `from_unit`."""
        points = np.asarray(points, dtype=float).reshape(-1, len(self.params))
        active = np.ones(points.shape, dtype=bool)
        encoded = np.empty(points.shape)
        parents = {parent for p in self.params for parent in p.when}
        column_of = {p.name: j for j, p in enumerate(self.params)}
        decoded: dict[str, np.ndarray] = {}     # a parent's decoded values, as `value_of` keys
        for j, p in enumerate(self.params):
            for parent, allowed in p.when.items():
                # Parents come first (`_parents_first`), so a parent's column is final here.
                k = column_of[parent]
                keys = decoded[parent]
                switched_on = np.zeros(len(points), dtype=bool)
                for key in np.unique(keys[active[:, k]]):
                    if is_among(self.params[k].value_of(key), allowed):
                        switched_on |= keys == key
                active[:, j] &= active[:, k] & switched_on
            if encode or p.name in parents:
                column = points[:, j]
                encoded[:, j], keys = p.units_round_trip(np.where(np.isnan(column), 0.5, column))
                if p.name in parents:
                    decoded[p.name] = keys
        return active, encoded


def _elementwise(function, values: np.ndarray) -> np.ndarray:
    """`function` (math's exp or log) of each value: numpy's own may round the last bit
    differently, and a round trip must match the scalar one exactly."""
    return np.fromiter(map(function, values.tolist()), dtype=float, count=values.size)


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


_KEYS = {"float": {"type", "low", "high", "log", "when", "prior", "prior_confidence"},
         "int": {"type", "low", "high", "log", "when", "prior", "prior_confidence"},
         "choice": {"type", "values", "when", "prior", "prior_confidence"}}


def _erfinv(y: float) -> float:
    from scipy.special import erfinv
    return float(erfinv(min(max(y, -1 + 1e-12), 1 - 1e-12)))


def _with_prior(param: Param, body: Mapping[str, Any], key: str) -> Param:
    """Check `prior` / `prior_confidence` against the parameter and attach them."""
    confidence = body.get("prior_confidence", "medium")
    if confidence not in PRIOR_CONFIDENCES:
        raise ConfigError(f"'prior_confidence' must be one of {one_of(PRIOR_CONFIDENCES)}, got {confidence!r}"
                          f"{did_you_mean(str(confidence), PRIOR_CONFIDENCES)}", key=f"{key}.prior_confidence")
    if "prior" not in body or body["prior"] is None:
        if "prior_confidence" in body:
            raise ConfigError("'prior_confidence' needs a 'prior' value beside it", key=f"{key}.prior_confidence")
        return param
    prior = body["prior"]
    if isinstance(param, FloatParam) and isinstance(prior, int) and not isinstance(prior, bool):
        prior = float(prior)
    if isinstance(param, IntParam) and isinstance(prior, float) and prior.is_integer():
        prior = int(prior)
    if not param.contains(prior):
        expected = (f"one of {list(param.values)!r}" if isinstance(param, ChoiceParam)
                    else f"a {'whole number' if isinstance(param, IntParam) else 'number'} in "
                         f"[{param.low}, {param.high}]")
        raise ConfigError(f"'prior' must be {expected}, got {prior!r}", key=f"{key}.prior")
    return dataclasses.replace(param, prior=prior, prior_confidence=confidence)


def _number_from_text(value: Any) -> Any:
    """`1e-3` read by PyYAML's YAML 1.1 resolver is the string '1e-3' (it wants `1.0e-3`); a
    bound that reads as a number in YAML 1.2 is taken as one, as the CLI's loader does."""
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        if not math.isfinite(number):
            return value
        return int(number) if number.is_integer() and "." not in value and "e" not in value.lower() else number
    return value


def python_values(value: Any) -> Any:
    """`value` with numpy's scalars and arrays, at any depth of mappings and sequences, as
    Python's numbers and lists: a space or config written in Python (`list(np.arange(8, 33,
    8))`, `np.float32(1.0)`) validates and stores as the same YAML would."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {k: python_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [python_values(v) for v in value]
    if isinstance(value, tuple):        # a namedtuple takes its fields as arguments
        items = [python_values(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


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
        keys = [choice_key(v) for v in values]
        for i, value in enumerate(values):      # 1 and 1.0 are one value; True and 1 are two (`choice_key`)
            if keys[i] in keys[:i]:
                earlier = values[keys.index(keys[i])]
                same = f"{value!r} is listed twice" if repr(earlier) == repr(value) \
                    else f"{earlier!r} and {value!r} are equal once typed"
                raise ConfigError(f"'values' has duplicates: {same} in {list(values)!r}", key=f"{key}.values")
        return _with_prior(ChoiceParam(name=name, when=when, values=tuple(values)), body, key)

    body = dict(body)
    for bound in ("low", "high"):
        value = body[bound] = _number_from_text(body.get(bound))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"'{bound}' must be a number, got {value!r}", key=f"{key}.{bound}")
        if not math.isfinite(value):       # a NaN bound passes `low >= high` and samples NaN
            raise ConfigError(f"'{bound}' must be a finite number, got {value!r}", key=f"{key}.{bound}")
        if kind == "int" and not float(value).is_integer():
            raise ConfigError(f"'{bound}' must be a whole number for an int parameter, got {value!r}",
                              key=f"{key}.{bound}")
    low, high = body["low"], body["high"]
    log = body.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"'log' must be true or false, got {log!r}", key=f"{key}.log")
    if low >= high:
        raise ConfigError(f"expected low < high, got low={low} and high={high}", key=key)
    if not math.isfinite(float(high) - float(low)):      # sampling would overflow to inf
        raise ConfigError(f"expected a range narrower than the largest float, got low={low} and high={high}", key=key)
    if log and low <= 0:
        raise ConfigError(f"a log-scale parameter needs low > 0, got low={low}", key=f"{key}.low")
    if kind == "int":
        return _with_prior(IntParam(name=name, when=when, low=int(low), high=int(high), log=log), body, key)
    return _with_prior(FloatParam(name=name, when=when, low=float(low), high=float(high), log=log), body, key)


def _parse_when(when: Any, key: str) -> dict[str, tuple[Any, ...]]:
    if when is None:
        return {}
    if not isinstance(when, Mapping) or not when:
        raise ConfigError(f"'when' must map a parent parameter to a value or list of values, got {when!r}",
                          key=f"{key}.when")
    return {str(parent): tuple(v) if isinstance(v, (list, tuple)) else (v,) for parent, v in when.items()}
