"""`compile: auto`: pick graph mode or XLA for an architecture by timing both on its device.

XLA's payoff depends on the model and the device (on this 2-core CPU it was 1.5-6x slower
than graph mode under `model.fit`, yet often faster in our own multi-step loop; on GPUs it
usually wins), so the choice is measured, not guessed: on the first trial of an
architecture, a few calls of the step in each mode, after one warm-up call each that absorbs
tracing and compilation, the modes taking turns (`call_timing.py`). The result is kept in a
`CompileChoices` store (the study's table in a search), so later trials and resumed
searches reuse it.

Measuring costs about a second here (an XLA compile plus a graph trace), more than a short
job trains in total. So:
- a job shorter than `MIN_STEPS_TO_MEASURE` steps does not measure: it takes its family's
  majority measured mode (graph, the cheaper compile, when none), unrecorded, so a longer
  job of the same architecture (a promotion) still measures later;
- once `FAMILY_EVIDENCE` architectures of the same builder on the same device kind all chose
  the same mode by a clear margin, new architectures of that family take that mode
  unmeasured (recorded as inferred, with the evidence).
Measured on the MLP space of benchmarks/kt_comparison.py, XLA won 11 of 16 architectures
(by 1.2-2.4x) and lost 5 (by 2.2-3.7x), so a family verdict alone would be wrong often.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Protocol

MODES = ("graph", "xla")                       # what `auto` measures and chooses between
MIN_STEPS_TO_MEASURE = 1000
FAMILY_EVIDENCE = 3
CLEAR_MARGIN = 1.25        # the loser is at least this much slower per step


class CompileChoices(Protocol):
    """What the decisions are read from: `CompileChoiceStore` in a trainer."""

    def compile_choice(self, key: str) -> tuple[str, dict[str, Any]] | None: ...

    def compile_choices(self) -> dict[str, tuple[str, dict[str, Any]]]: ...


class InMemoryCompileChoices:
    """A trainer's decisions: those it was started with (the study's), those other workers
    made (`learn`), and its own (`record_compile_choice`), which `take_new` hands over once
    for the runner to record in the study."""

    def __init__(self, known: Mapping[str, tuple[str, Mapping[str, Any]]] | None = None):
        self._choices: dict[str, tuple[str, dict[str, Any]]] = {k: (m, dict(d)) for k, (m, d) in (known or {}).items()}
        self._new: list[tuple[str, str, dict[str, Any]]] = []

    def compile_choice(self, key: str):
        return self._choices.get(key)

    def record_compile_choice(self, key: str, mode: str, detail: Mapping[str, Any]) -> None:
        self.learn(key, mode, detail)
        self._new.append((key, mode, dict(detail)))

    def learn(self, key: str, mode: str, detail: Mapping[str, Any]) -> None:
        self._choices[key] = (mode, dict(detail))

    def take_new(self) -> list[tuple[str, str, dict[str, Any]]]:
        new, self._new = self._new, []
        return new

    def compile_choices(self):
        return dict(self._choices)


def choice_key(signature: str, device_kind: str) -> str:
    return json.dumps({"device": device_kind, "architecture": json.loads(signature)}, sort_keys=True)


def family_of(key: str) -> str:
    parsed = json.loads(key)
    return json.dumps({"device": parsed["device"], "builder": parsed["architecture"].get("__builder__")},
                      sort_keys=True)


def _measured_in_family(key: str, choices: CompileChoices) -> list[tuple[str, dict[str, Any]]]:
    """(mode, detail) of every measured (not inferred) architecture in `key`'s family."""
    family = family_of(key)
    return [(mode, detail) for k, (mode, detail) in choices.compile_choices().items()
            if family_of(k) == family and detail.get("measured")]


def inferred_mode(key: str, choices: CompileChoices) -> tuple[str, dict[str, Any]] | None:
    """The family's mode, if enough measured architectures agree on it by a clear margin."""
    measured = _measured_in_family(key, choices)
    if len(measured) < FAMILY_EVIDENCE:
        return None
    modes = {mode for mode, _ in measured}
    if len(modes) != 1 or not all(detail.get("margin", 0) >= CLEAR_MARGIN for _, detail in measured):
        return None
    mode = modes.pop()
    return mode, {"measured": False, "inferred_from": len(measured)}


def provisional_mode(key: str, choices: CompileChoices) -> str:
    """For a job too short to measure: the family's most common measured mode, else graph."""
    votes = [mode for mode, _ in _measured_in_family(key, choices)]
    return max(MODES, key=lambda m: (votes.count(m), m == "graph"))


def decide(timings: Mapping[str, tuple[float, float]]) -> tuple[str, dict[str, Any]]:
    """The faster steady-state mode; `timings` maps mode -> (first call seconds incl. trace and
    compile, steady seconds per call), for the modes that compiled."""
    if not timings:
        raise RuntimeError("no compile mode could run this model")
    ranked = sorted(timings, key=lambda m: timings[m][1])
    best = ranked[0]
    detail: dict[str, Any] = {"measured": True,
                              "step_call_ms": {m: round(1000 * t[1], 3) for m, t in timings.items()},
                              "first_call_ms": {m: round(1000 * t[0], 1) for m, t in timings.items()}}
    if len(ranked) > 1:
        detail["margin"] = round(timings[ranked[1]][1] / max(timings[best][1], 1e-12), 3)
    return best, detail
