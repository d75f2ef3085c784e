"""The Keras trainer: build, (restore,) train epochs, evaluate, report, checkpoint.

It knows nothing about searchers: it receives a `TrainTask` (a config and an epoch
range) and yields one `EpochReport` per epoch, so the caller can stop it between epochs
by closing the generator.
"""

from __future__ import annotations

import collections
import json
import logging
import time
import traceback
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from hpo.config import TrainingConfig
from hpo.data import Dataset
from hpo.errors import TrialFailed, error_line
from hpo.jobs import CompileChoiceMade, EpochDone, EpochReport, Event, TrainTask, TrialDone
from hpo.metric_names import objective_names
from hpo.training.call_timing import first_call_seconds, steady_seconds
from hpo.training.callbacks import TrialControl, make_callbacks
from hpo.training.checkpoint import load_checkpoint
from hpo.training.compile_mode import (
    MIN_STEPS_TO_MEASURE,
    MODES,
    InMemoryCompileChoices,
    choice_key,
    decide,
    inferred_mode,
    provisional_mode,
)
from hpo.training.context import TrainingContext
from hpo.training.devices import device_type
from hpo.training.engines import EngineChoice, batch_hooked, choose_engine
from hpo.training.epoch_loop import train_epochs
from hpo.training.fit_engine import (
    ENGINE_KEY,
    FitTrial,
    build_fit_program,
    fit_signature,
    is_fit_signature,
    output_names,
)
from hpo.training.fresh_weights import FreshWeights
from hpo.training.kernel_cache import KernelCacheJanitor
from hpo.training.model_measures import measure_model
from hpo.training.program import TrainingProgram, architecture_signature, build_program
from hpo.training.program_cache import DEFAULT_CAPACITY, ProgramCache
from hpo.training.seeding import seed_trial
from hpo.training.single_trial import SingleTrial, resume_point
from hpo.training.training_data import check_batch_size, device_data, steps_per_epoch
from hpo.training.xla_fusion import request_multi_output_fusion, single_pass_update

log = logging.getLogger("hpo.train")

MEASURE_STEPS = 4      # training steps per timed call when `compile: auto` measures the modes


class Trainer:
    """Holds the dataset on one device and trains tasks there, one at a time, reusing the
    compiled program of each architecture (see `hpo.training.program`)."""

    def __init__(self, dataset: Dataset, builder: Callable, training: TrainingConfig,
                 fixed_params: Mapping[str, Any], device: str, *,
                 known_compile_choices: Mapping[str, tuple[str, Mapping]] | None = None,
                 cache_capacity: int = DEFAULT_CAPACITY):
        request_multi_output_fusion()     # before this process's first XLA compilation reads XLA_FLAGS
        import tensorflow as tf

        tf.get_logger().setLevel(logging.ERROR)
        # What the helpers read (the epoch loop, fresh weights, fused trials), handed to them
        # instead of the trainer. Arrays are copied to the device once per process and every trial gathers
        # batches from them; streamed splits are read a batch at a time (`training_data`).
        self.context = TrainingContext(builder=builder, device=device, data=device_data(dataset, device),
                                       training=training, input_shape=dataset.input_shape,
                                       num_classes=dataset.num_classes)
        self.fixed_params = dict(fixed_params)
        self.mode = training.compile          # 'auto' is decided per architecture
        # Decisions made here go back to the runner as events (`new_compile_choices`): the
        # runner is the study's only writer.
        self.compile_choices = InMemoryCompileChoices(known_compile_choices)
        self.programs = ProgramCache(cache_capacity, on_evict=self._forget_architecture)
        self.weights = FreshWeights(self.context, self.build_model)
        self._janitor = KernelCacheJanitor()
        # choice key -> training steps run in a provisional mode, unmeasured (see `mode_for`)
        self._unmeasured_steps: collections.Counter[str] = collections.Counter()
        self._engines: dict[str, EngineChoice] = {}     # architecture signature -> its engine
        self._hooks_batches: bool | None = None
        self._engine_of_trial: dict[int, EngineChoice] = {}   # until its TrialDone carries it to the driver
        # A model `build_model` gave that nothing has touched since: the next build of the same
        # params and seed takes it instead of building again (`keep_spare`).
        self._spare: tuple[str, int, Any] | None = None

    @property
    def builder(self) -> Callable:
        return self.context.builder

    @property
    def device(self) -> str:
        return self.context.device

    @property
    def data(self):
        return self.context.data

    @property
    def training(self) -> TrainingConfig:
        return self.context.training

    def resolve(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The trial's resolved parameters (`TrainingConfig.trial_params`)."""
        return self.training.trial_params(self.fixed_params, config)

    def build_model(self, params: Mapping[str, Any], seed: int):
        """A freshly initialised model on this trainer's device, seeded per trial."""
        import tensorflow as tf

        spare, self._spare = self._spare, None
        if spare is not None and spare[:2] == (_params_key(params), seed):
            return spare[2]
        seed_trial(seed)
        with tf.device(self.device):
            try:
                model = self.builder(params, self.context.input_shape, self.context.num_classes)
            except tf.errors.ResourceExhaustedError as exc:
                raise TrialFailed(f"out of memory on {self.device} while building the model "
                                  f"(ResourceExhaustedError: {error_line(exc)}); a smaller model may fit") from exc
            except Exception as exc:
                raise TrialFailed(f"model builder failed: {type(exc).__name__}: {exc}") from exc
        self._janitor.after_build()
        return model

    def keep_spare(self, params: Mapping[str, Any], seed: int, model) -> None:
        """Hand back a model `build_model(params, seed)` gave, untouched since (only read: its
        layers, its compiled optimizer), so that the next build of the same params and seed
        returns it: a new architecture's first trial then builds once, not once to read it,
        once to pick its engine and once for its program (a build is 0.1-0.3 s here)."""
        self._spare = (_params_key(params), seed, model)

    def fresh_weights(self, params: Mapping[str, Any], seed: int) -> list:
        """The values a fresh seeded build gives its variables (`hpo.training.fresh_weights`)."""
        return self.weights.values(params, seed)

    def _batch_hooked(self) -> bool:
        """Whether a configured callback hooks into batches (read once, from one set of them)."""
        if self._hooks_batches is None:
            self._hooks_batches = bool(batch_hooked(make_callbacks(self.training.callbacks)))
        return self._hooks_batches

    def engine_for(self, params: Mapping[str, Any], seed: int) -> EngineChoice:
        """The engine that trains this architecture (`hpo.training.engines`), decided once."""
        signature = architecture_signature(params, self.builder)
        if signature not in self._engines:
            auto = self.training.engine == "auto"
            model = self.build_model(params, seed) if auto else None
            callbacks = make_callbacks(self.training.callbacks) if auto else ()
            self._engines[signature] = choose_engine(model, self.training, callbacks, self.data.y_example,
                                                     self.data.several_inputs)
            if model is not None:
                self.keep_spare(params, seed, model)      # choosing only read it
        return self._engines[signature]

    def program_for(self, params: Mapping[str, Any], seed: int, fresh_start: bool = True,
                    steps: int | None = None, engine: str = "compiled") -> TrainingProgram:
        """The architecture's compiled program, ready for this trial when `fresh_start`:
        weights as a fresh seeded build gives them (a builder's own variables, such as
        TunableDropout rates, come with them), optimizer slots zeroed, hyperparameters
        assigned. For a continuation the caller restores the checkpoint and assigns the
        hyperparameters. `steps`: how many training steps the job will run (None: long
        enough to measure compile modes). `engine`: 'compiled', or 'fit' for a program that
        Keras's `model.fit` trains (`hpo.training.fit_engine`)."""
        signature = architecture_signature(params, self.builder)
        if engine == "fit":
            signature = fit_signature(signature)
        mode = self.mode_for(signature, params, seed, steps)
        key = (signature, self.device, mode)
        program = self.programs.get(key)
        if program is None:
            model = self.build_model(params, seed)
            self.weights.verify(signature, model, params, seed)
            program = self._compile(signature, model, params, mode)
            self.programs.put(key, program)
            return program
        if fresh_start:
            program.start_trial(self.fresh_weights(params, seed), params)
        return program

    def _forget_architecture(self, key: tuple, program: TrainingProgram) -> None:
        """An evicted program's architecture, once no cached program has it: its fresh-weights
        recipe and engine go too, so a long search's memory stays flat (`program_cache`)."""
        signature = _compiled_signature(key[0])
        if all(_compiled_signature(other[0]) != signature for other in self.programs.keys()):
            self.weights.forget(signature)
            self._engines.pop(signature, None)

    @property
    def traces(self) -> int:
        """Training-step traces of the programs in the cache (a test's window on retracing)."""
        return self.programs.traces

    def _compile(self, signature: str, model, params: Mapping[str, Any], mode: str) -> TrainingProgram:
        import tensorflow as tf

        with tf.device(self.device):
            if is_fit_signature(signature):
                # Streamed, fit reads each epoch from its `WholeStream`, not from arrays.
                arrays = (None, None) if self.data.streamed else (self.data.x_train, self.data.y_train)
                # Keras calls batch hooks once per execution: a callback that hooks batches gets
                # every batch only at one step per execution.
                steps = 1 if self._batch_hooked() else self.training.steps_per_call
                return build_fit_program(signature, model, params, *arrays, mode,
                                         single_pass_update(mode, self.device), self.training.loss,
                                         self.training.metrics, steps, y_example=self.data.y_example)
            return build_program(signature, model, params, *self.data.step_inputs(), mode,
                                 single_pass_update(mode, self.device), self.training.loss, self.training.metrics,
                                 y_example=self.data.y_example)

    def mode_for(self, signature: str, params: Mapping[str, Any], seed: int, steps: int | None) -> str:
        """The compile mode for `steps` training steps of this architecture (one job, or a fused
        group's jobs together): the configured one, or under `compile: auto` the recorded or
        inferred one, else measured here once the architecture's work so far, these steps
        included, repays a measurement (many short jobs of one architecture do too), else
        provisional."""
        if self.mode != "auto":
            return self.mode
        key = choice_key(signature, device_type(self.device))
        known = self.compile_choices.compile_choice(key)
        if known is not None:
            return known[0]
        inferred = inferred_mode(key, self.compile_choices)
        if inferred is not None:
            self.compile_choices.record_compile_choice(key, *inferred)
            return inferred[0]
        if steps is not None:
            self._unmeasured_steps[key] += steps
            if self._unmeasured_steps[key] < MIN_STEPS_TO_MEASURE:
                return provisional_mode(key, self.compile_choices)
        return self._measure_modes(key, signature, params, seed)

    def _measure_modes(self, key: str, signature: str, params: Mapping[str, Any], seed: int) -> str:
        # A few steps per timed call, not steps_per_call: XLA:CPU's convolutions can run 5-35x
        # slower than graph mode's (benchmarks/roofline.py), and each timed call of a slow mode is paid in full.
        batch = self.timing_batch(int(params["batch_size"]), seed, steps=MEASURE_STEPS,
                                  fit=is_fit_signature(signature))
        first_calls, calls, programs, failures = {}, {}, {}, {}
        for mode in MODES:
            try:
                program = self._compile(signature, self.build_model(params, seed), params, mode)
                call = self.step_call(program.train_steps, batch)
                first_calls[mode] = first_call_seconds(call)
                calls[mode], programs[mode] = call, program
            except TrialFailed:
                raise
            except Exception as exc:   # XLA cannot compile some ops; graph mode then wins by default
                failures[mode] = f"{type(exc).__name__}: {str(exc)[:200]}"
        steady = steady_seconds(calls, repeats=2)
        mode, detail = decide({m: (first_calls[m], steady[m]) for m in calls})
        if failures:
            detail["failed"] = failures
        self.compile_choices.record_compile_choice(key, mode, detail)
        log.info("compile mode for this architecture on %s: %s (%s)", self.device, mode, detail["step_call_ms"])
        # The winner's program is cached; its weights are reset before the trial trains.
        self.programs.put((signature, self.device, mode), programs[mode])
        return mode

    def step_call(self, train_steps: Callable, batch) -> Callable[[], np.ndarray]:
        """A call of a compiled `train_steps` (a program's, fused or not) on `batch`, on this
        trainer's device, that waits for its result: what the modes and group sizes are timed on."""
        import tensorflow as tf

        def call() -> np.ndarray:
            with tf.device(self.device):
                return tf.nest.flatten(train_steps(batch))[0].numpy()
        return call

    def timing_batch(self, batch_size: int, seed: int, steps: int | None = None, fit: bool = False):
        """One compiled call's input on this trainer's device (at most `steps` steps), for
        timing a training step (which examples does not matter); `fit`: for the fit engine,
        which reads streamed splits as a `WholeStream`."""
        import tensorflow as tf

        steps_per_call = min(self.training.steps_per_call, steps or self.training.steps_per_call)
        if fit and self.data.streamed:
            return self.data.timing_stream(batch_size, steps_per_call)
        with tf.device(self.device):
            return self.data.timing_batch(batch_size, steps_per_call, seed)

    def job_steps(self, task: TrainTask, batch_size: int) -> int:
        """The training steps `task` runs at `batch_size`."""
        return steps_per_epoch(self.data.train_examples, batch_size) * (task.end_epoch - task.start_epoch)

    def run_group(self, tasks: Sequence[TrainTask]) -> Iterator[Event]:
        """Train `tasks`, one after another, as events: each trial's epochs, then its end. A
        trial that fails ends with its error, and the next one trains (a failure is data
        for the study, not a crash)."""
        for task in tasks:
            for event in self.trial_events(task):
                yield from self.new_compile_choices()
                yield event

    def trial_events(self, task: TrainTask) -> Iterator[EpochDone | TrialDone]:
        trained = 0
        epochs = self.run(task)
        try:
            for report in epochs:
                trained += not report.replayed
                yield EpochDone(report)
        except Exception as exc:
            yield TrialDone(trial_id=task.trial_id, epochs_trained=trained, error=f"{type(exc).__name__}: {exc}",
                            traceback=traceback.format_exc(), **self._engine_fields(task.trial_id))
            return
        finally:
            epochs.close()
        try:
            measures = self.measure(task)
        except Exception as exc:
            yield TrialDone(trial_id=task.trial_id, epochs_trained=trained,
                            error=f"measuring the model failed: {type(exc).__name__}: {exc}",
                            traceback=traceback.format_exc(), **self._engine_fields(task.trial_id))
            return
        yield TrialDone(trial_id=task.trial_id, epochs_trained=trained, measures=measures,
                        **self._engine_fields(task.trial_id))

    def measure(self, task: TrainTask) -> dict[str, float]:
        """The model measures `task` asks for (hpo.training.model_measures), of a model built from its
        config on this trainer's device: they depend on the architecture, not on the weights."""
        if not task.measures:
            return {}
        model = self.build_model(self.resolve(task.config), task.seed)
        return measure_model(model, task.measures, self.data.first_inputs(task.latency_batch),
                             task.latency_batch, self.device)

    def _engine_fields(self, trial_id: int) -> dict[str, str]:
        """The engine that trained the trial and why, for its TrialDone (empty if none was chosen)."""
        choice = self._engine_of_trial.pop(trial_id, None)
        return {} if choice is None else {"engine": choice.engine, "engine_reason": choice.reason}

    def new_compile_choices(self) -> list[CompileChoiceMade]:
        """The compile modes decided here since the last call, for the runner to record."""
        return [CompileChoiceMade(key, mode, detail) for key, mode, detail in self.compile_choices.take_new()]

    def run(self, task: TrainTask) -> Iterator[EpochReport]:
        """Train the task's epochs, one report per epoch. Out of memory fails the trial with
        a clear message and drops its program, so the memory it held can be reused."""
        import tensorflow as tf

        try:
            yield from self._run(task)
        except tf.errors.ResourceExhaustedError as exc:
            params = self.resolve(task.config)
            signature = architecture_signature(params, self.builder)
            for mode in MODES:
                for key in (signature, fit_signature(signature)):
                    self.programs.discard((key, self.device, mode))
            raise TrialFailed(f"out of memory on {self.device} while training with batch_size "
                              f"{params.get('batch_size')} (ResourceExhaustedError: {error_line(exc)}); "
                              f"a smaller batch or model may fit") from exc

    def resolve_task(self, task: TrainTask) -> dict[str, Any]:
        """`resolve(task.config)`, where a subclass may build the task's model on the way (and
        keep it as the spare, `keep_spare`)."""
        return self.resolve(task.config)

    def _run(self, task: TrainTask) -> Iterator[EpochReport]:
        job_started = time.perf_counter()
        params = self.resolve_task(task)
        batch_size = int(params["batch_size"])
        check_batch_size(self.data, batch_size)

        resumed = resume_point(task)
        replay = resumed is not task and resumed.checkpoint_in == task.checkpoint_out
        task = resumed
        engine = self.engine_for(params, task.seed)
        self._engine_of_trial[task.trial_id] = engine
        program = self.program_for(params, task.seed, fresh_start=not task.checkpoint_in,
                                   steps=self.job_steps(task, batch_size), engine=engine.engine)
        reported = objective_names(self.training.metrics, output_names(program.model))
        if task.objective not in reported:
            raise TrialFailed(f"objective {task.objective!r} is not a metric this trainer reports {reported}")
        if task.checkpoint_in:
            restored = load_checkpoint(task.checkpoint_in, program.model, program.optimizer.optimizer)
            if restored != task.start_epoch:
                raise TrialFailed(f"checkpoint {task.checkpoint_in} ends at epoch {restored}, "
                                  f"expected {task.start_epoch}")
            # The checkpoint holds the rate the parent's last epoch trained at, which a
            # callback's schedule may have moved; the other hyperparameters' variables may hold
            # another trial's values (a reused program) and take the config's.
            program.optimizer.assign(params, learning_rate=False)
        control = TrialControl.for_job(self.training, program.model, program.optimizer.optimizer)
        if engine.engine == "fit":
            group = FitTrial(program, task, control)
        else:
            group = SingleTrial(program, task, control)
        for reports in train_epochs(self.context, group, batch_size, [replay], job_started):
            yield from reports


def _compiled_signature(signature: str) -> str:
    """`architecture_signature`'s form of a program's signature (a fit program's without its engine)."""
    if not is_fit_signature(signature):
        return signature
    structure = json.loads(signature)
    structure.pop(ENGINE_KEY)
    return json.dumps(structure, sort_keys=True, default=str)


def _params_key(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=True, default=str)


def _run_label(task: TrainTask) -> str:
    return str(task.hparams.get("trial_id", task.trial_id))
