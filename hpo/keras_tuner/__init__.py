"""Keras Tuner's API on hpo's engine: change `import keras_tuner as kt` to

    import hpo.keras_tuner as kt

and the script runs unchanged, with hpo training it. `kt.Hyperband`, `kt.RandomSearch`,
`kt.BayesianOptimization` take Keras Tuner's arguments; `kt.BOHB`, `kt.ASHA`,
`kt.AsyncHyperband`, `kt.AsyncBOHB` and `kt.FreezeThaw` take `kt.Hyperband`'s: every
searcher of `hpo.search.SEARCHERS` has its class here (`CLASSES`). `build_model(hp)`
defines the space by running (`hp.Int`, `hp.Float`, `hp.Choice`, `hp.Boolean`, `hp.Fixed`,
`hp.conditional_scope`, parameters on some branches only: `hpo.tuner.discovery`). The
models are trained by hpo's compiled step (or Keras's `fit` where the step cannot reproduce
it), with the optimizer, loss and metrics the model was compiled with; a promotion
continues its parent's checkpoint with its parent's full config. As in Keras Tuner, a trial
is scored by its best epoch, whose weights `get_best_models` returns
(`training.keep_best_epoch`).
`directory/project_name` is an hpo study (`hpo status`, `best`, `report`, `export`,
`tensorboard`); running the script again resumes it. What Keras Tuner offers and hpo does
not is a ValueError naming it.

What this face refuses because hpo trains the model itself (a `HyperModel` with its own
`fit`, a `run_trial` of one's own, `executions_per_trial`, ...) runs in Keras Tuner's own loop with
our searchers deciding: `hpo.keras_tuner.oracles` (`OracleTuner` with `BOHBOracle`,
`HyperbandOracle` or `ASHAOracle`; it needs `keras_tuner` installed, this face does not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpo.errors import NotOffered
from hpo.keras_tuner import errors
from hpo.search import SEARCHERS as _SEARCHERS
from hpo.tuner.hyperparameters import HyperParameters
from hpo.tuner.tuner import HyperModel
from hpo.tuner.tuner import Tuner as _Tuner


@dataclass(frozen=True)
class Objective:
    """Keras Tuner's `Objective(name, direction)`, direction 'min' or 'max'."""

    name: str
    direction: str

    def __post_init__(self):
        if self.direction not in ("min", "max"):
            raise ValueError(f"Objective direction must be 'min' or 'max', got {self.direction!r}")


# Keras Tuner arguments accepted only at their defaults: each would change what a search does.
_AT_DEFAULT = {"hyperparameters": None, "tune_new_entries": True, "allow_new_entries": True,
               "max_retries_per_trial": 0, "executions_per_trial": 1, "distribution_strategy": None,
               "logger": None, "tuner_id": None, "max_model_size": None, "optimizer": None, "loss": None,
               "metrics": None, "num_initial_points": None, "alpha": 1e-4, "beta": 2.6}


def _objective(objective: Any) -> tuple[str, str | None]:
    if objective is None:
        return "val_loss", "minimize"
    if isinstance(objective, str):
        return objective, None
    if isinstance(objective, (list, tuple)):
        raise ValueError("several objectives (a list) are not supported by hpo's Keras Tuner face; use hpo.optimize "
                         "or hpo search with search.objectives")
    name, direction = getattr(objective, "name", None), getattr(objective, "direction", None)
    if not isinstance(name, str) or direction not in ("min", "max"):
        raise ValueError(f"objective must be a metric name or kt.Objective(name, 'min'|'max'), got {objective!r}")
    return name, "maximize" if direction == "max" else "minimize"


class _KerasTunerFace(_Tuner):
    algorithm_name = "hyperband"

    def _init(self, hypermodel, objective, seed, directory, project_name, overwrite, unsupported: dict,
              **settings):
        given = {k: v for k, v in unsupported.items() if k in _AT_DEFAULT and v != _AT_DEFAULT[k]}
        unknown = sorted(k for k in unsupported if k not in _AT_DEFAULT)
        if unknown:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {unknown[0]!r}")
        if given:
            name = sorted(given)[0]
            raise ValueError(f"{type(self).__name__}({name}={given[name]!r}) is Keras Tuner API that hpo's tuner does "
                             f"not support; leave it at its default")
        if hypermodel is None:
            raise ValueError(f"{type(self).__name__} needs a hypermodel: build_model(hp) or a HyperModel")
        name, direction = _objective(objective)
        seed = 0 if seed is None else int(seed)
        _Tuner.__init__(self, hypermodel, None, objective=name, direction=direction, seed=seed,
                        directory=directory or ".", project_name=project_name or "untitled_project",
                        overwrite=overwrite, keep_best_epoch=True, **settings)


class Hyperband(_KerasTunerFace):
    """`kt.Hyperband`: hpo's synchronous Hyperband (max_epochs, factor, hyperband_iterations;
    trials = whole iterations, as Keras Tuner counts them). `workers`/`scheduler` run trials
    in parallel (then the asynchronous form, which does not wait at rung barriers, is better:
    `kt.ASHA`)."""

    algorithm_name = "hyperband"

    def __init__(self, hypermodel=None, objective=None, max_epochs: int = 100, factor: int = 3,
                 hyperband_iterations: int = 1, seed: int | None = None, directory=None, project_name=None,
                 overwrite: bool = False, max_consecutive_failed_trials: int = 3, workers: int = 1,
                 scheduler: str | None = None, **unsupported):
        self._init(hypermodel, objective, seed, directory, project_name, overwrite, unsupported,
                   algorithm=self.algorithm_name, max_epochs=max_epochs, factor=factor,
                   hyperband_iterations=hyperband_iterations, workers=workers, scheduler=scheduler,
                   max_consecutive_failed_trials=max_consecutive_failed_trials)


class BOHB(Hyperband):
    """`kt.Hyperband`'s signature, BOHB's decisions (Hyperband's budgets, configurations from
    a model of the good ones)."""

    algorithm_name = "bohb"


class ASHA(Hyperband):
    """`kt.Hyperband`'s signature, asynchronous successive halving (never waits for a rung)."""

    algorithm_name = "asha"


class AsyncHyperband(Hyperband):
    """`kt.Hyperband`'s signature, asynchronous Hyperband (ASHA over every bracket)."""

    algorithm_name = "async_hyperband"


class AsyncBOHB(Hyperband):
    """`kt.Hyperband`'s signature, BOHB's model with asynchronous successive halving."""

    algorithm_name = "async_bohb"


class FreezeThaw(Hyperband):
    """`kt.Hyperband`'s signature, the learning-curve searcher (`hpo.search.FreezeThaw`):
    each configuration is paused after each step up to `max_epochs` and continued while its
    extrapolated curve promises the most; `factor` sets the steps, and the trial count is
    Hyperband's for the same budgets."""

    algorithm_name = "freeze_thaw"


class RandomSearch(_KerasTunerFace):
    """`kt.RandomSearch`: `max_trials` configurations, each trained for `search(epochs=)`."""

    one_budget = True
    algorithm_name = "random"

    def __init__(self, hypermodel=None, objective=None, max_trials: int = 10, seed: int | None = None,
                 directory=None, project_name=None, overwrite: bool = False, max_consecutive_failed_trials: int = 3,
                 workers: int = 1, scheduler: str | None = None, **unsupported):
        self._init(hypermodel, objective, seed, directory, project_name, overwrite, unsupported,
                   algorithm=self.algorithm_name, max_epochs=None, max_trials=max_trials, workers=workers,
                   scheduler=scheduler, max_consecutive_failed_trials=max_consecutive_failed_trials)


class BayesianOptimization(RandomSearch):
    """`kt.BayesianOptimization`'s signature. The model is BOHB's at one budget, not Keras
    Tuner's: a Gaussian process choosing, by expected improvement, among its TPE's draws,
    from the 30th result on also among uniform draws and neighbours of the best configs
    (the TPE alone in a space with a choice and no condition, or with priors); said in the log when
    the search starts."""

    algorithm_name = "bohb"

    def search(self, *args, **kwargs) -> None:
        import logging
        logging.getLogger("hpo.tuner").info("BayesianOptimization: configurations come from hpo's BOHB model at "
                                            "one budget (a Gaussian process over its TPE's draws, and from the "
                                            "30th result on over uniform and local ones too; the TPE alone "
                                            "where the space has a choice and no condition, or priors)")
        super().search(*args, **kwargs)


# The class of this face that runs each searcher of hpo.search (the native face takes the
# name itself: `hpo.Tuner(algorithm=...)`).
CLASSES = {"random": RandomSearch, "hyperband": Hyperband, "asha": ASHA, "async_hyperband": AsyncHyperband,
           "bohb": BOHB, "async_bohb": AsyncBOHB, "freeze_thaw": FreezeThaw}
assert set(CLASSES) == set(_SEARCHERS), "every searcher has a Keras Tuner face class"
assert all(cls.algorithm_name == name for name, cls in CLASSES.items())


def __getattr__(name: str):
    if name in ("Tuner", "Oracle", "GridSearch", "SklearnTuner", "oracles", "tuners", "engine", "applications"):
        raise NotOffered(f"keras_tuner.{name} is Keras Tuner API that hpo.keras_tuner does not offer: use "
                             f"kt.Hyperband, kt.RandomSearch, kt.BayesianOptimization, kt.BOHB, kt.ASHA, "
                             f"kt.AsyncHyperband, kt.AsyncBOHB or kt.FreezeThaw (or, for our searchers inside "
                             f"Keras Tuner's own loop, hpo.keras_tuner.oracles.OracleTuner with its oracles)")
    raise AttributeError(f"module 'hpo.keras_tuner' has no attribute {name!r}")


__all__ = ["ASHA", "BOHB", "CLASSES", "AsyncBOHB", "AsyncHyperband", "BayesianOptimization", "FreezeThaw",
           "HyperModel", "HyperParameters", "Hyperband", "Objective", "RandomSearch", "errors"]
