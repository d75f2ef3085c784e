"""Keras Tuner's terms in hpo's, written once for both ways hpo meets Keras Tuner: the face
(`hpo.keras_tuner`, whose parameters `hpo.tuner.discovery` records from `build_model`) and
our searchers as oracles inside Keras Tuner's own loop (`hpo.keras_tuner.oracles`, whose
parameters are a `keras_tuner.HyperParameters`).

- `space_dict`: declared parameters as hpo's `space:` mapping (`space_entry` for one);
- `declared_from_keras_tuner`: a `keras_tuner.HyperParameters` as hpo's declarations, made
  by declaring each parameter on hpo's `HyperParameters`, so both ways take the same checks;
- `iteration_jobs`: `hyperband_iterations` as a number of jobs, Keras Tuner's trial count.

Imports neither TensorFlow nor `keras_tuner` (a Keras Tuner parameter is read by its type's
name and attributes).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Mapping

from hpo.search import hyperband_brackets, make_searcher
from hpo.tuner.hyperparameters import Declared, HyperParameters

# A stepped range (`hp.Int(..., step=16)`, `hp.Float(..., step=0.1)`) is searched as the
# choice of its values: hpo's int and float ranges have no step, and a choice keeps every
# trial on the step, as Keras Tuner's own sampling does. A choice's values are unordered for
# the searchers' models and are listed in the study's space (`hpo status`, the export). The
# limit is a bound, not a measurement: 1,000 values is several times the jobs of any search
# (one Hyperband iteration at max_epochs=100, factor=3, is 206 jobs), so most of them would
# never be tried. Above it the range is refused, asking for a wider step, rather than searched
# off its step (which a build reading a multiple of the step would not expect).
STEP_GRID_LIMIT = 1000


def space_entry(d: Declared) -> dict[str, Any]:
    """One declared parameter as an entry of hpo's `space:` mapping (without its `when`)."""
    if d.kind == "boolean":
        return {"type": "choice", "values": [False, True]}
    if d.kind == "choice":
        return {"type": "choice", "values": list(d.values)}
    if d.step is not None and not d.log:
        count = int(math.floor((d.high - d.low) / d.step + 1e-9)) + 1
        if count > STEP_GRID_LIMIT:
            raise ValueError(f"hyperparameter {d.name!r}: a stepped range of {count} values is not supported "
                             f"(at most {STEP_GRID_LIMIT}); widen the step or drop it")
        values = [d.low + i * d.step for i in range(count)]
        return {"type": "choice", "values": [int(v) if d.kind == "int" else float(v) for v in values]}
    return {"type": d.kind, "low": d.low, "high": d.high, "log": d.log}


def space_dict(declared: Mapping[str, Declared], when: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """hpo's `space:` mapping (`SearchSpace.from_dict`) of the searched parameters: `Fixed`
    ones are left out, and so is a condition on one. `when`: name -> parent -> values."""
    spec: dict[str, Any] = {}
    for d in declared.values():
        if d.kind == "fixed":
            continue
        body = space_entry(d)
        active = {parent: list(values) for parent, values in when.get(d.name, {}).items()
                  if parent in declared and declared[parent].kind != "fixed"}
        if active:
            body["when"] = active
        spec[d.name] = body
    return spec


def declared_from_keras_tuner(hps) -> dict[str, Declared]:
    """A `keras_tuner.HyperParameters`' parameters as hpo's declarations, in order, each with
    its conditions (only Keras Tuner's `Parent` conditions: its `conditional_scope`)."""
    ours = HyperParameters()
    for hp in hps.space:
        kind = type(hp).__name__
        with contextlib.ExitStack() as scopes:
            for condition in hp.conditions:
                if type(condition).__name__ != "Parent":
                    raise ValueError(f"hyperparameter {hp.name!r}: condition {condition} is not supported")
                scopes.enter_context(ours.conditional_scope(condition.name, list(condition.values)))
            if kind == "Fixed":
                ours.Fixed(hp.name, hp.value)
            elif kind == "Boolean":
                ours.Boolean(hp.name, default=hp.default)
            elif kind == "Choice":
                ours.Choice(hp.name, hp.values, default=hp.default)
            elif kind in ("Int", "Float"):
                step = None if hp.step is None or (kind == "Int" and hp.step == 1) else hp.step
                declare = ours.Int if kind == "Int" else ours.Float
                declare(hp.name, hp.min_value, hp.max_value, step=step, sampling=hp.sampling, default=hp.default)
            else:
                raise ValueError(f"hyperparameter {hp.name!r}: type {kind} is not supported")
    return ours.declared


def iteration_jobs(algorithm: str, min_budget: float, max_budget: float, factor: int, iterations: int,
                   options: Mapping[str, Any] | None = None) -> int:
    """Jobs in `iterations` whole Hyperband iterations (kt.Hyperband's count); BOHB's first
    iteration holds its climbing bracket."""
    per_iteration = sum(r.n_configs for b in hyperband_brackets(min_budget, max_budget, factor) for r in b.rungs)
    first = per_iteration
    if algorithm in ("bohb", "async_bohb"):
        first = make_searcher("bohb", {"x": {"type": "float", "low": 0.0, "high": 1.0}}, seed=0,
                              direction="minimize", min_budget=min_budget, max_budget=max_budget, eta=factor,
                              options=dict(options or {})).first_iteration_jobs()
    return first + per_iteration * (max(1, iterations) - 1)
