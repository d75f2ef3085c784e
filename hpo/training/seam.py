"""What code built on the trainer (fused trials) may use of it: the `TrainerSeam` protocol,
which `Trainer` implements. Anything else on a trainer is its own business and may change;
`tests/unit/test_layers.py` checks that the fusion package reads nothing else.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

import numpy as np

from hpo.jobs import CompileChoiceMade, Event, TrainTask
from hpo.training.compile_mode import InMemoryCompileChoices
from hpo.training.context import TrainingContext


class TrainerSeam(Protocol):
    context: TrainingContext               # builder, device, data on it, training settings: frozen
    compile_choices: InMemoryCompileChoices

    def resolve(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A trial's config over the fixed model params over the training defaults."""

    def build_model(self, params: Mapping[str, Any], seed: int):
        """A freshly initialised model on the trainer's device, seeded per trial."""

    def fresh_weights(self, params: Mapping[str, Any], seed: int) -> list:
        """The values a fresh seeded build gives the model's variables."""

    def program_for(self, params: Mapping[str, Any], seed: int, fresh_start: bool = True,
                    steps: int | None = None, engine: str = "compiled"):
        """The architecture's compiled program (one trial's), ready for this trial when `fresh_start`."""

    def mode_for(self, signature: str, params: Mapping[str, Any], seed: int, steps: int | None) -> str:
        """The compile mode for `steps` training steps of this architecture."""

    def job_steps(self, task: TrainTask, batch_size: int) -> int:
        """The training steps `task` runs at `batch_size`."""

    def step_call(self, train_steps: Callable, batch) -> Callable[[], np.ndarray]:
        """A timed call of a compiled `train_steps` on `batch`, on the trainer's device."""

    def timing_batch(self, batch_size: int, seed: int, steps: int | None = None, fit: bool = False):
        """One compiled call's input on the trainer's device, for timing."""

    def measure(self, task: TrainTask) -> dict[str, float]:
        """The model measures `task` asks for."""

    def new_compile_choices(self) -> list[CompileChoiceMade]:
        """The compile modes decided since the last call, for the runner to record."""

    def run_group(self, tasks: Sequence[TrainTask]) -> Iterator[Event]:
        """Train `tasks` one after another, as events."""


SEAM_MEMBERS = frozenset(name for name in {**TrainerSeam.__annotations__, **vars(TrainerSeam)}
                         if not name.startswith("_"))
