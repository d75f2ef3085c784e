"""TensorBoard output: per-trial curves and HParams rows, and the study-wide HParams config.

Layout under <study>/tensorboard/: the `search` run, which also holds the `hparams_config`
summary (a summary at the root would show as a run named `.`), and one run folder per
configuration (`trial_0007`, named after the config's first trial), which promotions keep
extending so a config's curve stays one line with step = epoch.

The HParams dashboard lists the space's parameters first, then the trial's place in the
schedule (`trial_id`, `bracket`). What changes as a configuration is promoted (the budget
reached, `hpo/budget`) is a metric: a run's hparams are those of its first trial.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from hpo.space import ChoiceParam, FloatParam, IntParam, SearchSpace

OBJECTIVE_TAG = "hpo/objective"
BUDGET_TAG = "hpo/budget"
INACTIVE = "inactive"


def run_name(lineage: int) -> str:
    return f"trial_{lineage:04d}"


def hparam_value(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str)) else str(value)


def choice_hparam(values: Sequence[Any]) -> Callable[[Any], Any]:
    """How a choice's values read in the HParams dashboard, whose discrete domain takes one
    type: as they are where they share one, as floats where ints and floats mix (`[0, 0.5]`),
    else as text (`[32, "big"]`, `[null, 8]`)."""
    kinds = {type(hparam_value(v)) for v in values}
    if len(kinds) <= 1:
        return hparam_value
    if kinds == {int, float}:
        return float
    return lambda v: str(hparam_value(v))


SEARCH_RUN = "search"          # the run with the search as a whole
TRIAL_FIELDS = ("trial_id", "bracket")   # hparams every trial row carries besides the space's
# The trial states the search run counts (`search/trials_<state>`).
COUNTED_STATES = ("running", "complete", "failed", "interrupted")


def count_tag(state: str) -> str:
    return f"search/trials_{state}"


def trial_counts(study) -> dict[str, int]:
    """Trials per state as the study stores them (`Study.count`), for the search run."""
    from hpo.trial import TrialState
    return {state: study.count(TrialState(state)) for state in COUNTED_STATES}


def counts_with_driver_gone(counts: Mapping[str, int]) -> dict[str, int]:
    """Trial counts with the running trials shown as interrupted: a driver that holds no lock
    (killed with SIGKILL, so it never marked them) runs nothing, as `hpo status` shows too."""
    shown = {state: counts.get(state, 0) for state in COUNTED_STATES}
    shown["interrupted"] += shown["running"]
    shown["running"] = 0
    return shown


def write_derived_counts(run_dir: str | Path, step: int, counts: Mapping[str, int]) -> Path:
    """One event file in `run_dir` with the trial counts at `step`, named to sort after every
    file there (TensorBoard reads a run's files in name order, and shows a step's last value)."""
    from tensorboard.summary import Writer

    run_dir = Path(run_dir)
    before = set(run_dir.glob("events.out.tfevents.*"))
    writer = Writer(str(run_dir))
    for state, n in counts.items():
        writer.add_scalar(count_tag(state), n, step)
    writer.close()
    (written,) = set(run_dir.glob("events.out.tfevents.*")) - before
    # Named after the newest file's second, plus one: a file the driver opened within the
    # same second would otherwise sort by host name and pid.
    newest = max([int(p.name.split(".")[3]) for p in before if p.name.split(".")[3].isdigit()] + [0])
    stamp = max(newest + 1, int(written.name.split(".")[3]))
    return written.rename(run_dir / f"events.out.tfevents.{stamp:010d}.hpo-derived")


def write_hparams_config(logdir: str | Path, space: SearchSpace, objective: str,
                         logged: Sequence[str] = ()) -> None:
    """The HParams experiment, in the `search` run under `logdir`: every space parameter
    with its domain, the trial's place in the schedule, and the metrics, `hpo/objective`
    first, then `logged` (the per-epoch values every trial run writes: the loss and the
    configured metrics, with their `val_` forms; TensorBoard shows each run's last)."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp
    from tensorboard.plugins.hparams import plugin_data_pb2

    hparams = []
    for p in space:
        if p.when:
            # Inactive values are logged as the string "inactive", which a numeric interval
            # would reject: a conditional parameter's domain is left for TensorBoard to infer.
            hparams.append(hp.HParam(p.name, description=f"active when {_when_text(p.when)}; "
                                                         f"'{INACTIVE}' otherwise"))
            continue
        if isinstance(p, ChoiceParam):
            as_value = choice_hparam(p.values)
            domain = hp.Discrete([as_value(v) for v in p.values])
        elif isinstance(p, IntParam):
            domain = hp.IntInterval(p.low, p.high)
        elif isinstance(p, FloatParam):
            domain = hp.RealInterval(p.low, p.high)
        else:  # pragma: no cover - every Param kind is listed above
            raise TypeError(p)
        hparams.append(hp.HParam(p.name, domain))
    hparams += [hp.HParam("trial_id", description="the configuration's TensorBoard run (its first trial)"),
                hp.HParam("bracket", hp.IntInterval(-1, 1000), description="Hyperband bracket (-1: none)")]
    metrics = [hp.Metric(OBJECTIVE_TAG, display_name=f"objective ({objective})",
                         description=f"{objective} at the end of the trial's budget; what the search ranks on"),
               hp.Metric(BUDGET_TAG, display_name="budget reached (epochs)",
                         description="epochs this configuration has been trained for, promotions included")]
    metrics += [hp.Metric(name, description=f"{name} at the run's last epoch") for name in logged]
    summary = hp.hparams_config_pb(hparams=hparams, metrics=metrics)
    # TensorBoard orders the dashboard's columns by `differs` (true first), then by name, and
    # shows only the first few checked: marking the space's parameters puts them first.
    value = summary.value[0]
    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
    for info in data.experiment.hparam_infos:
        info.differs = info.name in space.names
    value.metadata.plugin_data.content = data.SerializeToString()
    writer = tf.summary.create_file_writer(str(Path(logdir) / SEARCH_RUN))
    with writer.as_default(), tf.name_scope("hparams_config"):
        tf.summary.experimental.write_raw_pb(summary.SerializeToString(), step=0)
    writer.close()


def write_trial_hparams(writer, run: str, hparams: Mapping[str, Any]) -> None:
    from tensorboard.plugins.hparams import api as hp
    with writer.as_default():
        hp.hparams({k: hparam_value(v) for k, v in hparams.items()}, trial_id=run)


def write_scalars(writer, step: int, scalars: Mapping[str, float]) -> None:
    import tensorflow as tf
    with writer.as_default():
        for tag, value in scalars.items():
            tf.summary.scalar(tag, value, step=step)
    writer.flush()


def _when_text(when) -> str:
    return " and ".join(f"{parent} in {list(values)}" for parent, values in when.items())


def trial_hparams(space: SearchSpace, config: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """A trial's HParams row: every space parameter (inactive ones marked, not dropped,
    so the dashboard can filter on them) plus its place in the schedule (`TRIAL_FIELDS`)."""
    row = {p.name: (choice_hparam(p.values)(config[p.name]) if isinstance(p, ChoiceParam) else config[p.name])
           if p.name in config else INACTIVE for p in space}
    row.update({k: v for k, v in config.items() if k not in row})
    row.update(fields)
    return row


class SearchBoard:
    """The search as a whole, in the `search` run: best-so-far objective against epochs spent
    (step) and against seconds (`..._by_seconds`), trial counts, and the searcher's own figures
    (for BOHB, the budget its model is fitted on)."""

    def __init__(self, logdir: str | Path, objective: str, direction: str, *, epochs_so_far: float = 0.0):
        """`epochs_so_far`: where a resumed search's epoch axis picks up (its best so far comes
        with each finished trial: the runner's best, which starts from the study's)."""
        import tensorflow as tf
        self._writer = tf.summary.create_file_writer(str(Path(logdir) / SEARCH_RUN))
        self.objective, self.direction = objective, direction
        self._epochs = epochs_so_far
        self._best: float | None = None

    @property
    def step(self) -> int:
        return int(round(self._epochs))

    def trial_finished(self, epochs_trained: float, best: float | None, elapsed: float,
                       counts: Mapping[str, int], searcher_stats: Mapping[str, float]) -> None:
        """`best`: the study's best (the best trial at the largest budget reached, as `hpo best`
        reports it; it can dip when the first trial reaches a new, larger budget)."""
        import tensorflow as tf
        self._epochs += epochs_trained
        if best is not None:
            self._best = best
        step = self.step
        with self._writer.as_default():
            if self._best is not None:
                tf.summary.scalar("search/best_objective", self._best, step=step,
                                  description=f"best {self.objective} so far at the largest budget reached; "
                                              f"step = epochs trained by all trials")
                tf.summary.scalar("search/best_objective_by_seconds", self._best, step=int(elapsed),
                                  description=f"best {self.objective} so far; step = seconds since the search started")
            for state, n in counts.items():
                tf.summary.scalar(count_tag(state), n, step=step)
            for name, figure in searcher_stats.items():
                tf.summary.scalar(f"searcher/{name}", figure, step=step)
        self._writer.flush()

    def trials_counted(self, counts: Mapping[str, int]) -> None:
        """The trial counts at the current step, between two trial ends: when trials stop
        (interrupted), and when a resumed search starts with a dead driver's trials."""
        import tensorflow as tf
        with self._writer.as_default():
            for state, n in counts.items():
                tf.summary.scalar(count_tag(state), n, step=self.step)
        self._writer.flush()

    def hypervolume(self, hypervolume: float) -> None:
        """`search/hypervolume` at the epochs spent so far (the step `trial_finished` just wrote)."""
        import tensorflow as tf
        with self._writer.as_default():
            tf.summary.scalar("search/hypervolume", hypervolume, step=self.step,
                              description="dominated hypervolume of the Pareto front at the largest budget reached, "
                                          "objectives scaled between their best and worst feasible values so far; "
                                          "step = epochs trained by all trials")
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def write_run_scalars(run_dir: str | Path, step: int, scalars: Mapping[str, float]) -> None:
    """Scalars added to a run after its trial ended (the model measures), beside the trainer's
    own event file, so the HParams dashboard shows them as the run's metrics."""
    import tensorflow as tf
    writer = tf.summary.create_file_writer(str(run_dir))
    write_scalars(writer, step, scalars)
    writer.close()
