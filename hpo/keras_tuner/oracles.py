"""Our searchers inside Keras Tuner's own loop (the older face, kept for `kt.Tuner` subclasses):

    tuner = kt.Hyperband(build, objective="val_accuracy", max_epochs=27, factor=3, seed=0)
    tuner = hpo.keras_tuner.BOHB(build, objective="val_accuracy", max_epochs=27, factor=3, seed=0)

`BOHB`, `Hyperband` and `ASHA` are tuners with `kt.Hyperband`'s signature. Each trial
trains from `tuner/initial_epoch` to `tuner/epochs`, and a promotion continues from its
parent trial's checkpoint (Keras Tuner's own Hyperband logic, reused with our oracle).
With your own tuner class use the oracles directly:

    tuner = hpo.keras_tuner.Tuner(oracle=BOHBOracle(objective=kt.Objective("val_accuracy", "max"),
                                                    max_epochs=9, seed=0), hypermodel=build)

(A plain `kt.Tuner` ignores `tuner/epochs`: it would train every trial for the `epochs`
given to `search`, so budgets need `hpo.keras_tuner.Tuner` or a `run_trial` that reads them.)

Keras Tuner's HyperParameters, conditional scopes included, become our `SearchSpace`
(`space_from_hyperparameters`). The oracle's state is our usual event log: `get_state`
stores every ask and tell, and a reloaded tuner (`overwrite=False`) replays it into a fresh
searcher, so it continues with the same decisions.
"""

from __future__ import annotations

import math
from typing import Any

import keras_tuner as kt

from hpo.search import hyperband_brackets, make_searcher
from hpo.space import SearchSpace
from hpo.trial import Job, TrialResult, TrialState

GRID_LIMIT = 100      # a stepped Float/Int with at most this many values becomes a choice


def space_from_hyperparameters(hps: kt.HyperParameters) -> SearchSpace:
    """Keras Tuner's search space as ours. `Fixed` values are not searched (Keras Tuner
    fills them in); conditions become `when`."""
    spec: dict[str, Any] = {}
    for hp in hps.space:
        kind = type(hp).__name__
        body: dict[str, Any]
        if kind == "Fixed":
            continue
        if kind == "Boolean":
            body = {"type": "choice", "values": [False, True]}
        elif kind == "Choice":
            body = {"type": "choice", "values": list(hp.values)}
        elif kind in ("Int", "Float"):
            body = _numeric(hp, kind)
        else:
            raise ValueError(f"hyperparameter {hp.name!r}: type {kind} is not supported")
        if hp.conditions:
            when: dict[str, Any] = {}
            for condition in hp.conditions:
                if type(condition).__name__ != "Parent":
                    raise ValueError(f"hyperparameter {hp.name!r}: condition {condition} is not supported")
                when[condition.name] = list(condition.values)
            body["when"] = when
        spec[hp.name] = body
    return SearchSpace.from_dict(spec)


def _numeric(hp, kind: str) -> dict[str, Any]:
    low, high, log = hp.min_value, hp.max_value, hp.sampling == "log"
    step = getattr(hp, "step", None)
    if step and not log and (kind == "Float" or step != 1):
        count = int(math.floor((high - low) / step + 1e-9)) + 1
        if count <= GRID_LIMIT:
            values = [low + i * step for i in range(count)]
            return {"type": "choice", "values": [int(v) if kind == "Int" else float(v) for v in values]}
    return {"type": "int" if kind == "Int" else "float", "low": low, "high": high, "log": log}


class SearcherOracle(kt.Oracle):
    """A Keras Tuner oracle that delegates every decision to one of our searchers."""

    algorithm = "hyperband"

    def __init__(self, objective=None, max_epochs: int = 100, factor: int = 3, hyperband_iterations: int = 1,
                 seed: int | None = None, hyperparameters=None, allow_new_entries: bool = True,
                 tune_new_entries: bool = True, max_retries_per_trial: int = 0,
                 max_consecutive_failed_trials: int = 3, min_epochs: int = 1, max_trials: int | None = None,
                 searcher_options: dict[str, Any] | None = None):
        if max_trials is None:   # like kt.Hyperband: a number of full Hyperband iterations
            per_iteration = sum(r.n_configs for b in hyperband_brackets(min_epochs, max_epochs, factor)
                                for r in b.rungs)
            first_iteration = per_iteration
            if self.algorithm == "bohb":   # its first iteration holds the climbing bracket; later ones are Hyperband's
                first_iteration = make_searcher(
                    "bohb", {"x": {"type": "float", "low": 0.0, "high": 1.0}}, seed=0, direction="minimize",
                    min_budget=min_epochs, max_budget=max_epochs, eta=factor,
                    options=searcher_options).first_iteration_jobs()
            max_trials = first_iteration + per_iteration * (hyperband_iterations - 1)
        super().__init__(objective=objective, max_trials=max_trials, hyperparameters=hyperparameters,
                         allow_new_entries=allow_new_entries, tune_new_entries=tune_new_entries, seed=seed,
                         max_retries_per_trial=max_retries_per_trial,
                         max_consecutive_failed_trials=max_consecutive_failed_trials)
        self.max_epochs, self.min_epochs, self.factor = max_epochs, min_epochs, factor
        self.searcher_options = dict(searcher_options or {})
        self._searcher = None
        self._jobs: dict[str, Job] = {}        # Keras Tuner trial id -> our job
        self._kt_ids: dict[int, str] = {}      # our trial id -> Keras Tuner trial id
        self._log: list[list[Any]] = []        # ['ask', kt_id] and ['tell', kt_id, value or None]

    # --- the searcher ---------------------------------------------------------------------
    @property
    def searcher(self):
        if self._searcher is None:
            direction = "maximize" if self.objective.direction == "max" else "minimize"
            self._searcher = make_searcher(
                self.algorithm, space_from_hyperparameters(self.hyperparameters), seed=int(self.seed),
                direction=direction, min_budget=self.min_epochs, max_budget=self.max_epochs, eta=self.factor,
                options=self.searcher_options)
        return self._searcher

    def populate_space(self, trial_id: str) -> dict[str, Any]:
        job = self.searcher.ask()
        if job is None:   # waiting on running trials, or the searcher is done
            return {"status": "IDLE" if self.ongoing_trials
                    else "STOPPED"}
        self._bind(trial_id, job)
        self._log.append(["ask", trial_id])
        return {"status": "RUNNING", "values": self._values(job)}

    def _bind(self, trial_id: str, job: Job) -> None:
        self._jobs[trial_id] = job
        self._kt_ids[job.trial_id] = trial_id

    def _values(self, job: Job) -> dict[str, Any]:
        values = dict(job.config)
        values["tuner/epochs"] = _epochs(job.budget)
        values["tuner/initial_epoch"] = 0
        if job.continues is not None:
            parent = self._jobs[self._kt_ids[job.continues]]
            values["tuner/trial_id"] = self._kt_ids[job.continues]
            values["tuner/initial_epoch"] = _epochs(parent.budget)
        values["tuner/bracket"] = job.bracket if job.bracket is not None else 0
        values["tuner/round"] = job.rung if job.rung is not None else 0
        return values

    def end_trial(self, trial) -> None:
        super().end_trial(trial)
        if trial.trial_id in self._retry_queue:       # Keras Tuner runs it again: not finished yet
            return
        ended = self.trials[trial.trial_id]
        value = ended.score if ended.status == "COMPLETED" else None
        value = float(value) if value is not None and math.isfinite(value) else None
        self._tell(trial.trial_id, value, ended.message)
        self._log.append(["tell", trial.trial_id, value])
        self.save()

    def _tell(self, trial_id: str, value: float | None, message: str | None = None) -> None:
        job = self._jobs[trial_id]
        if value is None:
            result = TrialResult(value=None, state=TrialState.FAILED, error=message or "failed")
        else:
            result = TrialResult(value=value)
        self.searcher.tell(job, result)

    # --- persistence: the event log, replayed ----------------------------------------------
    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state["hpo"] = {"algorithm": self.algorithm, "log": self._log, "max_epochs": self.max_epochs,
                        "min_epochs": self.min_epochs, "factor": self.factor,
                        "searcher_options": self.searcher_options}
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        saved = state.get("hpo")
        if saved is None:
            return
        self._searcher, self._jobs, self._kt_ids, self._log = None, {}, {}, []
        for event in saved["log"]:
            if event[0] == "ask":
                job = self.searcher.ask()
                if job is None:
                    raise RuntimeError(f"replaying the oracle's log: trial {event[1]} was asked, but the "
                                       f"searcher now asks nothing; the saved state does not match this code")
                self._bind(event[1], job)
            else:
                self._tell(event[1], event[2])
            self._log.append(list(event))


def _epochs(budget: float) -> int:
    return max(1, int(round(budget)))


class HyperbandOracle(SearcherOracle):
    """Synchronous Hyperband (the published schedule) from `hpo.search`."""
    algorithm = "hyperband"


class BOHBOracle(SearcherOracle):
    """BOHB: Hyperband's budgets, configurations from BOHB's default model (`hpo.search.BOHB`)."""
    algorithm = "bohb"


class ASHAOracle(SearcherOracle):
    """Asynchronous successive halving: never waits for a rung to fill."""
    algorithm = "asha"


class Tuner(kt.Hyperband):
    """A `kt.Tuner` for budget oracles: each trial trains `tuner/initial_epoch` to
    `tuner/epochs`, and a promotion loads its parent's checkpoint first. That is
    `kt.Hyperband`'s trial logic, taken with any oracle."""

    def __init__(self, hypermodel=None, oracle=None, **kwargs):
        kt.Tuner.__init__(self, oracle=oracle, hypermodel=hypermodel, **kwargs)


def _tuner_class(oracle_class: type, doc: str) -> type:
    def __init__(self, hypermodel=None, objective=None, max_epochs=100, factor=3, hyperband_iterations=1,
                 seed=None, hyperparameters=None, tune_new_entries=True, allow_new_entries=True,
                 max_retries_per_trial=0, max_consecutive_failed_trials=3, **kwargs):
        oracle = oracle_class(objective, max_epochs=max_epochs, factor=factor,
                              hyperband_iterations=hyperband_iterations, seed=seed,
                              hyperparameters=hyperparameters, tune_new_entries=tune_new_entries,
                              allow_new_entries=allow_new_entries, max_retries_per_trial=max_retries_per_trial,
                              max_consecutive_failed_trials=max_consecutive_failed_trials)
        Tuner.__init__(self, hypermodel=hypermodel, oracle=oracle, **kwargs)
    return type(oracle_class.algorithm.upper() if oracle_class.algorithm != "hyperband" else "Hyperband",
                (Tuner,), {"__init__": __init__, "__doc__": doc})


BOHB = _tuner_class(BOHBOracle, "`kt.Hyperband`'s signature, BOHB's decisions.")
Hyperband = _tuner_class(HyperbandOracle, "`kt.Hyperband`'s signature, our Hyperband's decisions.")
ASHA = _tuner_class(ASHAOracle, "`kt.Hyperband`'s signature, asynchronous successive halving.")

__all__ = ["ASHA", "ASHAOracle", "BOHB", "BOHBOracle", "Hyperband", "HyperbandOracle", "SearcherOracle", "Tuner",
           "space_from_hyperparameters"]
