"""A plain experiment mapping -> a validated, frozen `Experiment`.

Every error names the key path and what was expected (`hpo.config.yaml_source` adds the
file and line). Choices come from the name tables (`hpo.registry`) and the open registries
(`LOADERS`, `BUILDERS`, `SEARCHERS`); defaults from the dataclasses (`hpo.config.schema`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from hpo import metric_names, references
from hpo.config.schema import (
    DataConfig,
    EarlyStoppingConfig,
    ExecutionConfig,
    Experiment,
    ModelConfig,
    OutputConfig,
    SearchConfig,
    TrainingConfig,
)
from hpo.data.loaders import LOADERS
from hpo.errors import ConfigError, ConfigTypeError, did_you_mean, one_of
from hpo.models import BUILDERS
from hpo.registry import BACKENDS, COMPILE_MODES, DIRECTIONS, ENGINES, OPTIMIZERS, TRAINER_RANGES, default_algorithm
from hpo.search import SEARCHERS
from hpo.search.multiobjective.objectives import Constraint, Goals
from hpo.space import SearchSpace, python_values

CUSTOM_REF = references.REFERENCE


_FIELD_DEFAULT = object()     # `_Section.get`: the dataclass field's own default


class _Section:
    """Reads one mapping, checking types and refusing keys it was not asked about. Given a
    dataclass, its fields are the keys and their defaults the values of keys left out: the
    dataclasses are the one place defaults are written."""

    def __init__(self, raw: Any, key: str, known: Sequence[str] | type):
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigTypeError(f"expected a mapping, got {raw!r}", key=key or None)
        self.defaults: dict[str, Any] = {}
        if isinstance(known, type):
            fields = dataclasses.fields(known)
            self.defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                             for f in fields
                             if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}
            known = [f.name for f in fields]
        self.raw, self.key = raw, key
        for name in raw:
            if name not in known:
                raise ConfigError(f"unknown key '{name}'{did_you_mean(name, known)}; "
                                  f"expected one of {one_of(known)}", key=self._path(str(name)))

    def _path(self, name: str) -> str:
        return f"{self.key}.{name}" if self.key else name

    def get(self, name: str, kind: str, default: Any = _FIELD_DEFAULT, *, required: bool = False,
            choices: Sequence[str] | None = None, minimum: float | None = None,
            maximum: float | None = None, custom_ok: bool = False) -> Any:
        key = self._path(name)
        if name not in self.raw or self.raw[name] is None:
            if required:
                raise ConfigError(f"missing required key; expected {_KIND_TEXT[kind]}", key=key)
            return self.defaults.get(name) if default is _FIELD_DEFAULT else default
        value = self.raw[name]
        if not _is_kind(value, kind):
            raise ConfigTypeError(f"expected {_KIND_TEXT[kind]}, got {value!r}", key=key)
        if kind == "number":
            value = float(value)
            if not math.isfinite(value):
                raise ConfigError(f"expected a finite number, got {value}", key=key)
        if choices is not None and value not in choices:
            if not (custom_ok and isinstance(value, str) and CUSTOM_REF.match(value)):
                extra = " or a custom 'package.module:function'" if custom_ok else ""
                raise ConfigError(f"expected one of {one_of(choices)}{extra}, got {value!r}"
                                  f"{did_you_mean(value, choices)}", key=key)
            references.resolve(value, key=key)
        if minimum is not None and value < minimum:
            raise ConfigError(f"expected a value >= {minimum}, got {value!r}", key=key)
        if maximum is not None and value > maximum:
            raise ConfigError(f"expected a value <= {maximum}, got {value!r}", key=key)
        return value


# Kinds that take 'auto' or a whole number from 1 up to a bound (None: no bound).
_AUTO_OR_COUNT = {"workers": None, "fuse": 64}
_KIND_TEXT = {"str": "a string", "int": "a whole number", "number": "a number",
              "bool": "true or false", "mapping": "a mapping", "list": "a list",
              **{kind: "a whole number or 'auto'" if most is None else f"a whole number from 1 to {most}, or 'auto'"
                 for kind, most in _AUTO_OR_COUNT.items()}}


def _is_kind(value: Any, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "mapping":
        return isinstance(value, Mapping)
    if kind == "list":
        return isinstance(value, list)
    if kind in _AUTO_OR_COUNT:
        most = _AUTO_OR_COUNT[kind]
        return value == "auto" or (_is_kind(value, "int") and value >= 1 and (most is None or value <= most))
    raise ValueError(kind)


def check_schedule(min_budget: float, max_budget: float, eta: float, max_trials: int | None = None, *,
                   names: Mapping[str, str] | None = None, whole_budgets: bool = False) -> None:
    """Budgets and a halving rate a search can run, checked before any study is written (a
    schedule that cannot run would otherwise fail inside the searcher). One check for every
    face: `hpo search` (the YAML keys), `hpo.optimize` and the tuners, each naming the setting
    its user wrote through `names` ({'min_budget': 'min_epochs', 'eta': 'factor', ...}).
    `whole_budgets`: budgets are epochs, whole numbers from 1. The ConfigError's key is the
    field (`min_budget`, `max_budget`, `eta`, `max_trials`), which the caller locates."""
    name = {field: field for field in ("min_budget", "max_budget", "eta", "max_trials")}
    name.update(names or {})
    for field, value in (("max_budget", max_budget), ("min_budget", min_budget)):
        if whole_budgets and not (value >= 1 and float(value).is_integer()):
            raise ConfigError(f"expected {name[field]} >= 1 (a whole number of epochs), got {value:g}: a search "
                              f"needs epochs to train", key=field)
        if not value > 0:
            raise ConfigError(f"expected {name[field]} > 0, got {value:g}: a search needs a budget to train for",
                              key=field)
    if min_budget > max_budget:
        raise ConfigError(f"expected {name['min_budget']} <= {name['max_budget']}, got {name['min_budget']}="
                          f"{min_budget:g} and {name['max_budget']}={max_budget:g}", key="min_budget")
    if not eta >= 2:
        raise ConfigError(f"expected {name['eta']} >= 2 (the halving rate: each rung keeps 1/{name['eta']} of "
                          f"its configurations), got {eta:g}", key="eta")
    if max_trials is not None and max_trials < 1:
        raise ConfigError(f"expected {name['max_trials']} >= 1, got {max_trials}: a search needs a trial to run",
                          key="max_trials")


def python_argument_error(exc: ConfigError, arguments: Mapping[str, str], face: str) -> ConfigError:
    """A ConfigError raised at an experiment key, as the Python face that set the key names it:
    `arguments` maps a key (or a key prefix) to the argument (`{"search.eta": "factor"}`), and
    the error then reads `face, argument 'factor': ...` with no YAML key. An error in `space`
    keeps its key, the path inside the `space` mapping. The type is kept (a ConfigTypeError
    stays a TypeError)."""
    kind = type(exc)
    key = exc.key or ""
    if key == "space" or key.startswith("space."):
        return kind(exc.message, key=exc.key, source=f"{face}, argument 'space'")
    argument = next((arg for prefix, arg in arguments.items()
                     if key == prefix or key.startswith(prefix + ".") or key.startswith(prefix + "[")), None)
    if argument is None:
        return kind(exc.message, key=exc.key, source=face)
    return kind(exc.message, source=f"{face}, argument {argument!r}")


def registered_names() -> dict[str, tuple[str, ...]]:
    """The names each registry offers, read from the registries themselves."""
    return {"datasets": tuple(LOADERS), "builders": tuple(BUILDERS), "algorithms": tuple(SEARCHERS),
            "compile_modes": COMPILE_MODES}


def experiment_from_dict(raw: Any, *, source: str = "<dict>", needs_data: bool = True) -> Experiment:
    """Validate a plain experiment mapping; every ConfigError names `source`. `needs_data`:
    False for a search whose trials bring their own data (`hpo.optimize`'s Python objective),
    which may leave `data` out (`Experiment.data` is then None)."""
    try:
        return _experiment_from_dict(python_values(raw), source, needs_data)
    except ConfigError as err:
        raise err.located(source=source) from None


def _data(raw: Any, needs_data: bool) -> DataConfig | None:
    if raw is None and not needs_data:
        return None
    d = _Section(raw, "data", DataConfig)
    data = DataConfig(
        dataset=d.get("dataset", "str", required=True, choices=registered_names()["datasets"], custom_ok=True),
        validation_split=d.get("validation_split", "number", minimum=0.01, maximum=0.9),
        test_split=d.get("test_split", "number", minimum=0.0, maximum=0.9),
        limit=d.get("limit", "int", minimum=10),
        options=dict(d.get("options", "mapping")),
    )
    if data.validation_split + data.test_split >= 1:
        raise ConfigError(f"expected validation_split + test_split < 1 (something must be left to train on), "
                          f"got {data.validation_split:g} + {data.test_split:g}", key="data.test_split")
    return data


def _experiment_from_dict(raw: Any, source: str, needs_data: bool) -> Experiment:
    top = _Section(raw, "", ["name", "seed", "data", "model", "space", "search", "training",
                             "execution", "output"])
    _check_finite(raw, "")
    name = top.get("name", "str", required=True)
    if not re.fullmatch(r"[\w.\-]+", name) or name in (".", ".."):
        raise ConfigError(f"expected a folder name of letters, digits, '-', '_' or '.' (not '.' or '..'), "
                          f"got {name!r}", key="name")
    seed = top.get("seed", "int", 0, minimum=0)

    data = _data(raw.get("data"), needs_data)

    m = _Section(raw.get("model"), "model", ModelConfig)
    model = ModelConfig(builder=m.get("builder", "str", choices=registered_names()["builders"], custom_ok=True),
                        params=dict(m.get("params", "mapping")))

    if "space" not in raw:
        raise ConfigError("missing required key; expected a mapping of parameters", key="space")
    space = SearchSpace.from_dict(raw["space"])

    e = _Section(raw.get("execution"), "execution", ExecutionConfig)
    execution = ExecutionConfig(backend=e.get("backend", "str", choices=tuple(BACKENDS)),
                                workers=e.get("workers", "workers"),
                                scheduler=e.get("scheduler", "str"),
                                max_retries=e.get("max_retries", "int", minimum=0),
                                recycle_after=e.get("recycle_after", "int", minimum=1))
    if execution.scheduler is not None and execution.backend != "dask":
        raise ConfigError(f"a scheduler address only applies to backend 'dask', but the backend is "
                          f"{execution.backend!r}", key="execution.scheduler")

    s = _Section(raw.get("search"), "search", SearchConfig)
    objectives, constraints = _objectives(raw.get("search")), _constraints(raw.get("search"))
    objective = s.get("objective", "str")
    default_direction = metric_names.infer_direction(objective)
    if objectives:
        # The first objective is what `search.objective` names: the one `best` and the logs rank by.
        first = objectives[0]
        if s.raw.get("objective") not in (None, first["name"]):
            raise ConfigError(f"search.objective is {objective!r} but search.objectives starts with "
                              f"{first['name']!r}; give only search.objectives", key="search.objective")
        if s.raw.get("direction") not in (None, first["direction"]):
            raise ConfigError(f"search.direction is {s.raw['direction']!r} but the first objective's is "
                              f"{first['direction']!r}; give each objective its direction instead",
                              key="search.direction")
        objective, default_direction = first["name"], first["direction"]
    total_budget = s.get("total_budget", "number")
    if total_budget is not None and total_budget < s.get("max_budget", "number"):
        raise ConfigError(f"expected at least the largest budget ({s.get('max_budget', 'number'):g}), the budget "
                          f"of one full evaluation, got {total_budget:g}", key="search.total_budget")
    search = SearchConfig(
        algorithm=s.get("algorithm", "str", default_algorithm(execution.backend),
                        choices=registered_names()["algorithms"]),
        objective=objective,
        direction=s.get("direction", "str", default_direction, choices=DIRECTIONS),
        min_budget=s.get("min_budget", "number"),
        max_budget=s.get("max_budget", "number"),
        eta=s.get("eta", "number"),
        # An explicit null means no limit: stop by time_limit (or Ctrl-C) instead; a total budget
        # given without max_trials is the limit.
        max_trials=None if _explicit_null(raw.get("search"), "max_trials") or (
            total_budget is not None and "max_trials" not in s.raw) else s.get("max_trials", "int"),
        time_limit=s.get("time_limit", "number", minimum=1),
        total_budget=total_budget,
        max_consecutive_failures=s.get("max_consecutive_failures", "int", minimum=1),
        options=dict(s.get("options", "mapping")),
        initial_configs=_initial_configs((raw.get("search") or {}).get("initial_configs"), space),
        objectives=objectives,
        constraints=constraints,
    )
    try:
        check_schedule(search.min_budget, search.max_budget, search.eta, search.max_trials)
    except ConfigError as err:
        raise err.located(prefix="search") from None

    t = _Section(raw.get("training"), "training", TrainingConfig)
    training = TrainingConfig(
        compile=t.get("compile", "str", choices=COMPILE_MODES),
        device=t.get("device", "str"),
        batch_size=t.get("batch_size", "int", minimum=TRAINER_RANGES["batch_size"][0]),
        optimizer=t.get("optimizer", "str", choices=tuple(OPTIMIZERS)),
        learning_rate=t.get("learning_rate", "number", minimum=TRAINER_RANGES["learning_rate"][0]),
        steps_per_call=t.get("steps_per_call", "int", minimum=1),
        checkpoint_every=t.get("checkpoint_every", "int", minimum=0),
        checkpoint_seconds=t.get("checkpoint_seconds", "number", minimum=0),
        fuse=t.get("fuse", "fuse"),
        loss=_loss(t),
        metrics=_metrics(t),
        engine=t.get("engine", "str", choices=ENGINES),
        callbacks=_callbacks(t),
        early_stopping=_early_stopping(raw.get("training")),
        latency_batch=t.get("latency_batch", "int", minimum=1),
        keep_best_epoch=t.get("keep_best_epoch", "bool"),
    )
    if training.keep_best_epoch and len(objectives) > 1:
        raise ConfigError("keep_best_epoch scores a trial by the epoch where its one objective was best; with "
                          f"{len(objectives)} objectives no epoch is best on all of them",
                          key="training.keep_best_epoch")
    if training.early_stopping is not None:
        _check_monitor(training)
    if needs_data:      # hpo's trainer trains it (an objective of hpo.optimize reads its config itself)
        _check_space_values(space)
        _check_trainer_values(space, model.params)

    o = _Section(raw.get("output"), "output", OutputConfig)
    output = OutputConfig(dir=o.get("dir", "str"))
    if output.dir is not None and Path(output.dir).name in ("", ".", ".."):
        raise ConfigError(f"expected a named study folder, got {output.dir!r}", key="output.dir")

    return Experiment(name=name, seed=seed, data=data, model=model, space=space,
                      search=search, training=training, execution=execution, output=output,
                      source=source)


def _loss(section: _Section) -> str | dict[str, str]:
    """`training.loss`: a Keras loss identifier or reference, or a mapping {output name: loss}
    for a model with several outputs (the pre-flight checks the names against the model's)."""
    raw = section.raw.get("loss")
    if not isinstance(raw, Mapping):
        return section.get("loss", "str", choices=metric_names.LOSSES, custom_ok=True)
    if not raw:
        raise ConfigError("expected a loss, or a mapping {output name: loss} naming each output",
                          key="training.loss")
    per_output = _Section({str(k): v for k, v in raw.items()}, "training.loss", [str(k) for k in raw])
    return {str(output): per_output.get(str(output), "str", required=True, choices=metric_names.LOSSES,
                                        custom_ok=True) for output in raw}


def _metrics(section: _Section) -> tuple[str, ...] | dict[str, tuple[str, ...]]:
    """`training.metrics`: Keras metric identifiers or references, each logged under a
    distinct name that is not one the trainer logs itself; or a mapping {output name:
    [metrics]} for a model with several outputs."""
    raw = section.raw.get("metrics")
    if isinstance(raw, Mapping):
        return {str(output): _metric_list(listed, f"training.metrics.{output}") for output, listed in raw.items()}
    raw = section.get("metrics", "list")
    if isinstance(raw, tuple):
        return raw
    return _metric_list(raw, "training.metrics")


def _metric_list(raw: Any, key: str) -> tuple[str, ...]:
    if not isinstance(raw, (list, tuple)):
        raise ConfigTypeError(f"expected a list of metric names, got {raw!r}", key=key)
    seen: dict[str, str] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, str):
            raise ConfigTypeError(f"expected metric names (strings), got {item!r} at position {i}", key=key)
        if item not in metric_names.METRICS:
            if not CUSTOM_REF.match(item):
                raise ConfigError(f"unknown metric {item!r}{did_you_mean(item, metric_names.METRICS)}; expected "
                                  f"Keras metric identifiers ({one_of(metric_names.METRICS)}) or "
                                  f"'package.module:function'", key=key)
            references.resolve(item, key=key)
        name = metric_names.logged_name(item)
        if name in metric_names.RESERVED:
            raise ConfigError(f"the metric {item!r} would be logged as '{name}', a name the trainer logs itself",
                              key=key)
        if name in seen:
            raise ConfigError(f"{seen[name]!r} and {item!r} would both be logged as '{name}'; list each once",
                              key=key)
        seen[name] = item
    return tuple(raw)


def _objectives(search: Any) -> tuple[dict[str, str], ...]:
    """`search.objectives`: names (direction inferred) or {name, direction} mappings, stored
    as {name, direction}. Whether each name is logged or measured is the pre-flight's check."""
    raw = search.get("objectives") if isinstance(search, Mapping) else None
    if raw is None or raw == []:       # [] is how a study stores the default (one objective)
        return ()
    key = "search.objectives"
    if not isinstance(raw, list):
        raise ConfigTypeError(f"expected a list of names or {{name, direction}} mappings, e.g. "
                              f"[val_accuracy, {{name: params, direction: minimize}}], got {raw!r}", key=key)
    try:
        goals = Goals.build(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), key=key) from None
    return tuple(o.to_dict() for o in goals.objectives)


def _constraints(search: Any) -> tuple[str, ...]:
    """`search.constraints`: strings such as "params <= 20000", each parsed here."""
    raw = search.get("constraints") if isinstance(search, Mapping) else None
    if raw is None:
        return ()
    key = "search.constraints"
    if not isinstance(raw, list):
        raise ConfigTypeError(f"expected a list of strings such as 'params <= 20000', got {raw!r}", key=key)
    parsed = []
    for i, item in enumerate(raw):
        try:
            parsed.append(str(Constraint.parse(item)))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{exc} (at position {i})", key=key) from None
    return tuple(parsed)


def _callbacks(section: _Section) -> tuple[str, ...]:
    """`training.callbacks`: references to functions that each return a Keras callback
    (called per trial; the pre-flight checks what they return)."""
    raw = section.get("callbacks", "list")
    if isinstance(raw, tuple):
        return raw
    for i, item in enumerate(raw):
        if not isinstance(item, str) or not CUSTOM_REF.match(item):
            raise ConfigError(f"expected 'package.module:function' references to functions that return a Keras "
                              f"callback, got {item!r} at position {i}", key="training.callbacks")
        references.resolve(item, key="training.callbacks")
    return tuple(raw)


def _early_stopping(training: Any) -> EarlyStoppingConfig | None:
    raw = training.get("early_stopping") if isinstance(training, Mapping) else None
    if raw is None:
        return None
    e = _Section(raw, "training.early_stopping", EarlyStoppingConfig)
    return EarlyStoppingConfig(monitor=e.get("monitor", "str"), patience=e.get("patience", "int", minimum=0),
                               min_delta=e.get("min_delta", "number", minimum=0))


def _check_monitor(training: TrainingConfig) -> None:
    """The early-stopping monitor is a value every epoch logs: the loss or a configured metric."""
    reported = metric_names.objective_names(training.metrics)
    monitor = training.early_stopping.monitor
    if not metric_names.maybe_logged(monitor, training.metrics):
        raise ConfigError(f"expected the loss or a configured metric, on the training or validation data "
                          f"({', '.join(reported)}), got {monitor!r}{did_you_mean(monitor, reported)}",
                          key="training.early_stopping.monitor")


def _explicit_null(section: Any, key: str) -> bool:
    return isinstance(section, Mapping) and key in section and section[key] is None


def _check_finite(value: Any, key: str) -> None:
    """NaN and infinity are refused wherever they appear: no key takes them as a value."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"expected a finite number, got {value}", key=key or None)
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check_finite(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            _check_finite(v, key)


def _initial_configs(value: Any, space: SearchSpace) -> tuple[dict[str, Any], ...]:
    """`search.initial_configs`: a list of configs of the space, each checked here."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"expected a list of configs (mappings of parameter -> value), got {value!r}",
                          key="search.initial_configs")
    configs = []
    for i, config in enumerate(value):
        key = f"search.initial_configs[{i}]"
        if not isinstance(config, Mapping):
            raise ConfigError(f"expected a mapping of parameter -> value, got {config!r}", key=key)
        problem = space.why_not(dict(config))
        if problem:
            raise ConfigError(f"not a config of the space: {problem}", key=key)
        configs.append(dict(config))
    return tuple(configs)


def _check_trainer_values(space: SearchSpace, fixed: Mapping[str, Any]) -> None:
    """Catch a space or `model.params` that would give the trainer a setting out of its range
    (`registry.TRAINER_RANGES`)."""
    for name in TRAINER_RANGES:
        if name in fixed:
            _check_in_range(fixed[name], name, f"model.params.{name}")
        if name not in space.names:
            continue
        param = space[name]
        if hasattr(param, "values"):
            for value in param.values:
                _check_in_range(value, name, f"space.{name}.values")
        else:
            _check_in_range(param.low, name, f"space.{name}.low")
            _check_in_range(param.high, name, f"space.{name}.high")


def _check_in_range(value: Any, name: str, key: str) -> None:
    least, most = TRAINER_RANGES[name]
    whole = name == "batch_size"
    kinds = int if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value < least or (most is not None and value > most):
        wanted = f"{'an integer' if whole else 'a number'} >= {least}" + (f" and <= {most}" if most is not None else "")
        raise ConfigError(f"expected {wanted} (the trainer's {name}), got {value!r}", key=key)


def _check_space_values(space: SearchSpace) -> None:
    """Catch values the trainer would only reject mid-search."""
    for param in space:
        values = list(getattr(param, "values", ()))
        for i, a in enumerate(values):
            for b in values[:i]:
                # The space keeps True and 1 apart (`space.choice_key`); the trainer reads true as
                # 1, so for it they would be one setting, counted twice.
                if a == b:
                    raise ConfigError(f"expected distinct values, but {b!r} and {a!r} are one setting for the "
                                      f"trainer, which reads true as 1 and false as 0",
                                      key=f"space.{param.name}.values")
    if "optimizer" in space.names:
        param = space["optimizer"]
        for value in getattr(param, "values", ()):
            if value not in OPTIMIZERS:
                raise ConfigError(f"expected optimizers from {one_of(tuple(OPTIMIZERS))}, got {value!r}"
                                  f"{did_you_mean(value, tuple(OPTIMIZERS))}", key="space.optimizer.values")


