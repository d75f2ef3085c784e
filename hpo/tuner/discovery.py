"""The search space of a `build_model(hp)`, found by running it before the study starts.

Keras Tuner learns a space as trials run: a parameter that appears on one branch only (the
second layer's filters when `conv_layers` is 2) is unknown until a trial happens to take
that branch, and is then neither searched nor carried through promotions. Here the space is
complete before the first trial: `build_model` runs on a recording `HyperParameters`, first
with every default, then once per other value of each discrete parameter (choices,
booleans, integer ranges of at most `EXPLORE_GRID_LIMIT` values), and from any build that revealed
new parameters, once per value of those (their own branches). Each parameter's condition
comes from its `conditional_scope`, or, for one that appears only on some branches, from
the discrete parameter whose value decides whether it appears (`when` in hpo's space). The
exploration is deterministic, so the same `build_model` always gives the same space and a
study resumes.

Not found: a parameter that appears only under a float's value or under a combination of
two values, neither of them the default. If a trial's build asks for one, it takes its
default and the log says so (`Discovered.unknown_at_trial`).

The parameters found become hpo's space in `hpo.tuner.keras_tuner_terms`, the one conversion
of Keras Tuner's parameters, which the oracles of `hpo.keras_tuner.oracles` use too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from hpo.tuner.hyperparameters import Declared, DeclaredTwice, HyperParameters
from hpo.tuner.keras_tuner_terms import space_dict

log = logging.getLogger("hpo.tuner")

EXPLORE_GRID_LIMIT = 16  # an integer range of at most this many values is explored value by value
MAX_BUILDS = 96          # exploration stops here (logged): a space this branched is rare


@dataclass
class Discovered:
    declared: dict[str, Declared]                 # every parameter, in order of discovery
    when: dict[str, dict[str, tuple[Any, ...]]]   # name -> parent -> values it is active under
    builds: int = 0
    failures: list[str] = field(default_factory=list)   # branches whose build raised, for the log
    complete: bool = True

    @property
    def searched(self) -> list[Declared]:
        return [d for d in self.declared.values() if d.kind != "fixed"]

    @property
    def fixed(self) -> dict[str, Any]:
        return {d.name: d.default for d in self.declared.values() if d.kind == "fixed"}

    def space_dict(self) -> dict[str, Any]:
        """hpo's `space:` mapping (`SearchSpace.from_dict`)."""
        return space_dict(self.declared, self.when)


def discover(build: Callable[[HyperParameters], Any], grid_limit: int = EXPLORE_GRID_LIMIT,
             max_builds: int = MAX_BUILDS) -> Discovered:
    """Run `build` over the branches of its space. A build that fails on the defaults is the
    user's error and propagates; one that fails on another branch is logged and skipped."""
    base = HyperParameters()
    build(base)
    declared = dict(base.declared)
    seen: dict[tuple, tuple[dict[str, Any], frozenset[str]]] = {(): ({}, frozenset(base.asked))}
    queue: list[tuple[dict[str, Any], list[str]]] = [({}, list(base.asked))]
    found = Discovered(declared=declared, when={}, builds=1)
    while queue:
        assignment, vary = queue.pop(0)
        asked_here = seen[_key(assignment)][1]
        for name in vary:
            d = declared[name]
            grid = [v for v in (d.grid(grid_limit) if d.kind != "fixed" else None) or ()
                    if v != assignment.get(name, d.default)]
            ends, rest = _ends_first(grid)
            revealed = False
            for batch in (ends, rest):
                if batch is rest and ends and not revealed:
                    # A numeric range whose ends ask for the same parameters as the value here
                    # gates nothing (a loop over range(n) shows its layers at the top end).
                    break
                for value in batch:
                    trial = {**assignment, name: value}
                    if _key(trial) in seen:
                        continue
                    if found.builds >= max_builds:
                        found.complete = False
                        break
                    found.builds += 1
                    hp = HyperParameters(values=dict(trial), declared=dict(declared))
                    try:
                        build(hp)
                    except DeclaredTwice as exc:    # its trials would train with one range's default
                        raise DeclaredTwice(f"build_model on the branch {trial}: {exc}; each name has one range "
                                            f"in hpo's space: give each branch's parameter a name of its own "
                                            f"(e.g. '{exc.name}_{value}')", exc.name) from None
                    except Exception as exc:   # noqa: BLE001 - a branch that fails fails its trials later
                        found.failures.append(f"{trial}: {type(exc).__name__}: {exc}")
                        continue
                    asked = frozenset(hp.asked)
                    seen[_key(trial)] = (trial, asked)
                    revealed = revealed or asked != asked_here
                    new = [n for n in hp.asked if n not in declared]
                    for n in new:
                        declared[n] = hp.declared[n]
                    if new:
                        queue.append((trial, new))
    if not found.complete:
        log.warning("exploring build_model's branches stopped after %d builds; parameters on branches not "
                    "reached take their defaults", max_builds)
    found.when = {name: _condition(name, declared, list(seen.values())) for name in declared}
    return found


def _key(assignment: dict[str, Any]) -> tuple:
    return tuple(sorted(assignment.items(), key=lambda kv: kv[0]))


def _ends_first(grid: list[Any]) -> tuple[list[Any], list[Any]]:
    """A numeric grid of more than three values: (its two ends, the rest); else (all, [])."""
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in grid)
    if not numeric or len(grid) <= 3:
        return list(grid), []
    ordered = sorted(grid)
    ends = [ordered[0], ordered[-1]]
    return ends, [v for v in grid if v not in ends]


def _condition(name: str, declared: dict[str, Declared], explored) -> dict[str, tuple[Any, ...]]:
    """When `name` is active: its conditional_scope(s), else the discrete parameter whose value
    decides whether a build asks for it, else always."""
    d = declared[name]
    if d.conditions:
        return {parent: tuple(values) for parent, values in d.conditions}
    present = [(a, name in asked) for a, asked in explored]
    if all(p for _, p in present):
        return {}
    for gate in declared:
        if gate == name or declared[gate].kind == "fixed":
            continue
        rule = tuple(sorted({_value(a, gate, declared) for a, p in present if p}, key=repr))
        # The gate must explain every explored build: asked exactly where the gate is asked
        # (reached) and holds one of the values.
        if all(p == (_asked(explored, a, gate) and _value(a, gate, declared) in rule) for a, p in present):
            grid = declared[gate].grid(10 ** 6)
            if grid is not None and set(rule) >= set(grid):
                continue
            return {gate: rule}
    log.info("hyperparameter %r appears on some branches of build_model only, under no single parameter's "
             "value: it is searched on every trial (a trial that does not use it ignores it)", name)
    return {}


def _asked(explored, assignment: dict[str, Any], gate: str) -> bool:
    for a, asked in explored:
        if a is assignment:
            return gate in asked
    return False


def _value(assignment: dict[str, Any], name: str, declared: dict[str, Declared]) -> Any:
    return assignment.get(name, declared[name].default)
