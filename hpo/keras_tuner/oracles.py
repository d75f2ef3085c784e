"""Our searchers deciding inside Keras Tuner's own loop: for what the face, `hpo.keras_tuner`,
refuses because hpo trains the model itself (a `HyperModel` with its own `fit`, a tuner
subclass with its own `run_trial`, `executions_per_trial`, a `distribution_strategy`).
Keras Tuner trains, keeps the trials and the checkpoints; our searcher decides.
Needs `keras_tuner` installed (the face does not).

    import keras_tuner as kt
    from hpo.keras_tuner.oracles import BOHBOracle, OracleTuner

    oracle = BOHBOracle(objective=kt.Objective("val_accuracy", "max"), max_epochs=9, factor=3, seed=0)
    tuner = OracleTuner(hypermodel=build, oracle=oracle, directory="runs", project_name="digits")
    tuner.search(x, y, validation_data=(x_val, y_val))

`HyperbandOracle`, `BOHBOracle` and `ASHAOracle` are `kt.Oracle`s with `kt.Hyperband`'s
arguments (`max_trials` defaults to whole Hyperband iterations, as Keras Tuner counts them).
`OracleTuner` is `kt.Hyperband`'s trial logic with any oracle: each trial trains from
`tuner/initial_epoch` to `tuner/epochs`, and a promotion continues from its parent trial's
checkpoint. A plain `kt.Tuner` ignores `tuner/epochs` and trains every trial for the `epochs`
given to `search`, so budgets need `OracleTuner`, a subclass of it, or a `run_trial` that
reads them.

The searcher is made when the first trial starts, from the parameters Keras Tuner knows then
(`space_from_hyperparameters`, the conversion the face's space takes too:
`hpo.tuner.keras_tuner_terms`); one that Keras Tuner meets later takes its default. The
oracle's state is our usual event log: `get_state` stores every ask and tell, and a reloaded
tuner (`overwrite=False`) replays it into a fresh searcher, so it continues with the same
decisions.
"""

from __future__ import annotations

import math
from typing import Any

import keras_tuner as kt

from hpo.errors import NotOffered
from hpo.search import make_searcher
from hpo.space import SearchSpace
from hpo.trial import Job, TrialResult, TrialState
from hpo.tuner.keras_tuner_terms import declared_from_keras_tuner, iteration_jobs, space_dict


def space_from_hyperparameters(hps: kt.HyperParameters) -> SearchSpace:
    """Keras Tuner's search space as ours. `Fixed` values are not searched (Keras Tuner
    fills them in); conditions become `when`."""
    declared = declared_from_keras_tuner(hps)
    return SearchSpace.from_dict(space_dict(declared, {name: dict(d.conditions) for name, d in declared.items()}))


class SearcherOracle(kt.Oracle):
    """A Keras Tuner oracle that delegates every decision to one of our searchers."""

    algorithm = "hyperband"

    def __init__(self, objective=None, max_epochs: int = 100, factor: int = 3, hyperband_iterations: int = 1,
                 seed: int | None = None, hyperparameters=None, allow_new_entries: bool = True,
                 tune_new_entries: bool = True, max_retries_per_trial: int = 0,
                 max_consecutive_failed_trials: int = 3, min_epochs: int = 1, max_trials: int | None = None,
                 searcher_options: dict[str, Any] | None = None):
        if max_trials is None:   # like kt.Hyperband: a number of full Hyperband iterations
            max_trials = iteration_jobs(self.algorithm, min_epochs, max_epochs, factor, hyperband_iterations,
                                        searcher_options)
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


class OracleTuner(kt.Hyperband):
    """A `kt.Tuner` for budget oracles: each trial trains `tuner/initial_epoch` to
    `tuner/epochs`, and a promotion loads its parent's checkpoint first. That is
    `kt.Hyperband`'s trial logic, taken with any oracle; `kt.Tuner`'s other arguments
    (`directory`, `project_name`, `overwrite`, `executions_per_trial`, ...) pass through."""

    def __init__(self, hypermodel=None, oracle=None, **kwargs):
        kt.Tuner.__init__(self, oracle=oracle, hypermodel=hypermodel, **kwargs)


def __getattr__(name: str):
    # The tuner classes of hpo.keras_tuner's names (BOHB, Hyperband, ASHA) are the face's only.
    oracle = {"BOHB": "BOHBOracle", "Hyperband": "HyperbandOracle", "ASHA": "ASHAOracle"}.get(name)
    if oracle is not None:
        raise NotOffered(f"hpo.keras_tuner.oracles has no {name}: for hpo's engine use hpo.keras_tuner.{name}; "
                             f"for our searcher inside Keras Tuner's loop, "
                             f"OracleTuner(hypermodel, oracle={oracle}(objective, max_epochs=..., ...), ...)")
    if name == "Tuner":
        raise NotOffered("hpo.keras_tuner.oracles has no Tuner: the kt.Tuner for these oracles is OracleTuner "
                             "(hpo.Tuner is hpo's own)")
    raise AttributeError(f"module 'hpo.keras_tuner.oracles' has no attribute {name!r}")


__all__ = ["ASHAOracle", "BOHBOracle", "HyperbandOracle", "OracleTuner", "SearcherOracle",
           "space_from_hyperparameters"]
