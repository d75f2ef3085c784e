"""Several objectives and constraints: what a searcher is asked to optimise, and how a told
result becomes a point to rank.

    Objective("val_accuracy", "maximize"), Objective("params", "minimize")
    Constraint.parse("params <= 20000")

`Goals` bundles a searcher's objectives and constraints. It turns whatever `tell` receives
(a float, a sequence, a dict of named values or a `TrialResult`) into a `TrialResult` whose
`values` hold the objectives in order, and a result into the point the searchers rank: the
objectives as losses (every one minimised) and the total constraint violation. A searcher
built without `objectives` has one unnamed objective and behaves exactly as a
single-objective searcher always has.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from hpo.errors import closest
from hpo.registry import DIRECTIONS
from hpo.trial import TrialResult, TrialState, is_number

OPERATORS = ("<=", ">=", "<", ">")
# A name, an operator, a number: "params <= 20000", "latency_ms<2.5", "val_accuracy >= 0.9".
# The name is whatever the objective reports, so any text without <, > or = (a Python objective's
# dict may use "loss[val]" or "mean loss"); whether it names a reported value is checked later.
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_CONSTRAINT = re.compile(r"^\s*([^<>=\s](?:[^<>=]*[^<>=\s])?)\s*(<=|>=|<|>)\s*(" + _NUMBER + r")\s*$")


@dataclass(frozen=True)
class Objective:
    """One value to optimise, by the name the objective function reports it under."""

    name: str
    direction: str = "minimize"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"an objective's name must be a non-empty string, got {self.name!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"objective {self.name!r}: direction must be 'minimize' or 'maximize', "
                             f"got {self.direction!r}")

    def loss(self, value: float) -> float:
        """The value as a loss (smaller is better)."""
        return float(value) if self.direction == "minimize" else -float(value)

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "direction": self.direction}

    @classmethod
    def coerce(cls, spec: "Objective | str | Mapping[str, Any]") -> "Objective":
        """From an `Objective`, a name (direction inferred as `search.objective`'s is: accuracy-like
        names are maximised, the rest minimised), or a mapping {name, direction}."""
        if isinstance(spec, Objective):
            return spec
        if isinstance(spec, str):
            from hpo.metric_names import infer_direction
            return cls(spec, infer_direction(spec))
        if isinstance(spec, Mapping):
            unknown = set(spec) - {"name", "direction"}
            if unknown:
                raise ValueError(f"objective {dict(spec)!r}: unknown key(s) {sorted(unknown)}; "
                                 "expected 'name' and optionally 'direction'")
            if "name" not in spec:
                raise ValueError(f"objective {dict(spec)!r}: missing 'name'")
            if "direction" not in spec:
                return cls.coerce(spec["name"]) if isinstance(spec["name"], str) else cls(spec["name"])
            return cls(spec["name"], spec["direction"])
        raise TypeError(f"an objective is a name, a mapping {{name, direction}} or an Objective, "
                        f"got {type(spec).__name__} {spec!r}")


@dataclass(frozen=True)
class Constraint:
    """`name op bound`: a result whose value breaks it is infeasible, by `violation`."""

    name: str
    op: str
    bound: float

    def __post_init__(self):
        if self.op not in OPERATORS:
            raise ValueError(f"constraint on {self.name!r}: operator must be one of {OPERATORS}, got {self.op!r}")
        if not math.isfinite(self.bound):
            raise ValueError(f"constraint on {self.name!r}: the bound must be a finite number, got {self.bound}")

    @classmethod
    def parse(cls, text: "str | Constraint") -> "Constraint":
        if isinstance(text, Constraint):
            return text
        if not isinstance(text, str):
            raise TypeError(f"a constraint is a string such as 'params <= 20000', got {type(text).__name__} {text!r}")
        match = _CONSTRAINT.match(text)
        if match is None:
            raise ValueError(f"cannot parse the constraint {text!r}: expected 'NAME <= NUMBER' "
                             f"(or >=, <, >), e.g. 'params <= 20000'")
        return cls(match.group(1), match.group(2), float(match.group(3)))

    def violation(self, value: float) -> float:
        """How far `value` breaks the constraint, relative to the bound's size (0: it holds;
        inf: no usable value). Strict and non-strict bounds differ only at the bound itself."""
        if value is None or not math.isfinite(value):
            return math.inf
        excess = value - self.bound if self.op in ("<=", "<") else self.bound - value
        if excess < 0 or (excess == 0 and self.op in ("<=", ">=")):
            return 0.0
        # Relative, so that constraints on quantities of different sizes add up fairly; a
        # boundary hit of a strict bound still counts as a (tiny) violation.
        return max(excess, 1e-12) / max(abs(self.bound), 1.0)

    def __str__(self) -> str:
        return f"{self.name} {self.op} {_bound_text(self.bound)}"


def _bound_text(bound: float) -> str:
    """The bound as it reads back exactly: `:g` where that is exact (as studies have always
    stored it, so their constraints compare equal on resume), else every digit it needs
    (`:g` made 1234567 into 1.23457e+06, a different bound)."""
    short = f"{bound:g}"
    if float(short) == bound:
        return short
    return str(int(bound)) if bound.is_integer() and abs(bound) < 1e16 else repr(bound)


def suggest(name: str, known: Iterable[str]) -> str:
    """' (did you mean ...?)' when a known name is close (`hpo.errors.closest`), else ''."""
    close = closest(name, known)
    return f" (did you mean {close!r}?)" if close is not None else ""


def check_names(goals: "Goals", known: Iterable[str], where: str = "") -> None:
    """ValueError naming the first objective or constraint that is not among `known`."""
    known = list(known)
    for kind, name in [("objective", o.name) for o in goals.objectives] + \
                      [("constraint", c.name) for c in goals.constraints]:
        if name not in known:
            raise ValueError(f"{where}unknown {kind} name {name!r}{suggest(name, known)}; "
                             f"known names: {', '.join(known)}")


@dataclass(frozen=True)
class Goals:
    """A searcher's objectives (at least one) and constraints (any number)."""

    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...] = ()

    @classmethod
    def build(cls, objectives: Sequence[Any] | None = None, constraints: Sequence[Any] | None = None,
              direction: str = "minimize") -> "Goals":
        """From a searcher's arguments: no `objectives` means one unnamed objective in `direction`."""
        if objectives is None:
            parsed = (Objective("objective", direction),)
        else:
            if isinstance(objectives, (str, Mapping, Objective)) or not isinstance(objectives, Sequence):
                raise TypeError(f"objectives must be a list (of names, mappings or Objectives), got "
                                f"{type(objectives).__name__} {objectives!r}")
            if not objectives:
                raise ValueError("objectives must name at least one objective")
            parsed = tuple(Objective.coerce(o) for o in objectives)
        if constraints is None:
            constraints = ()
        if isinstance(constraints, (str, Constraint)) or not isinstance(constraints, Sequence):
            raise TypeError(f"constraints must be a list of strings such as 'params <= 20000', got "
                            f"{type(constraints).__name__} {constraints!r}")
        names = [o.name for o in parsed]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"objectives name {repeated} more than once")
        return cls(parsed, tuple(Constraint.parse(c) for c in constraints))

    @classmethod
    def of_search(cls, objectives: Sequence[Mapping[str, str]] | None, objective: str, direction: str,
                  constraints: Sequence[str] | None = None) -> "Goals":
        """From an experiment's `search` section: `objectives` ({name, direction} each), or
        when there are none, `objective` in `direction`; and `constraints`."""
        listed = objectives or ({"name": objective, "direction": direction},)
        return cls.build([Objective(o["name"], o["direction"]) for o in listed], list(constraints or ()))

    @property
    def multi(self) -> bool:
        return len(self.objectives) > 1

    @property
    def ranked(self) -> bool:
        """Whether results are compared as points (several objectives or any constraint)
        rather than by one loss."""
        return self.multi or bool(self.constraints)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.objectives)

    @property
    def required_names(self) -> tuple[str, ...]:
        """Every value a result must report: the objectives, then the constraints' values."""
        return tuple(dict.fromkeys(self.names + tuple(c.name for c in self.constraints)))

    def unusable(self, metrics: Mapping[str, Any]) -> str | None:
        """Why a result reporting `metrics` fails: an objective or a constraint's value that is
        NaN or infinite (a diverged run, a measurement that failed); None where none is."""
        for name in self.required_names:
            value = metrics.get(name)
            if is_number(value) and not math.isfinite(float(value)):
                what = "objective" if name in self.names else "constraint's value"
                return f"the {what} {name!r} was {value}"
        return None

    def to_dicts(self) -> dict[str, list]:
        """Plain form: {"objectives": [{name, direction}...], "constraints": ["params <= 20000", ...]}."""
        return {"objectives": [o.to_dict() for o in self.objectives],
                "constraints": [str(c) for c in self.constraints]}

    # --- told values -> TrialResult -----------------------------------------------------------
    def result_of(self, told: Any) -> TrialResult:
        """The `TrialResult` for what `tell` received. A single objective takes a float as
        always; several take a sequence (the objectives in order) or a dict of named values
        (the objectives and the constraints' names, and any other metric). A TrialResult
        without `values` gets them from its metrics; one missing an objective there failed."""
        if isinstance(told, TrialResult):
            return self._completed(told)
        if told is None:           # a failure, however many objectives
            return TrialResult.coerce(None)
        if isinstance(told, Mapping):
            metrics = {}
            for key, value in told.items():
                if not isinstance(key, str):
                    raise TypeError(f"a told dict must have string keys, got {key!r}")
                metrics[key] = _number(value, key)
            needed = self.required_names
            missing = [n for n in needed if n not in metrics]
            if missing:
                raise ValueError(f"the told dict has no {missing[0]!r}{suggest(missing[0], metrics)}; "
                                 f"it must hold {', '.join(needed)}")
            return self._completed(TrialResult(value=metrics[self.names[0]], metrics=metrics))
        if (isinstance(told, Sequence) and not isinstance(told, (str, bytes))) or \
                (isinstance(told, np.ndarray) and told.ndim > 0):
            values = [_number(v, f"value {i}") for i, v in enumerate(told)]
            if len(values) != len(self.objectives):
                raise ValueError(f"told {len(values)} values, but the searcher has {len(self.objectives)} "
                                 f"objectives ({', '.join(self.names)})")
            unnamed = [c.name for c in self.constraints if c.name not in self.names]
            if unnamed:
                raise ValueError(f"constraint {unnamed[0]!r} needs a value: tell a dict of named values")
            metrics = dict(zip(self.names, values)) if self.multi or self.constraints else {}
            return self._completed(TrialResult(value=values[0], metrics=metrics))
        if self.multi:
            raise TypeError(f"this searcher has {len(self.objectives)} objectives ({', '.join(self.names)}): "
                            f"tell a sequence of {len(self.objectives)} values or a dict naming them, "
                            f"got {type(told).__name__} {told!r}")
        result = TrialResult.coerce(told)
        if self.constraints:
            unnamed = [c.name for c in self.constraints if c.name not in self.names]
            if unnamed:
                raise ValueError(f"constraint {unnamed[0]!r} needs a value: tell a dict of named values")
            return self._completed(TrialResult(value=result.value, state=result.state, error=result.error,
                                               metrics={self.names[0]: result.value} if result.ok else {}))
        return result

    def check_told(self, told: Any) -> None:
        """What `tell` refuses before anything changes: a completed `TrialResult` whose metrics
        lack a value the goals read (an objective, where there are several and `values` is
        empty, or a constraint's), as a dict lacking one is refused. A resume tells the stored
        results again through here: the runner stores a result lacking one as failed, never
        as completed. The views call `result_of` alone, which reads such a result as failed."""
        if not isinstance(told, TrialResult) or told.state != TrialState.COMPLETE:
            return
        needed = [n for n in self.required_names if n not in self.names or (self.multi and not told.values)]
        missing = [n for n in needed if n not in told.metrics]
        if missing:
            raise ValueError(f"the told TrialResult's metrics have no {missing[0]!r}"
                             f"{suggest(missing[0], told.metrics)}; they must hold {', '.join(needed)}")

    def _completed(self, result: TrialResult) -> TrialResult:
        """`values` filled from the metrics where the objectives are several; a result whose
        objectives are not all there, or whose objectives or constraints' values are not all
        finite, failed."""
        if result.state != TrialState.COMPLETE:
            return result
        filled = self.multi and not result.values       # the objectives' values read from its metrics
        if filled:
            missing = [n for n in self.names if n not in result.metrics]
            if missing:
                return TrialResult(value=None, state=TrialState.FAILED, metrics=result.metrics,
                                   error=f"no {missing[0]!r} was reported")
        # A constraint's value that is NaN or infinite is a failed measurement, as an objective's
        # is: ranked as a feasible-or-not result it would be kept as complete with an infinite
        # violation, and, at a new largest budget, empty the Pareto front.
        problem = self.unusable(result.metrics)
        if problem is not None:
            return TrialResult(value=None, state=TrialState.FAILED, metrics=result.metrics, error=problem)
        if filled:
            values = tuple(float(result.metrics[n]) for n in self.names)
            result = TrialResult(value=values[0], values=values, metrics=result.metrics, error=result.error,
                                 curve=result.curve)
        return result

    # --- TrialResult -> point ------------------------------------------------------------------
    def losses(self, result: TrialResult) -> np.ndarray:
        """The objectives as losses (all minimised); all inf for a result without usable values."""
        if not result.ok:
            return np.full(len(self.objectives), math.inf)
        values = result.values or (result.value,)
        return np.array([o.loss(v) for o, v in zip(self.objectives, values)], dtype=float)

    def violation(self, result: TrialResult) -> float:
        """Total constraint violation (0: feasible; inf: failed or a constraint value missing)."""
        if not result.ok:
            return math.inf
        total = 0.0
        for c in self.constraints:
            value = result.metrics.get(c.name)
            if value is None and c.name in self.names:
                value = (result.values or (result.value,))[self.names.index(c.name)]
            total += c.violation(value)
        return total


def _number(value: Any, what: str) -> float:
    if not is_number(value):
        raise TypeError(f"{what}: expected a number, got {type(value).__name__} {value!r}")
    return float(value)
