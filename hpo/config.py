"""Experiment YAML -> a validated, frozen `Experiment`.

Every error names the file, the line where it can be found, the key path and what was
expected. Defaults fill everything optional so a three-line experiment is valid.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from hpo import metric_names, references
from hpo.errors import ConfigError, ConfigTypeError, UserInputError, did_you_mean, one_of
from hpo.space import SearchSpace

BACKENDS = ("inline", "local", "dask")
DIRECTIONS = ("minimize", "maximize")
OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop")
ENGINES = ("auto", "compiled", "fit")       # `training.engine` (hpo.training.engines)
CUSTOM_REF = references.REFERENCE
# An experiment is a few dozen values; aliases that expand past this are an alias bomb.
MAX_YAML_VALUES = 100_000

# Keys that may change when a study resumes: they are honoured, not ignored, and they do
# not change what a finished trial means.
RESUMABLE_CHANGES = ("search.max_trials", "search.time_limit", "search.max_consecutive_failures",
                     "training.checkpoint_every", "training.checkpoint_seconds", "training.fuse", "execution",
                     "output")


@dataclass(frozen=True)
class DataConfig:
    dataset: str
    validation_split: float = 0.1
    test_split: float = 0.1
    limit: int | None = None          # cap on training examples, for quick runs
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelConfig:
    builder: str = "mlp"
    params: Mapping[str, Any] = field(default_factory=dict)   # fixed builder arguments


@dataclass(frozen=True)
class SearchConfig:
    algorithm: str = "hyperband"
    objective: str = "val_accuracy"
    direction: str = "maximize"
    min_budget: float = 1.0
    max_budget: float = 27.0
    eta: float = 3.0
    max_trials: int | None = 50
    time_limit: float | None = None   # seconds
    max_consecutive_failures: int = 10
    options: Mapping[str, Any] = field(default_factory=dict)  # algorithm-specific settings
    initial_configs: tuple[Mapping[str, Any], ...] = ()      # run first, before any proposed config
    # Several objectives ({name, direction} each; empty: `objective` alone) and constraints
    # ("params <= 20000"); names are checked by the pre-flight (hpo.preflight).
    objectives: tuple[Mapping[str, str], ...] = ()
    constraints: tuple[str, ...] = ()

    def goals(self):
        """The objectives (`objectives`, else `objective` alone) and constraints, as the
        searchers take them (`hpo.search.objectives.Goals`)."""
        from hpo.search.objectives import Goals, Objective
        objectives = self.objectives or ({"name": self.objective, "direction": self.direction},)
        return Goals.build([Objective(o["name"], o["direction"]) for o in objectives], list(self.constraints))

    @property
    def goal_names(self) -> tuple[str, ...]:
        """Every name an objective or constraint reads."""
        goals = self.goals()
        return tuple(dict.fromkeys(goals.names + tuple(c.name for c in goals.constraints)))


FUSE_AUTO_CEILING = 32     # the most jobs `training.fuse: auto` takes in flight and fuses


@dataclass(frozen=True)
class EarlyStoppingConfig:
    """`training.early_stopping`: stop a trial once `monitor` has not improved by more than
    `min_delta` for `patience` epochs in a row (its direction as `search.direction` infers it)."""
    monitor: str = "val_loss"
    patience: int = 3
    min_delta: float = 0.0


@dataclass(frozen=True)
class TrainingConfig:
    compile: str = "auto"
    device: str = "auto"
    batch_size: int = 64              # used when the space has no batch_size
    optimizer: str = "adam"           # used when the space has no optimizer
    learning_rate: float = 1e-3       # used when the space has no learning_rate
    steps_per_call: int = 32          # training steps per compiled call (amortises dispatch)
    checkpoint_every: int = 1         # epochs between progress checkpoints (0: only at the end)
    checkpoint_seconds: float = 10.0  # ...and at least this much training between them
    fuse: int | str = 1               # trials of one architecture trained as one program (per worker), or 'auto'
    # A Keras loss identifier or 'package.module:function'; several outputs: one for all, or {output: loss}.
    loss: str | Mapping[str, str] = metric_names.DEFAULT_LOSS
    # Keras metric identifiers or references; several outputs: one list for all, or {output: [metrics]}.
    metrics: tuple[str, ...] | Mapping[str, tuple[str, ...]] = metric_names.DEFAULT_METRICS
    engine: str = "auto"              # 'compiled', 'fit' (Keras's model.fit) or 'auto' (hpo.training.engines)
    callbacks: tuple[str, ...] = ()   # 'package.module:function' references, each returning a Keras callback
    early_stopping: EarlyStoppingConfig | None = None
    latency_batch: int = 1            # batch size of the forward pass `latency_ms` times

    @property
    def class_labels(self) -> bool:
        """The loss reads the labels as class indices 0..K-1 (the default loss does; given per
        output, when every output's loss is it)."""
        losses = self.loss.values() if isinstance(self.loss, Mapping) else (self.loss,)
        return all(loss == metric_names.DEFAULT_LOSS for loss in losses)

    @property
    def jobs_per_trainer(self) -> int:
        """Jobs an executor hands each trainer at once: a fused group forms from them (`auto`
        sizes its groups later, up to `FUSE_AUTO_CEILING`)."""
        return FUSE_AUTO_CEILING if self.fuse == "auto" else max(1, int(self.fuse))


@dataclass(frozen=True)
class ExecutionConfig:
    backend: str = "inline"
    workers: int | str = "auto"
    scheduler: str | None = None      # dask: a scheduler address; None starts a LocalCluster
    max_retries: int = 2              # attempts after the first when a worker dies mid-trial
    recycle_after: int = 100          # local: trials per worker process before a fresh one


@dataclass(frozen=True)
class OutputConfig:
    dir: str | None = None            # default: runs/<name>


@dataclass(frozen=True)
class Experiment:
    name: str
    seed: int
    data: DataConfig
    model: ModelConfig
    space: SearchSpace
    search: SearchConfig
    training: TrainingConfig
    execution: ExecutionConfig
    output: OutputConfig
    source: str = "<dict>"

    @property
    def study_dir(self) -> Path:
        return Path(self.output.dir or f"runs/{self.name}")

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-able form; also what the study stores and compares on resume."""
        out: dict[str, Any] = {"name": self.name, "seed": self.seed}
        for section in ("data", "model", "search", "training", "execution", "output"):
            out[section] = _plain(dataclasses.asdict(getattr(self, section)))
        out["space"] = self.space.to_dict()
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 floats: PyYAML (YAML 1.1) reads `1e-3` as a string."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def parse_yaml(text: str) -> Any:
    """One YAML value (a `--set` value, a space read by a library caller), with the same
    checks as an experiment file: no duplicate keys, no recursive or exploding aliases."""
    return _construct(_compose(text))[0]


def _compose(text: str) -> tuple[_Loader, Any]:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except RecursionError:
        loader.dispose()
        raise ConfigError("the YAML is nested too deeply") from None
    return loader, node


def _construct(composed: tuple[_Loader, Any]) -> tuple[Any, dict[str, int]]:
    """Check the composed document, then build Python values; returns them and the line of
    every key path."""
    loader, node = composed
    try:
        if node is None:
            return None, {}
        lines: dict[str, int] = {}
        _check_node(node, "", {}, set(), lines)
        return loader.construct_document(node), lines
    except RecursionError:
        raise ConfigError("the YAML is nested too deeply") from None
    finally:
        loader.dispose()


def _check_node(node: Any, path: str, sizes: dict[int, int], visiting: set[int], lines: dict[str, int]) -> int:
    """Refuse duplicate keys, recursive aliases and alias bombs; count the values `node`
    expands to (each shared node counted once per use, computed once)."""
    ident = id(node)
    if ident in sizes:
        return sizes[ident]
    if ident in visiting:
        raise ConfigError(f"a recursive alias (an anchor used inside itself) at line {node.start_mark.line + 1}; "
                          f"expected plain values", key=path or None)
    visiting.add(ident)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            size += _check_node(child, path, sizes, visiting, lines)
            _check_size(size, node)
    elif isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                size += _check_node(value_node, path, sizes, visiting, lines)
                continue
            name = str(key_node.value)
            child = f"{path}.{name}" if path else name
            line = key_node.start_mark.line + 1
            if isinstance(key_node, yaml.ScalarNode):
                if name in seen:
                    raise ConfigError(f"duplicate key '{name}' at lines {seen[name]} and {line}; YAML would keep "
                                      f"only the last one silently, so remove one", key=child, line=line)
                seen[name] = line
            lines.setdefault(child, line)
            size += 1 + _check_node(value_node, child, sizes, visiting, lines)
            _check_size(size, node)
    visiting.discard(ident)
    sizes[ident] = size
    return size


def _check_size(size: int, node: Any) -> None:
    if size > MAX_YAML_VALUES:
        raise ConfigError(f"the YAML expands to more than {MAX_YAML_VALUES:,} values through aliases "
                          f"(from line {node.start_mark.line + 1}); expected an experiment without alias bombs")


def read_text(path: Path) -> str:
    """The file as UTF-8 text; anything else is exit 2 with the offset of the first bad byte."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise UserInputError(f"{path}, line {line}: not UTF-8 text: byte offset {exc.start} is "
                             f"0x{data[exc.start]:02x}; save the file as UTF-8") from None
    return text.removeprefix("\ufeff")


# --- loading ------------------------------------------------------------------------------

def load_experiment(path: str | Path, overrides: Sequence[str] = ()) -> Experiment:
    """Read, check and validate an experiment file. Its folder goes on sys.path after the
    working folder, so that its `module:function` hooks import as `python -m hpo` finds them."""
    path = Path(path)
    if not path.exists():
        raise UserInputError(f"{path}: experiment file not found (expected a YAML file such as "
                             f"experiments/smoke.yaml)")
    if path.is_dir():
        raise UserInputError(f"{path}: is a folder; expected an experiment YAML file")
    try:
        text = read_text(path)
    except OSError as exc:
        raise UserInputError(f"{path}: cannot read the experiment file ({exc.strerror})") from None
    try:
        raw, lines = _construct(_compose(text))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UserInputError(f"{path}{where}: YAML syntax error: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise UserInputError(f"{path}: not a readable YAML file: {exc}") from None
    except ConfigError as err:
        raise err.located(source=str(path)) from None
    references.add_search_path(path.resolve().parent)
    raw = {} if raw is None else raw
    try:
        raw = apply_overrides(raw, overrides)
        return experiment_from_dict(raw, source=str(path))
    except ConfigError as err:
        raise err.located(source=str(path), line=_line_for(err.key, lines)) from None


def apply_overrides(raw: Any, overrides: Sequence[str]) -> dict[str, Any]:
    """Apply `--set key.path=value` strings; the value is parsed as YAML (so 5, 1e-3, [a, b])."""
    if not isinstance(raw, dict):
        return raw
    raw = _deep_copy(raw)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"expected key.path=value, got {item!r}", source="--set")
        key, _, text = item.partition("=")
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"empty key in {item!r}", source="--set")
        try:
            value = parse_yaml(text)
        except yaml.YAMLError:
            value = text
        except ConfigError as err:
            raise ConfigError(f"{err.message} (in the value of {item!r})", source="--set", key=key) from None
        space = raw.get("space")
        if len(parts) > 2 and parts[0] == "space" and isinstance(space, dict) and parts[1] not in space:
            # Setting one field would create a parameter with only that field, and the error
            # would then be about its missing 'type'; a whole new one is `--set space.NAME={...}`.
            raise ConfigError(f"the space has no parameter '{parts[1]}'{did_you_mean(parts[1], space)}; "
                              f"it has {one_of(space)}", source="--set", key=key)
        node = raw
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"cannot set inside '{'.'.join(parts[:i + 1])}', which is {child!r}",
                                  source="--set", key=key)
            node = child
        node[parts[-1]] = value
    return raw


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _line_for(key: str | None, lines: Mapping[str, int]) -> int | None:
    while key:
        if key in lines:
            return lines[key]
        key = key.rpartition(".")[0]
    return None


# --- validation ---------------------------------------------------------------------------

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


def registered_names() -> dict[str, tuple[str, ...]]:
    """The names each registry offers, read from the registries themselves (imported here,
    not at the top: `hpo.data` imports this module)."""
    from hpo.data import LOADERS
    from hpo.models import BUILDERS
    from hpo.search import SEARCHERS
    from hpo.training.compile_mode import COMPILE_MODES
    return {"datasets": tuple(LOADERS), "builders": tuple(BUILDERS), "algorithms": tuple(SEARCHERS),
            "compile_modes": COMPILE_MODES}


def experiment_from_dict(raw: Any, *, source: str = "<dict>") -> Experiment:
    """Validate a plain experiment mapping; every ConfigError names `source`."""
    try:
        return _experiment_from_dict(raw, source)
    except ConfigError as err:
        raise err.located(source=source) from None


def _experiment_from_dict(raw: Any, source: str) -> Experiment:
    top = _Section(raw, "", ["name", "seed", "data", "model", "space", "search", "training",
                             "execution", "output"])
    _check_finite(raw, "")
    name = top.get("name", "str", required=True)
    if not re.fullmatch(r"[\w.\-]+", name) or name in (".", ".."):
        raise ConfigError(f"expected a folder name of letters, digits, '-', '_' or '.' (not '.' or '..'), "
                          f"got {name!r}", key="name")
    seed = top.get("seed", "int", 0, minimum=0)

    d = _Section(raw.get("data"), "data", DataConfig)
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

    m = _Section(raw.get("model"), "model", ModelConfig)
    model = ModelConfig(builder=m.get("builder", "str", choices=registered_names()["builders"], custom_ok=True),
                        params=dict(m.get("params", "mapping")))

    if "space" not in raw:
        raise ConfigError("missing required key; expected a mapping of parameters", key="space")
    space = SearchSpace.from_dict(raw["space"])

    e = _Section(raw.get("execution"), "execution", ExecutionConfig)
    execution = ExecutionConfig(backend=e.get("backend", "str", choices=BACKENDS),
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
    search = SearchConfig(
        # Several workers would idle at synchronous Hyperband's rung barriers.
        algorithm=s.get("algorithm", "str", "hyperband" if execution.backend == "inline" else "async_hyperband",
                        choices=registered_names()["algorithms"]),
        objective=objective,
        direction=s.get("direction", "str", default_direction, choices=DIRECTIONS),
        min_budget=s.get("min_budget", "number", minimum=1e-9),
        max_budget=s.get("max_budget", "number", minimum=1e-9),
        eta=s.get("eta", "number"),
        # An explicit null means no limit: stop by time_limit (or Ctrl-C) instead.
        max_trials=None if _explicit_null(raw.get("search"), "max_trials") else s.get("max_trials", "int", minimum=1),
        time_limit=s.get("time_limit", "number", minimum=1),
        max_consecutive_failures=s.get("max_consecutive_failures", "int", minimum=1),
        options=dict(s.get("options", "mapping")),
        initial_configs=_initial_configs((raw.get("search") or {}).get("initial_configs"), space),
        objectives=objectives,
        constraints=constraints,
    )
    if search.min_budget > search.max_budget:
        raise ConfigError(f"expected min_budget <= max_budget, got min_budget={search.min_budget:g} "
                          f"and max_budget={search.max_budget:g}", key="search.min_budget")
    if search.eta < 2:
        raise ConfigError(f"expected eta >= 2 (the halving rate), got {search.eta:g}", key="search.eta")

    t = _Section(raw.get("training"), "training", TrainingConfig)
    training = TrainingConfig(
        compile=t.get("compile", "str", choices=registered_names()["compile_modes"]),
        device=t.get("device", "str"),
        batch_size=t.get("batch_size", "int", minimum=1),
        optimizer=t.get("optimizer", "str", choices=OPTIMIZERS),
        learning_rate=t.get("learning_rate", "number", minimum=0),
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
    )
    if training.early_stopping is not None:
        _check_monitor(training)
    _check_space_values(space)

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
    from hpo.search.objectives import Goals
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
    from hpo.search.objectives import Constraint
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


def _check_space_values(space: SearchSpace) -> None:
    """Catch values the trainer would only reject mid-search."""
    for param in space:
        values = list(getattr(param, "values", ()))
        for i, a in enumerate(values):
            for b in values[:i]:
                # YAML types [1, 1.0, true] as three equal values: one config, counted thrice.
                if a == b:
                    raise ConfigError(f"expected distinct values, but {b!r} and {a!r} are equal once typed",
                                      key=f"space.{param.name}.values")
    if "optimizer" in space.names:
        param = space["optimizer"]
        for value in getattr(param, "values", ()):
            if value not in OPTIMIZERS:
                raise ConfigError(f"expected optimizers from {one_of(OPTIMIZERS)}, got {value!r}"
                                  f"{did_you_mean(value, OPTIMIZERS)}", key="space.optimizer.values")


def diff_experiments(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Lines like `search.eta: 3 -> 4` for every key whose value differs."""
    flat_a, flat_b = _flatten(stored), _flatten(current)
    lines = []
    for key in sorted(set(flat_a) | set(flat_b)):
        a, b = flat_a.get(key, "<absent>"), flat_b.get(key, "<absent>")
        # An empty mapping flattens to itself and a full one to its keys: `{}` against
        # nothing says no more than the lines of the keys themselves.
        empty_against_nothing = (a == {} and b == "<absent>") or (a == "<absent>" and b == {})
        if a != b and not empty_against_nothing:
            lines.append(f"{key}: {a!r} -> {b!r}")
    return lines


def binding_differences(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Differences that would change the meaning of finished trials. A key added to hpo after
    the study was made reads as its default, which is what the study's trials ran with."""
    stored = _with_added_keys(stored)
    return [line for line in diff_experiments(stored, current)
            if not any(line.startswith(prefix + ".") or line.startswith(prefix + ":")
                       for prefix in RESUMABLE_CHANGES)]


# Keys a study made before they existed lacks, with the value its trials ran with.
_ADDED_KEYS = {("training", "loss"): metric_names.DEFAULT_LOSS,
               ("training", "metrics"): list(metric_names.DEFAULT_METRICS),
               ("training", "engine"): "auto", ("training", "callbacks"): [], ("training", "early_stopping"): None,
               ("training", "latency_batch"): 1, ("search", "objectives"): [], ("search", "constraints"): []}


def _with_added_keys(stored: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(stored, Mapping):
        return stored
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in stored.items()}
    for (section, name), value in _ADDED_KEYS.items():
        if isinstance(out.get(section), dict):
            out[section].setdefault(name, value)
    return out


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}
