"""The driver loop: ask the searcher, run the job, record everything, tell the searcher.

The runner is the only place that sees both sides: it turns a searcher's `Job` into the
trainer's `TrainTask` (epochs, checkpoints, TensorBoard run) and the trainer's reports
back into a `TrialResult`. It is also the only writer of the study.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import zlib
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from hpo.config import Experiment
from hpo.errors import ConfigError
from hpo.executors import make_executor
from hpo.jobs import CompileChoiceMade, EpochDone, Executor, TrainTask, TrialDone
from hpo.metric_names import beats, maybe_logged, model_measures_in, named_outputs, objective_names
from hpo.registry import MODEL_MEASURES
from hpo.search import UnknownOption, make_searcher
from hpo.search.base import GoalsRefused, Searcher
from hpo.study import Study, TrialRow, ranking
from hpo.study.pareto import current_hypervolume
from hpo.study.resume import replay
from hpo.study.searching import open_for_search
from hpo.study.tensorboard_logs import (
    SearchBoard,
    counts_with_driver_gone,
    run_name,
    trial_counts,
    trial_hparams,
    write_hparams_config,
    write_run_scalars,
)
from hpo.termination import Terminated, stops_on_sigterm
from hpo.trial import Job, TrialResult, TrialState, config_text, trial_ids_text

log = logging.getLogger("hpo.driver.runner")


class SearchAborted(RuntimeError):
    """The search stopped itself (too many consecutive failures); `summary` is the run's, its
    `stopped_because` 'max_consecutive_failures', for a caller that returns what ran."""

    summary: "SearchSummary | None" = None


@dataclass(frozen=True)
class Progress:
    finished: int
    total: int | None
    best_value: float | None
    running: list[int]
    elapsed: float
    budget_given: float = 0.0   # what search.total_budget counts (0 where it is not set)


@dataclass(frozen=True)
class SearchSummary:
    trials_finished_now: int
    stopped_because: str
    best: TrialRow | None
    elapsed_seconds: float     # by the runner's clock: real seconds, or simulated ones in a simulation (hpo.clock)
    by_sigterm: bool = False   # stopped_because "interrupted": by SIGTERM (hpo.termination), not Ctrl-C


# How often a long replay says how far it got: at 10,000 finished trials a model-based
# searcher's replay takes tens of seconds.
REPLAY_PROGRESS_SECONDS = 10.0


def epochs_for(budget: float) -> int:
    """Budgets are floats; Keras trains whole epochs."""
    return max(1, int(round(budget)))


def epoch_span(budget: float, parent_budget: float | None) -> tuple[int, int]:
    """The epochs a job trains, first exclusive: a promotion continues after its parent's last
    (`parent_budget`; None for a new config), and trains at least one."""
    start = 0 if parent_budget is None else epochs_for(parent_budget)
    return start, max(epochs_for(budget), start + 1)


def budget_given(trials: Sequence[TrialRow], searcher: Searcher) -> float:
    """The budget the study's trials were given, each counted once as `searcher` charges it
    (`Searcher.charge`): what `search.total_budget` limits."""
    budgets = {t.trial_id: t.budget for t in trials}
    return sum(searcher.charge(t.budget, budgets.get(t.continues)) for t in trials)


class EngineLines:
    """Says in the driver's log which engine trained a trial and why (`training.engine`), once
    per distinct engine and reason, naming the first trial it applies to; every trial's own
    line goes to the debug log. The engine travels on the trial's TrialDone, so the lines
    are the same whichever backend trained it."""

    def __init__(self):
        self._said: set[tuple[str, str]] = set()

    def say(self, done: TrialDone) -> None:
        if done.engine is None:
            return
        key = (done.engine, done.engine_reason or "")
        if key not in self._said:
            self._said.add(key)
            log.info("trial %d (and others like it) trains with the %s engine: %s", done.trial_id, *key)
        log.debug("trial %d: %s engine (%s)", done.trial_id, *key)


class Runner:
    def __init__(self, experiment: Experiment, study: Study, searcher: Searcher, executor: Executor,
                 on_progress: Callable[[Progress], None] | None = None, clock: Callable[[], float] | None = None,
                 resumable: bool = True):
        self.experiment = experiment
        # Elapsed time and search.time_limit: a simulation's clock (hpo.clock), or time.monotonic.
        self.clock = clock if clock is not None else (lambda: time.monotonic())
        self.study = study
        self.searcher = searcher
        self.executor = executor
        self.on_progress = on_progress or (lambda progress: None)
        # False where the study is a scratch folder deleted after the search (`hpo.optimize`
        # without a study_dir): an interrupted trial then has no resume to rerun in.
        self.resumable = resumable
        self._jobs: dict[int, Job] = {}
        self._scored_epoch: dict[int, dict[str, float]] = {}    # trial -> the epoch that scores it
        self._curves: dict[int, dict[int, float]] = {}     # trial -> epoch -> objective, for `reads_curves`
        self._consecutive_failures = 0
        self._last_error: str | None = None
        self._queue: list[Job] = []        # asked jobs to run before asking more (resumed, retried)
        self._budget_given = 0.0           # what search.total_budget limits (counted only where it is set)
        self._end_epochs: dict[int, int] = {}     # running trial -> its last epoch
        self._finishing: set[int] = set()          # running trials whose last epoch has arrived
        self.board = None                  # a SearchBoard (TensorBoard's `search` run), when Keras trains
        self._started = self.clock()
        self._engine_lines = EngineLines()
        # Every name an objective or constraint reads; the model measures among them are taken
        # after training, and a trial that reports none of one of them failed.
        self._goal_names = experiment.search.goal_names
        self._measures = model_measures_in(self._goal_names)
        self._logged_objective = logged_objective(experiment)
        self._goals = experiment.search.goals()
        # The study's best trial (hpo.study.ranking's order, feasible first): read as the run
        # starts, then kept as trials finish, so that a search with constraints does not read
        # every trial back after each one.
        self._best: TrialRow | None = None
        # Finished trials (complete or failed) in the study: counted as the run starts, then
        # kept as results are recorded, so that the progress line does not count the study's
        # rows after every trial.
        self._finished = 0

    # --- the loop -----------------------------------------------------------------------
    def run(self) -> SearchSummary:
        started = self._started = self.clock()
        search = self.experiment.search
        finished_now = 0
        stopped, by_sigterm = "max_trials", False
        try:
            # Inside the try: a replay of thousands of results takes a while, and Ctrl-C
            # during it stops the command as it does mid-search.
            queue = self._queue = self._replay()
            self._best = ranking.best_in(self.study, self._goals)
            self._tell_total_budget()
            if search.total_budget is not None:
                self._budget_given = budget_given(self.study.trials(), self.searcher)
            if queue:
                log.info("resuming: %d interrupted trial(s) will run again: %s", len(queue),
                         trial_ids_text(j.trial_id for j in queue))
            while True:
                # Past the limit, a trial whose last epoch arrived is waited for (its TrialDone
                # follows), so that a trial which finished is recorded, not interrupted and rerun.
                over = search.time_limit is not None and self.clock() - started > search.time_limit
                # So is one whose result is already in hand (a call that returned meanwhile).
                if over and not self._finishing and not self.executor.has_event():
                    stopped = "time_limit"
                    self._interrupt_running("time limit reached")
                    break
                while not over and self.executor.free_slots() > 0:
                    job = queue.pop(0) if queue else self._ask(fill=self._workers_all_busy())
                    if job is None:
                        break
                    self._submit(job)
                if not self.executor.running():
                    if not queue and self._asked() >= (search.max_trials or math.inf):
                        stopped = "max_trials"
                    elif not queue and self._budget_spent():
                        stopped = "total_budget"
                    else:
                        stopped = "searcher finished"
                    break
                event = self.executor.next_event()
                if isinstance(event, CompileChoiceMade):
                    self.study.record_compile_choice(event.key, event.mode, event.detail)
                elif isinstance(event, EpochDone):
                    self._on_epoch(event)
                    if event.report.epoch >= self._end_epochs.get(event.report.trial_id, math.inf):
                        self._finishing.add(event.report.trial_id)
                else:
                    self._finishing.discard(event.trial_id)
                    self._end_epochs.pop(event.trial_id, None)
                    if self._on_done(event):
                        finished_now += 1
                        self._report_progress(started)
        except KeyboardInterrupt as exc:
            stopped = "interrupted"
            by_sigterm = isinstance(exc, Terminated)
            self._interrupt_running("terminated (SIGTERM)" if by_sigterm else "interrupted by the user (Ctrl-C)")
        except SearchAborted as exc:
            exc.summary = SearchSummary(trials_finished_now=finished_now, stopped_because="max_consecutive_failures",
                                        best=self._best, elapsed_seconds=self.clock() - started)
            raise
        except Exception as exc:
            # The study says what was running when the driver failed, as for Ctrl-C: those
            # trials are interrupted, and a resume runs them again.
            with contextlib.suppress(Exception):
                self._interrupt_running(f"the search stopped on {type(exc).__name__}")
            raise
        finally:
            try:
                self.executor.close()
            except KeyboardInterrupt:
                # Ctrl-C while the workers shut down (a Dask cluster takes seconds): the search
                # had already stopped, every result recorded, so it ends as it stopped.
                log.warning("interrupted while the workers shut down; the search had already stopped (%s)",
                            stopped)
            if self.board is not None:
                self.board.close()
        return SearchSummary(trials_finished_now=finished_now, stopped_because=stopped,
                             best=self._best, elapsed_seconds=self.clock() - started, by_sigterm=by_sigterm)

    def _replay(self) -> list[Job]:
        """The study's history told to the searcher again (`hpo.study.resume.replay`), said
        where there is one: a model-based searcher takes seconds over thousands of trials."""
        told = self._finished = self.study.count(TrialState.COMPLETE, TrialState.FAILED)
        if told:
            log.info("resuming: telling %s the study's %d finished trial(s) again",
                     self.experiment.search.algorithm, told)
        began = last = time.perf_counter()      # real seconds, whatever the search's clock
        said = False

        def progress(done: int) -> None:
            nonlocal last, said
            now = time.perf_counter()
            if now - last >= REPLAY_PROGRESS_SECONDS and done < told:
                last, said = now, True
                log.info("resuming: %s of %s told again (%.0fs)", f"{done:,}", f"{told:,}", now - began)
        queue = replay(self.study, self.searcher, on_tell=progress)
        if told:
            # A replay long enough to report progress says that it is done, too.
            (log.info if said else log.debug)("replayed the study in %.1fs", time.perf_counter() - began)
        return queue

    def _asked(self) -> int:
        return self.searcher.n_asked

    def _budget_spent(self) -> bool:
        return self._budget_given >= (self.experiment.search.total_budget or math.inf)

    def _workers_all_busy(self) -> bool:
        """Whether every worker already trains a job, so that a free slot is only room in a
        fused group (`training.fuse`: a trainer takes up to jobs_per_trainer at once)."""
        return self.experiment.training.jobs_per_trainer > 1 and self.executor.idle_workers() == 0

    def _ask(self, fill: bool = False) -> Job | None:
        if self._asked() >= (self.experiment.search.max_trials or math.inf) or self._budget_spent():
            return None
        job = self.searcher.ask(fill=fill)
        if job is not None:
            self.study.record_ask(job)
            # Counted only where a total limits the search: a promotion's parent is a study read.
            if self.experiment.search.total_budget is not None:
                parent_budget = None if job.continues is None else self.study.trial(job.continues).budget
                self._budget_given += self.searcher.charge(job.budget, parent_budget)
        return job

    def _tell_total_budget(self) -> None:
        """Tell a searcher that plans for one the total it plans for now: `search.total_budget`,
        or a `total_budget` in `search.options`, which wins. The replay has told it the totals
        its recorded asks were made under; a new one is recorded in the study, so that the
        next replay tells it between the same asks."""
        search = self.experiment.search
        total = search.options.get("total_budget", search.total_budget)
        if self.searcher.plans_total_budget and self.searcher.total_budget != total:
            self.study.record_total_budget(total)
            self.searcher.plan_total_budget(total)

    # --- job <-> task -------------------------------------------------------------------
    def _submit(self, job: Job) -> None:
        lineage = self._lineage(job)
        checkpoint_in = None
        parent_budget = None
        if job.continues is not None:
            parent_budget = self.study.trial(job.continues).budget
            checkpoint_in = str(self.study.checkpoint(job.continues))
        start_epoch, end_epoch = epoch_span(job.budget, parent_budget)
        hparams = trial_hparams(self.experiment.space, job.config, trial_id=run_name(lineage),
                                bracket=-1 if job.bracket is None else job.bracket)
        task = TrainTask(trial_id=job.trial_id, config=dict(job.config), start_epoch=start_epoch,
                         end_epoch=end_epoch, seed=self._trial_seed(lineage),
                         checkpoint_in=checkpoint_in, checkpoint_out=str(self.study.checkpoint(job.trial_id)),
                         tensorboard_run=str(self.study.tensorboard_dir / run_name(lineage)),
                         hparams=hparams, objective=self._logged_objective, budget=job.budget,
                         data_seed=self.experiment.seed, measures=self._measures,
                         latency_batch=self.experiment.training.latency_batch,
                         keep_best_epoch=self.experiment.training.keep_best_epoch,
                         maximize=self.experiment.search.direction == "maximize")
        self._jobs[job.trial_id] = job
        self._end_epochs[job.trial_id] = end_epoch
        self.study.mark_running(job.trial_id)
        log.debug("trial %d: epochs %d..%d of %s", job.trial_id, start_epoch + 1, end_epoch, job.config)
        self.executor.submit(task)

    def _lineage(self, job: Job) -> int:
        row = self.study.trial(job.trial_id)
        return row.lineage if row is not None else job.trial_id

    def _trial_seed(self, lineage: int) -> int:
        # One seed per configuration lineage: a promotion continues the same dropout stream.
        return zlib.crc32(f"{self.experiment.seed}:{lineage}".encode()) & 0x7FFFFFFF

    # --- events -------------------------------------------------------------------------
    def _on_epoch(self, event: EpochDone) -> None:
        report = event.report
        self.study.record_epoch(report.trial_id, report.epoch, report.metrics)
        if self._scores(report.trial_id, report.metrics):
            self._scored_epoch[report.trial_id] = dict(report.metrics)
        if self.searcher.reads_curves:
            # An attempt resumed from its own checkpoint resends its earlier epochs: keyed by
            # epoch, they overwrite. An epoch without the objective keeps its place as NaN.
            value = report.metrics.get(self.experiment.search.objective, math.nan)
            self._curves.setdefault(report.trial_id, {})[report.epoch] = float(value)

    def _scores(self, trial_id: int, metrics: Mapping[str, float]) -> bool:
        """Whether an epoch's metrics stand for its trial: every epoch replaces the one before,
        but under `training.keep_best_epoch` only one whose objective beats it."""
        held = self._scored_epoch.get(trial_id)
        if held is None or not self.experiment.training.keep_best_epoch:
            return True
        objective = self.experiment.search.objective
        return beats(metrics.get(objective), held.get(objective), self.experiment.search.direction == "maximize")

    def _on_done(self, event: TrialDone) -> bool:
        """Record a finished trial; False when it was queued for another attempt instead."""
        job = self._jobs.pop(event.trial_id)
        self._engine_lines.say(event)
        if event.lost and self._retry(job, event):
            return False
        metrics = {**self._scored_epoch.pop(event.trial_id, {}), **event.measures}    # its scored epoch's, its model's
        by_epoch = self._curves.pop(event.trial_id, {})
        objective = self.experiment.search.objective
        missing = [n for n in self._goal_names if n not in metrics]
        unusable = self._goals.unusable(metrics)
        if event.error is None and unusable is not None:
            event = TrialDone(trial_id=event.trial_id, epochs_trained=event.epochs_trained, error=unusable)
        elif event.error is None and missing:
            event = TrialDone(trial_id=event.trial_id, epochs_trained=event.epochs_trained,
                              error=f"no {missing[0]!r} was reported")
        if event.error is None and objective in metrics:
            result = TrialResult(value=float(metrics[objective]), metrics=metrics,
                                 curve=tuple(by_epoch[e] for e in sorted(by_epoch)))
            self._consecutive_failures = 0
            log.info("trial %d finished: %s=%.4f at budget %g: %s", job.trial_id, objective,
                     result.value, job.budget, config_text(job.config))
        else:
            error = event.error or f"no {objective!r} was reported"
            if event.lost:
                error = f"{error} (gave up after {self.study.trial(job.trial_id).attempts} attempts)"
            # The study keeps the traceback with the error (`hpo status --trial N`, OptimizeResult);
            # the console gets the one line, hpo.log both.
            stored = f"{error}\n{event.traceback.rstrip()}" if event.traceback else error
            result = TrialResult(value=None, state=TrialState.FAILED, metrics=metrics, error=stored)
            self._consecutive_failures += 1
            self._last_error = error
            log.warning("trial %d failed: %s", job.trial_id, error)
            if event.traceback:
                log.debug("trial %d traceback:\n%s", job.trial_id, event.traceback)
        self.study.record_result(job, result, epochs_trained=event.epochs_trained)
        self._finished += 1
        if result.ok:
            finished = [t for t in (self._best, self.study.trial(job.trial_id)) if t is not None]
            self._best = ranking.best(finished, self._goals)
        self.searcher.tell(job, result)
        if self.board is not None:
            self.board.trial_finished(event.epochs_trained, ranking.feasible_value(self._best, self._goals),
                                      self.clock() - self._started, trial_counts(self.study), self.searcher.stats())
            self._board_goals(job, result, event.epochs_trained)
        limit = self.experiment.search.max_consecutive_failures
        if self._consecutive_failures >= limit:
            self._report_progress(self._started)       # the bar counts this last failure too
            self._interrupt_running(f"the search stopped after {limit} failed trials in a row")
            raise SearchAborted(f"stopping: the last {limit} trials all failed; the last error was: "
                                f"{self._last_error}")
        return True

    def _board_goals(self, job: Job, result: TrialResult, epochs_trained: float) -> None:
        """TensorBoard for several objectives or measures: the trial's measures in its run
        (HParams metrics), and the search's hypervolume."""
        measured = {n: result.metrics[n] for n in self._measures if n in result.metrics}
        if measured and result.ok:
            run = self.study.tensorboard_dir / run_name(self._lineage(job))
            write_run_scalars(run, epochs_for(job.budget), measured)
        if self._goals.multi:
            volume = current_hypervolume(self.study.trials(), self._goals)
            if volume is not None:
                self.board.hypervolume(volume)

    def _retry(self, job: Job, event: TrialDone) -> bool:
        """Run a trial whose worker died again, up to `execution.max_retries` times; it
        picks up from its last progress checkpoint (see hpo.training.single_trial.resume_point)."""
        row = self.study.trial(job.trial_id)
        attempts = row.attempts if row is not None else 1
        if attempts > self.experiment.execution.max_retries:
            return False
        reason = f"attempt {attempts} lost: {event.error}; retrying"
        log.warning("trial %d: %s", job.trial_id, reason)
        self.study.mark_retrying(job.trial_id, reason)
        self._scored_epoch.pop(job.trial_id, None)
        self._queue.insert(0, job)
        return True

    def _interrupt_running(self, reason: str) -> None:
        for trial_id in self.executor.running():
            try:
                self.executor.cancel(trial_id)
            except Exception as exc:   # noqa: BLE001 - a lost cluster: the study is marked all the same
                log.debug("trial %d: cancelling it failed: %s: %s", trial_id, type(exc).__name__, exc)
        # The study, not the executor, says which trials are running: a signal can land after
        # mark_running and before the executor holds the task (an inline executor's first
        # submit builds its trainer), and those must not stay 'running' either.
        interrupted = [trial.trial_id for trial in self.study.trials() if trial.state == TrialState.RUNNING]
        for trial_id in interrupted:
            self.study.mark_interrupted(trial_id, reason)
        # One line, not one per trial: hundreds of workers may be stopped at once.
        if len(interrupted) == 1:
            log.warning("trial %d interrupted: %s%s", interrupted[0], reason,
                        "; it will rerun on resume" if self.resumable else "")
        elif interrupted:
            log.warning("%d trials interrupted (%s): %s%s", len(interrupted), trial_ids_text(interrupted), reason,
                        "; they will rerun on resume" if self.resumable else "")
        if self.board is not None:
            self.board.trials_counted(trial_counts(self.study))

    def _report_progress(self, started: float) -> None:
        self.on_progress(Progress(finished=self._finished, total=self.experiment.search.max_trials,
                                  best_value=self._best.value if self._best else None,
                                  running=self.executor.running(), elapsed=self.clock() - started,
                                  budget_given=self._budget_given))


def logged_objective(experiment: Experiment) -> str:
    """The objective the trainer writes as `hpo/objective`: `search.objective`, unless that is a
    model measure (taken after training), then the first goal logged per epoch, else the
    validation loss."""
    if experiment.search.objective not in MODEL_MEASURES:
        return experiment.search.objective
    metrics = experiment.training.metrics
    return next((n for n in experiment.search.goal_names if maybe_logged(n, metrics)), "val_loss")


def build_runner(experiment: Experiment, study: Study, executor: Executor,
                 clock: Callable[[], float] | None = None, resumable: bool = True) -> Runner:
    """A runner for any executor: the experiment's searcher driving `executor` (a plain
    Python objective's, a simulation's, or a test's), with no Keras-specific checks and no
    TensorBoard. `clock`: where it reads elapsed time (a simulation's `SimulatedClock`);
    `resumable`: False where the study is deleted after the search."""
    return Runner(experiment, study, searcher_for(experiment), executor, clock=clock, resumable=resumable)


def build_keras_runner(experiment: Experiment, study: Study, output_names: Sequence[str] = (),
                       make_trainer: Callable | None = None) -> Runner:
    """The runner `hpo search` and `hpo.Tuner` use: the experiment's searcher and Keras
    executor, its objective checked against what the trainer logs, and TensorBoard's HParams
    config and search run. `output_names`: the outputs of a model with several, as the
    pre-flight found them (without them, those a per-output loss or metrics names).
    `make_trainer`: what the executor's workers train with (`hpo.executors.make_executor`)."""
    search = experiment.search
    training = experiment.training
    reported = objective_names(training.metrics,
                               tuple(output_names) or named_outputs(training.loss, training.metrics))
    # A model with several outputs logs `<output>_<metric>`: the pre-flight checked the names.
    if not (maybe_logged(search.objective, experiment.training.metrics) or search.objective in MODEL_MEASURES):
        raise ConfigError(f"expected one of {', '.join(reported)}, got {search.objective!r}",
                          key="search.objective", source=experiment.source)
    searcher = searcher_for(experiment)
    if not study.tensorboard_dir.exists():
        # Every objective and measure is an HParams metric: the dashboard's scatter shows the front.
        goal_metrics = tuple(n for n in search.goal_names if n not in reported)
        write_hparams_config(study.tensorboard_dir, experiment.space, logged_objective(experiment),
                             reported + goal_metrics)
    runner = Runner(experiment, study, searcher, make_executor(experiment, study, make_trainer))
    runner.board = SearchBoard(study.tensorboard_dir, search.objective, search.direction,
                               epochs_so_far=sum(t.epochs_trained for t in study.trials() if t.state.finished))
    # Trials still 'running' as this driver takes the study were a dead driver's (it never
    # marked them): until they run again, the search run counts them interrupted.
    if study.count(TrialState.RUNNING):
        runner.board.trials_counted(counts_with_driver_gone(trial_counts(study)))
    return runner


def searcher_for(experiment: Experiment) -> Searcher:
    """The experiment's searcher; an option the algorithm does not take is a ConfigError."""
    search = experiment.search
    # A study with one objective and no constraint builds its searcher with a single objective.
    ranked = bool(search.objectives or search.constraints)
    try:
        return make_searcher(search.algorithm, experiment.space, seed=experiment.seed,
                             direction=search.direction, min_budget=search.min_budget,
                             max_budget=search.max_budget, eta=search.eta, options=search.options,
                             initial_configs=search.initial_configs,
                             objectives=search.goals().objectives if ranked else None,
                             constraints=list(search.constraints) or None)
    except GoalsRefused as exc:
        raise ConfigError(str(exc), key=f"search.{exc.argument}", source=experiment.source) from None
    except UnknownOption as exc:
        raise unknown_option_error(experiment, exc) from None
    except (TypeError, ValueError) as exc:      # a value the searcher refused
        raise ConfigError(f"{search.algorithm} refused an option's value: {exc}", key="search.options",
                          source=experiment.source) from None


def unknown_option_error(experiment: Experiment, exc: UnknownOption) -> ConfigError:
    """An option in `search.options` the searcher does not take, and those it does."""
    return ConfigError(f"an option is not accepted by {exc.algorithm}: {exc.name!r}; it takes "
                       f"{', '.join(exc.accepted)}", key="search.options", source=experiment.source)


@stops_on_sigterm
def run_experiment(experiment: Experiment, study_dir=None, *, fresh: bool = False) -> tuple[SearchSummary, Study]:
    """Create or resume the study and train it with Keras to its stop condition, holding the
    driver lock (`hpo search` without the console); returns the summary and the study, open
    and unlocked, for the caller to read and close."""
    with open_for_search(experiment, study_dir or experiment.study_dir, fresh=fresh, close=False) as study:
        return build_keras_runner(experiment, study).run(), study
