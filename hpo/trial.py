"""The typed records that cross the searcher / runner / trainer boundaries.

Nothing here imports TensorFlow: searchers, the study store and the runner all share these.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping


def config_text(config: Mapping[str, Any]) -> str:
    """A config on one line, floats to four significant digits: `units=64, dropout=0.125`."""
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in config.items())


def trial_ids_text(trial_ids: Iterable[int]) -> str:
    """Trial ids on one line, runs of consecutive ids as ranges: `0-3, 7, 9-12`. A search of
    thousands of trials, or hundreds of workers interrupted at once, stays one readable line."""
    ordered = sorted(set(trial_ids))
    parts: list[str] = []
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i] != ordered[i - 1] + 1:
            first, last = ordered[start], ordered[i - 1]
            parts.append(str(first) if first == last else f"{first}-{last}")
            start = i
    return ", ".join(parts)


def config_identity(config: Mapping[str, Any]) -> str:
    """A config as a key that equal configs share, whatever their key order and whether a
    number is numpy's or Python's; the searchers (as `config_key`), the tuner's trainer and the
    simulated executor all key configs by it."""
    return json.dumps(dict(config), sort_keys=True, default=str)


class TrialState(str, enum.Enum):
    """Where a trial is in its life; `finished` ones (complete, failed) are never rerun."""

    PENDING = "pending"          # asked, not yet started
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # stopped by Ctrl-C, a time limit or a crash; rerun on resume

    @property
    def finished(self) -> bool:
        return self in (TrialState.COMPLETE, TrialState.FAILED)


def is_number(value: Any) -> bool:
    """Whether `value` is a result's number: a Python or numpy number, a 0-d array or an eager
    tensor of one value (each converts itself, `__float__`). Text, booleans and complex
    numbers are not, though `float` reads "0.3" and True (and numpy's complex, with a
    warning); nor is an array of several values, or of one along an axis."""
    return not isinstance(value, (str, bytes, bool)) \
        and getattr(getattr(value, "dtype", None), "kind", "") not in ("b", "c") \
        and getattr(value, "ndim", 0) == 0 and hasattr(value, "__float__")


@dataclass(frozen=True)
class Job:
    """One unit of work a searcher hands out: train `config` up to `budget`.

    `continues` is the trial id whose checkpoint this job picks up from (a promotion), so
    only the budget increment is trained. `bracket` and `rung` place the job in a
    Hyperband-style schedule; plain searchers leave them None.
    """

    trial_id: int
    config: Mapping[str, Any]
    budget: float
    continues: int | None = None
    bracket: int | None = None
    rung: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (what the study stores)."""
        return {"trial_id": self.trial_id, "config": dict(self.config), "budget": self.budget,
                "continues": self.continues, "bracket": self.bracket, "rung": self.rung}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Job":
        """The inverse of `to_dict`."""
        return cls(trial_id=int(data["trial_id"]), config=dict(data["config"]),
                   budget=float(data["budget"]), continues=data.get("continues"),
                   bracket=data.get("bracket"), rung=data.get("rung"))


@dataclass(frozen=True)
class TrialResult:
    """What a searcher is told about a finished job.

    `value` is the objective in the user's direction (the searcher converts it);
    None or non-finite means the trial produced no usable value. With several objectives,
    `values` holds them all in the searcher's order (`value` is the first) and `metrics`
    any named values, the constraints' among them; with one objective `values` is empty
    and the stored form has no `values` key.

    `curve` holds the objective after each epoch this job trained, in the user's direction:
    for a job that continues a trial trained to budget p, the values at budgets p + 1 ..
    `budget` (epochs), the last being `value`. Learning-curve searchers read it
    (`hpo.search.freeze_thaw`); the others ignore it. Empty (the default) means only the
    final value is known, and the stored form then has no `curve` key.
    """

    value: float | None
    state: TrialState = TrialState.COMPLETE
    metrics: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None
    values: tuple[float, ...] = ()
    curve: tuple[float, ...] = ()

    def __post_init__(self):
        # Checked here, where a bad one is made, not where a searcher first does arithmetic
        # on it: by then `tell` would have half-recorded it.
        if self.value is not None and not is_number(self.value):
            raise TypeError(f"TrialResult's value must be a number or None, got {type(self.value).__name__} "
                            f"{self.value!r}")
        if not isinstance(self.state, TrialState):
            try:
                object.__setattr__(self, "state", TrialState(self.state))
            except ValueError:
                raise ValueError(f"TrialResult's state must be one of {[s.value for s in TrialState]}, "
                                 f"got {self.state!r}") from None
        for name in ("values", "curve"):
            bad = [v for v in getattr(self, name) if not is_number(v)]
            if bad:
                raise TypeError(f"TrialResult's {name} must be numbers, got {bad[0]!r}")

    @classmethod
    def coerce(cls, result: "TrialResult | float | int | None") -> "TrialResult":
        if isinstance(result, TrialResult):
            return result
        if result is None:
            return cls(value=None, state=TrialState.FAILED, error="objective returned None")
        if not is_number(result):
            raise TypeError(f"expected a number (the objective's value), None (a failure) or a TrialResult, "
                            f"got {type(result).__name__} {result!r}")
        value = float(result)
        if not math.isfinite(value):
            return cls(value=None, state=TrialState.FAILED, error=f"objective was {value}")
        return cls(value=value)

    @property
    def ok(self) -> bool:
        return (self.state == TrialState.COMPLETE and self.value is not None
                and math.isfinite(self.value) and all(math.isfinite(v) for v in self.values))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (what the study stores)."""
        data = {"value": self.value, "state": self.state.value, "metrics": dict(self.metrics),
                "error": self.error}
        if self.values:             # only several objectives add the key
            data["values"] = list(self.values)
        if self.curve:              # likewise: only a result with a curve adds the key
            data["curve"] = list(self.curve)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrialResult":
        """The inverse of `to_dict`."""
        return cls(value=data.get("value"), state=TrialState(data["state"]),
                   metrics=dict(data.get("metrics") or {}), error=data.get("error"),
                   values=tuple(float(v) for v in data.get("values") or ()),
                   curve=tuple(float(v) for v in data.get("curve") or ()))
