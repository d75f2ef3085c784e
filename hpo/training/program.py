"""One architecture's model, optimizer and compiled step, reused by every trial that shares it.

Tracing a training step costs 0.2-0.5 s on a 2-core CPU (measured for the MLP and small CNN),
ten to forty times the cost of building the Keras model. So trials whose parameters differ
only in values held by variables (the optimizer's hyperparameters, `TunableDropout` rates,
the batch size, which the step takes as a shape-polymorphic index tensor) share one traced
program. A new trial re-initialises the weights by assignment from a freshly built model
(so initialisation is exactly the builder's, under the trial's seed) and zeroes the
optimizer slots. Hyperband promotions of one config hit the same program and skip both the
trace and the build. A worker keeps a bounded number of programs (`hpo.training.program_cache`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from hpo.errors import TrialFailed
from hpo.metric_names import DEFAULT_LOSS, DEFAULT_METRICS
from hpo.registry import OPTIMIZER_PARAMS
from hpo.training.bulk_variables import BulkAssign, BulkRead
from hpo.training.compiled_step import make_evaluate, make_train_steps
from hpo.training.loss_metrics import LossAndMetrics
from hpo.training.optimizers import TunableOptimizer, structural_signature

# The trainer's own parameters: the step takes a shape-polymorphic batch, so none shape the graph.
_TRAINER_PARAMS = frozenset({"batch_size"})


def architecture_signature(params: Mapping[str, Any], builder: Callable) -> str:
    """What decides the traced graph: the builder, its structural parameters, the optimizer kind.

    A builder lists the parameters it holds in variables as `builder.tunable_params`; every
    other parameter it receives is assumed to shape the graph.
    """
    tunable = set(getattr(builder, "tunable_params", ())) | OPTIMIZER_PARAMS | _TRAINER_PARAMS
    structure = {k: params[k] for k in sorted(params) if k not in tunable}
    structure["__builder__"] = f"{getattr(builder, '__module__', '?')}.{getattr(builder, '__qualname__', builder)}"
    structure["__optimizer__"] = structural_signature(params)
    return json.dumps(structure, sort_keys=True, default=str)


@dataclass
class TrainingProgram:
    signature: str
    mode: str
    model: Any
    optimizer: TunableOptimizer
    train_steps: Callable
    evaluate: Callable
    measures: LossAndMetrics
    traces: list = field(default_factory=lambda: [0])   # bumped inside the step's Python body
    start: BulkAssign | None = None
    reader: BulkRead | None = None

    def host_state(self) -> tuple[list, list]:
        """(model.variables, optimizer variables) as NumPy arrays, in one copy from the
        device: what a checkpoint holds."""
        model_variables, optimizer_variables = self.model.variables, self.optimizer.optimizer.variables
        if self.reader is None:
            self.reader = BulkRead(list(model_variables) + list(optimizer_variables))
        values = self.reader.read()
        return values[:len(model_variables)], values[len(model_variables):]

    def start_trial(self, values, params: Mapping[str, Any]) -> None:
        """A new trial in this program: a fresh build's variable values (`model.variables`
        order), the optimizer's step count and slots zeroed, `params`' hyperparameters; in
        one call (`bulk_variables`)."""
        if self.start is None:
            # .variables, not .weights: it includes the dropout layers' seed-generator states.
            self.start = BulkAssign(list(self.model.variables) + self.optimizer.hyperparameter_variables,
                                    zeroed=self.optimizer.state)
        values = list(values)
        if len(values) != len(self.model.variables):
            raise _not_deterministic(f"{len(values)} variables against {len(self.model.variables)}")
        try:
            self.start(values + self.optimizer.hyperparameter_values(params))
        except (ValueError, TypeError) as exc:
            raise _not_deterministic(exc) from None


def _not_deterministic(detail) -> TrialFailed:
    return TrialFailed(f"the builder returned a model whose weights differ from the cached one for the "
                       f"same parameters ({detail}); is it deterministic in its parameters?")


def build_program(signature: str, model, params: Mapping[str, Any], x_train, y_train, mode: str,
                  single_pass: bool = False, loss: str = DEFAULT_LOSS,
                  metrics: Sequence[str] = DEFAULT_METRICS, y_example=None) -> TrainingProgram:
    """Compile the step functions for a model (called under the target device scope);
    `single_pass`: Adam(W) updates in one pass (`hpo.training.xla_fusion`); `loss` and
    `metrics`: Keras identifiers or references (`hpo.training.loss_metrics`). `x_train` and
    `y_train`: the device's arrays, or specs of streamed batches (`make_train_steps`), when
    `y_example` holds a few targets."""
    optimizer = TunableOptimizer(params, model.trainable_variables, single_pass)
    measures = LossAndMetrics(loss, metrics, model, y_train[:2] if y_example is None else y_example)
    traces = [0]
    train_steps = make_train_steps(model, optimizer.optimizer, x_train, y_train, mode, measures, on_trace=traces)
    evaluate = make_evaluate(model, mode, measures)
    return TrainingProgram(signature, mode, model, optimizer, train_steps, evaluate, measures, traces)
