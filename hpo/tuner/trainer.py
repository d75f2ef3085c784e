"""hpo's `Trainer`, training the models a `build_model(hp)` returns.

The one engine the CLI uses, with two differences, both in `resolve`: the builder is the
user's `build_model` run on a `HyperParameters` holding the trial's config
(`HypermodelBuilder`), and the optimizer's class and hyperparameters are the ones the user
compiled the model with (`compiled_model.optimizer_params`), read once per config. The loss
and metrics the user compiled are the experiment's `training.loss`/`training.metrics`,
checked here to be the same for every config. Which engine trains a model (compiled step
or `fit`) is the trainer's usual choice (`hpo.training.engines`), and the log says why.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Callable, Mapping, Sequence

from hpo.errors import TrialFailed
from hpo.models import built
from hpo.training.trainer import Trainer
from hpo.trial import config_identity
from hpo.tuner.compiled_model import UnsupportedModel, loss_and_metrics, optimizer_params
from hpo.tuner.hyperparameters import HyperParameters

log = logging.getLogger("hpo.tuner")

# The trainer's own keys: a user parameter of the same name must mean the same thing.
_TRAINER_KEYS = frozenset({"batch_size"})


class HypermodelBuilder:
    """hpo's builder signature `(config, input_shape, num_classes) -> model` over a Keras
    Tuner `build_model(hp)`: the hp answers with the config's values (an inactive
    parameter, absent from the config, gets its default)."""

    def __init__(self, build: Callable[[HyperParameters], Any], names: Sequence[str], tunable: Sequence[str] = ()):
        # The architecture signature names a builder by these: the same in every process.
        self.__module__, self.__qualname__ = "hpo.tuner", "hypermodel"
        self.build = build
        self.names = tuple(names)
        self.tunable_params = tuple(tunable)     # held in variables: they do not change the graph
        # build_model compiles its model, and the optimizer's constructor makes a variable, which
        # Keras refuses under a StatelessScope: fresh weights come from real builds
        # (`hpo.training.fresh_weights`), without first trying the stateless path per architecture.
        self.builds_stateless = False
        self._warned: set[str] = set()

    def hyperparameters(self, params: Mapping[str, Any]) -> HyperParameters:
        return HyperParameters(values={k: params[k] for k in self.names if k in params})

    def __call__(self, params: Mapping[str, Any], input_shape=None, num_classes=None):
        hp = self.hyperparameters(params)
        model = self.build(hp)
        unknown = [n for n in hp.asked if n not in self.names and hp.declared[n].kind != "fixed"]
        for name in unknown:
            if name not in self._warned:
                self._warned.add(name)
                log.warning("build_model asked for hyperparameter %r, which exploring its branches before the "
                            "search did not find; it takes its default %r in every trial", name,
                            hp.declared[name].default)
        check_is_model(model)
        if input_shape is not None:
            # A Sequential without keras.Input (as Keras Tuner's guides write it), or a subclassed
            # model, makes its weights on its first call, which the compiled step never makes:
            # built here from the data's shape, as `fit` would build it.
            model = built(model, input_shape)
        return model


class NotAModel(TypeError):
    """`build_model` returned something other than a Keras model."""


def check_is_model(model) -> None:
    """NotAModel when `build_model` returned something other than a Keras model, naming what
    it returned (before the search, `Tuner` raises it as a ValueError; in a trial it fails
    the trial)."""
    import keras

    if not isinstance(model, keras.Model):
        what = "None" if model is None else f"a {type(model).__name__}"
        raise NotAModel(f"build_model returned {what}, expected a keras.Model (build it, call model.compile(...) "
                        f"and return the model)")


class HypermodelTrainer(Trainer):
    """A `Trainer` whose optimizer is the one the user compiled for each config."""

    def __init__(self, dataset, builder: HypermodelBuilder, training, fixed_params: Mapping[str, Any], device: str,
                 *, known_compile_choices=None):
        super().__init__(dataset, builder, training, fixed_params, device,
                         known_compile_choices=known_compile_choices)
        self._compiled: dict[str, dict[str, Any]] = {}

    def resolve(self, config: Mapping[str, Any]) -> dict[str, Any]:
        params = super().resolve(config)
        params.update(self.compiled_settings(config))
        return params

    def compiled_settings(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The optimizer keys of the model `build_model` compiles for `config`."""
        key = config_identity(config)
        if key not in self._compiled:
            self._compiled[key] = compiled_settings(self.builder, config, self.training.loss, self.training.metrics)
        return self._compiled[key]

    def resolve_task(self, task) -> dict[str, Any]:
        """`resolve`, reading a new config's optimizer from the model its trial starts from:
        built under the trial's seed on the device, it is kept as the spare that picking the
        engine and compiling a new architecture's program then take, instead of building it
        again (`Trainer.keep_spare`)."""
        key = config_identity(task.config)
        if key in self._compiled:
            return self.resolve(task.config)
        model = self.build_model(Trainer.resolve(self, task.config), task.seed)
        self._compiled[key] = settings_of(model, task.config, self.training.loss, self.training.metrics)
        params = self.resolve(task.config)
        self.keep_spare(params, task.seed, model)
        return params


def compiled_settings(builder: HypermodelBuilder, config: Mapping[str, Any], loss: str,
                      metrics: Sequence[str]) -> dict[str, Any]:
    try:
        model = builder(dict(config))
    except Exception as exc:
        raise TrialFailed(f"model builder failed: {type(exc).__name__}: {exc}") from exc
    return settings_of(model, config, loss, metrics)


def settings_of(model, config: Mapping[str, Any], loss: str, metrics: Sequence[str]) -> dict[str, Any]:
    """The optimizer keys of `model`, which `build_model` built and compiled for `config`;
    TrialFailed when hpo's trainer cannot train it as compiled."""
    try:
        settings = optimizer_params(model)
        found = loss_and_metrics(model)
    except UnsupportedModel as exc:
        raise TrialFailed(str(exc)) from None
    if found != (loss, tuple(metrics)):
        raise TrialFailed(f"build_model compiled this config with loss {found[0]!r} and metrics {list(found[1])}, "
                          f"but the search's first build with {loss!r} and {list(metrics)}; hpo trains one loss "
                          f"and one set of metrics per search")
    for name in set(config) & (set(settings) | _TRAINER_KEYS):
        if name in settings and _same(config[name], settings[name]):
            continue
        if name not in settings:      # the batch size: search's argument, never the model's
            raise TrialFailed(f"hyperparameter {name!r} has the name of a setting hpo's trainer takes from "
                              f"search({name}=), not from build_model; rename it")
        raise TrialFailed(f"hyperparameter {name!r} has the name of a setting hpo's trainer reads (the "
                          f"optimizer) but another value ({config[name]!r} against {settings[name]!r}); rename it")
    return settings


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) <= 1e-6 * max(1.0, abs(float(b)))
    return str(a).lower() == str(b).lower()


class TrainerFactory:
    """What every executor calls to make its trainer: `(experiment, slot, known) -> trainer`.
    Pickled to worker processes with cloudpickle, so a `build_model` defined in `__main__` or
    a notebook travels by value, and with the search's data (`data`), which a worker
    registers before its loader reads it: the arrays go to each worker once per search."""

    # Its class is importable and its state carries `build` by value, so an executor sends it
    # as it is (`hpo.executors.local.shipped`): the build is pickled once per worker start.
    ships_by_value = True
    # Its trainer trains Keras models: local workers fork from a server that imported
    # TensorFlow once (`hpo.executors.local.trains_with_tensorflow`).
    imports_tensorflow = True

    def __init__(self, build: Callable, names: Sequence[str], tunable: Sequence[str], data=None,
                 threads: int | None = None):
        # The Dask executor names a worker's trainer maker by these.
        self.__module__, self.__qualname__ = "hpo.tuner.trainer", "TrainerFactory"
        self.build = build
        self.names, self.tunable = tuple(names), tuple(tunable)
        self.data = data
        self.threads = threads
        self._build_digest: str | None = None

    @property
    def fingerprint(self) -> str:
        """A digest of the pickled build_model: the same name with an edited body differs
        (the Dask workers' trainer cache is keyed on it)."""
        if self._build_digest is None:
            import cloudpickle
            self._build_digest = hashlib.sha256(cloudpickle.dumps(self.build)).hexdigest()[:16]
        return self._build_digest

    def __getstate__(self):
        import cloudpickle  # by value: a function of __main__ or a notebook cannot be imported by name

        build = cloudpickle.dumps(self.build)
        return {**self.__dict__, "build": build, "_build_digest": hashlib.sha256(build).hexdigest()[:16]}

    def __setstate__(self, state):
        import pickle

        self.__dict__.update({**state, "build": pickle.loads(state["build"])})

    def __call__(self, experiment, slot: int = 0, known_compile_choices=None) -> HypermodelTrainer:
        from hpo.data import load_dataset
        from hpo.training.devices import available_devices, enable_memory_growth, select_device
        from hpo.tuner import data as search_data

        if self.data is not None:
            search_data.register(self.data)
        if self.threads:
            import tensorflow as tf
            try:
                tf.config.threading.set_intra_op_parallelism_threads(self.threads)
                tf.config.threading.set_inter_op_parallelism_threads(self.threads)
            except RuntimeError:     # this process already ran TensorFlow: keep its settings
                pass
        enable_memory_growth()
        device = select_device(experiment.training.device, available_devices(), slot)
        dataset = load_dataset(experiment.data, seed=experiment.seed, class_labels=experiment.training.class_labels,
                               announce=False)
        builder = HypermodelBuilder(self.build, self.names, self.tunable)
        return HypermodelTrainer(dataset, builder, experiment.training, experiment.model.params, device,
                                 known_compile_choices=known_compile_choices)
