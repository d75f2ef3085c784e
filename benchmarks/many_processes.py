"""Real worker processes at scale, with cheap trials: the local backend with 8 workers and a
Dask LocalCluster with 16, on whatever cores the machine has.

    nice -n 19 python benchmarks/many_processes.py --backend local --workers 8
    nice -n 19 python benchmarks/many_processes.py --backend dask --workers 16

The driver is hpo's own (`prepare_study`, `build_runner`, the backend's real executor), run as
a subprocess like `hpo search`; the workers train a plain-Python trainer whose epochs sleep
`--epoch-ms` (no TensorFlow), and append one line per trial they train to a log. Three checks:

1. Ctrl-C: once a third of the trials are recorded, SIGINT goes to the driver's whole process
   group (what a terminal sends). The driver must exit within 60 s, leaving no process of its
   group alive and no trial 'running' in the study.
2. Resume: the same command again runs the search to `--trials`. Every trial is then complete;
   no job that the study had recorded as finished trained again (a job interrupted at the
   Ctrl-C trains again, from its checkpoint); every job the workers finished after the resume
   is recorded.
3. Waiting on the driver: per worker, the gap between the end of one trial and the start of
   the next it is sent, against the driver's own decision time (from the executor handing back
   a finished trial to the next submit), and the two legs around that decision: from a trial's
   end on its worker to the executor handing it back, and from the driver's submit to the
   trial's start on a worker (trials submitted once the workers are up). Reported as median,
   95th percentile and maximum, with the share of the run the workers spent training: a gap
   counts only between two trials of one worker, so a worker left idle shows there.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hpo.jobs import EpochDone, EpochReport, TrialDone  # noqa: E402

SPACE = {"x": {"type": "float", "low": -2.0, "high": 2.0}, "y": {"type": "float", "low": 0.0, "high": 1.0}}


class LoggingTrainer:
    """The `Trainer` protocol without a model: each epoch sleeps, reports a loss known from
    the config, and each trial appends (pid, trial, start epoch, end epoch, began, ended)."""

    class _NoCompileChoices:
        def learn(self, key, mode, detail) -> None:
            pass

    compile_choices = _NoCompileChoices()

    def __init__(self, log_path: str, epoch_seconds: float):
        self.log_path, self.epoch_seconds = log_path, epoch_seconds

    def run_group(self, tasks):
        for task in tasks:
            began = time.time()
            for epoch in range(task.start_epoch + 1, task.end_epoch + 1):
                time.sleep(self.epoch_seconds)
                loss = (task.config["x"] - 0.5) ** 2 + task.config["y"] + 1.0 / epoch
                yield EpochDone(EpochReport(trial_id=task.trial_id, epoch=epoch, metrics={"val_loss": loss}))
            with open(self.log_path, "a") as log:
                log.write(json.dumps([os.getpid(), task.trial_id, task.start_epoch, task.end_epoch, began,
                                      time.time()]) + "\n")
            yield TrialDone(trial_id=task.trial_id, epochs_trained=task.end_epoch - task.start_epoch)


def make_logging_trainer(experiment, slot, known_compile_choices=None) -> LoggingTrainer:
    """What each worker process builds its trainer with: a module-level function (the Dask
    backend names a worker's trainer by it), configured from the environment the driver
    passes down."""
    return LoggingTrainer(os.environ["HPO_MANY_PROCESSES_LOG"], float(os.environ["HPO_MANY_PROCESSES_EPOCH"]))


class DecisionTimer:
    """The executor, timing the driver from each finished trial handed back to the next submit.
    It also writes a timeline (wall-clock time the executor handed back each trial's end, and
    time of each submit), which the workers' log joins to split a worker's wait in three."""

    def __init__(self, executor, out_path: str, timeline_path: str):
        self._executor, self._out, self._timeline = executor, out_path, timeline_path
        self._since: float | None = None

    def __getattr__(self, name):
        return getattr(self._executor, name)

    def _decided(self, what: str) -> None:
        if self._since is not None:
            with open(self._out, "a") as out:
                out.write(json.dumps([what, time.perf_counter() - self._since]) + "\n")
            self._since = None

    def _mark(self, what: str, trial_id: int) -> None:
        with open(self._timeline, "a") as out:
            out.write(json.dumps([what, trial_id, time.time()]) + "\n")

    def submit(self, task) -> None:
        self._decided("submit")
        self._mark("submit", task.trial_id)
        self._executor.submit(task)

    def next_event(self):
        self._decided("wait")
        event = self._executor.next_event()
        if isinstance(event, TrialDone):
            self._mark("done", event.trial_id)
            self._since = time.perf_counter()
        return event


def drive(backend: str, workers: int, study_dir: Path, trials: int, searcher: str, epoch_seconds: float) -> int:
    """One driver, as `hpo search` runs it (this process is killed with Ctrl-C in check 1)."""
    # A background job of a non-interactive shell starts with SIGINT ignored, and Python then
    # leaves it ignored: the Ctrl-C of check 1 would go unheard. A terminal's `hpo search` hears it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from hpo.config import experiment_from_dict
    from hpo.driver.runner import build_runner
    from hpo.study.resume import prepare_study

    experiment = experiment_from_dict({
        "name": "many-processes", "seed": 5, "data": {"dataset": "synthetic"}, "space": SPACE,
        "search": {"algorithm": searcher, "objective": "val_loss", "direction": "minimize",
                   "min_budget": 1, "max_budget": 9, "eta": 3, "max_trials": trials},
        "execution": {"backend": backend, "workers": workers},
        "output": {"dir": str(study_dir.parent)}}, source="benchmarks/many_processes.py")
    # By its module's name, not __main__'s: the workers unpickle it.
    from benchmarks.many_processes import make_logging_trainer as factory
    os.environ["HPO_MANY_PROCESSES_LOG"] = str(study_dir.parent / "trained.jsonl")
    os.environ["HPO_MANY_PROCESSES_EPOCH"] = repr(epoch_seconds)
    study = prepare_study(experiment, study_dir)
    try:
        if backend == "local":
            from hpo.executors.local import LocalProcessExecutor
            executor = LocalProcessExecutor(experiment, study_dir, workers, make_trainer=factory)
        else:
            from hpo.executors.dask_cluster import DaskExecutor
            executor = DaskExecutor(experiment, study_dir, workers, make_trainer=factory)
        timed = DecisionTimer(executor, str(study_dir.parent / "decisions.jsonl"),
                              str(study_dir.parent / "timeline.jsonl"))
        summary = build_runner(experiment, study, timed).run()
    finally:
        study.close()
    print(f"stopped: {summary.stopped_because}", flush=True)
    return 0 if summary.stopped_because in ("max_trials", "searcher finished") else 1


def rows(study_dir: Path) -> dict[int, str]:
    with sqlite3.connect(f"file:{study_dir / 'study.sqlite'}?mode=ro", uri=True) as db:
        return dict(db.execute("SELECT trial_id, state FROM trials").fetchall())


def trained(folder: Path) -> list[list]:
    path = folder / "trained.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def percentiles(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    median = statistics.median(ordered)
    return f"median {1000 * median:.1f} ms, p95 {1000 * p95:.1f} ms, max {1000 * ordered[-1]:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("local", "dask"), default="local")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--searcher", default="async_bohb")
    parser.add_argument("--epoch-ms", type=float, default=20.0)
    parser.add_argument("--drive", default=None, help=argparse.SUPPRESS)      # the driver subprocess
    args = parser.parse_args()
    if args.drive:
        sys.exit(drive(args.backend, args.workers, Path(args.drive), args.trials, args.searcher,
                       args.epoch_ms / 1000))

    folder = Path(tempfile.mkdtemp(prefix="hpo-many-processes-"))
    study_dir = folder / "study"
    command = [sys.executable, __file__, "--backend", args.backend, "--workers", str(args.workers),
               "--trials", str(args.trials), "--searcher", args.searcher, "--epoch-ms", str(args.epoch_ms),
               "--drive", str(study_dir)]
    print(f"{args.backend}, {args.workers} workers, {args.trials} trials of {args.searcher}, "
          f"epochs of {args.epoch_ms:g} ms, {os.cpu_count()} cores; folder {folder}")

    # 1. Ctrl-C once a third of the trials are recorded.
    started = time.monotonic()
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    # Its output to a file: a pipe nobody reads while it runs could fill and block it.
    driver_log = folder / "interrupted_driver.log"
    with open(driver_log, "w") as sink:
        driver = subprocess.Popen(command, start_new_session=True, stdout=sink, stderr=subprocess.STDOUT,
                                  env=environ)
    while driver.poll() is None:
        exists = (study_dir / "study.sqlite").exists()
        done = sum(1 for s in rows(study_dir).values() if s == "complete") if exists else 0
        if done >= args.trials // 3:
            break
        time.sleep(0.2)
    recorded_at_interrupt = {t for t, s in rows(study_dir).items() if s == "complete"}
    trained_at_interrupt = len(trained(folder))
    interrupted_at = time.monotonic()
    os.killpg(driver.pid, signal.SIGINT)
    try:
        driver.wait(timeout=60)
        exit_seconds = time.monotonic() - interrupted_at
    except subprocess.TimeoutExpired:
        exit_seconds = None
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    deadline = time.monotonic() + 10
    while group_alive(driver.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    lingering = group_alive(driver.pid)
    after_interrupt = rows(study_dir)
    running_left = sorted(t for t, s in after_interrupt.items() if s == "running")
    print(f"1. Ctrl-C after {interrupted_at - started:.1f} s with {len(recorded_at_interrupt)} trials recorded: "
          f"driver exit code {driver.returncode}, exited in "
          f"{'over 60' if exit_seconds is None else f'{exit_seconds:.1f}'} s; processes of its group left: "
          f"{'yes' if lingering else 'none'}; trials left 'running': {running_left or 'none'}; interrupted: "
          f"{sum(1 for s in after_interrupt.values() if s == 'interrupted')}")
    if driver.returncode != 1 or running_left or lingering:       # 1: stopped, interrupted
        print(driver_log.read_text(errors="replace")[-3000:])

    # 2. Resume to the end (the timeline of check 3 is the resumed run's).
    (folder / "timeline.jsonl").unlink(missing_ok=True)
    resumed_at = time.time()
    resumed = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ)
    final = rows(study_dir)
    runs = trained(folder)
    by_trial: dict[int, int] = {}
    for _, trial_id, *_ in runs:
        by_trial[trial_id] = by_trial.get(trial_id, 0) + 1
    again = sorted(t for t, n in by_trial.items() if n > 1)
    finished_twice = sorted(t for t in again if t in recorded_at_interrupt)
    unrecorded = sorted(t for _, t, *_ in runs[trained_at_interrupt:] if final.get(t) != "complete")
    not_complete = sorted(t for t, s in final.items() if s != "complete")
    print(f"2. resume: exit code {resumed.returncode}; {len(final)} trials in the study, not complete: "
          f"{not_complete or 'none'}; jobs trained twice: {len(again)} (of them recorded finished before the "
          f"Ctrl-C: {finished_twice or 'none'}); jobs finished after the resume but not recorded: "
          f"{unrecorded or 'none'}")
    if resumed.returncode != 0:
        print(resumed.stdout[-3000:])

    # 3. Waiting on the driver: the resumed run's trials (the interrupted run's workers may
    # have logged a few more while it stopped).
    resumed_runs = [line for line in runs[trained_at_interrupt:] if line[4] >= resumed_at]
    gaps: list[float] = []
    by_pid: dict[int, list[list]] = {}
    marks: dict[str, dict[int, float]] = {"done": {}, "submit": {}}
    timeline = folder / "timeline.jsonl"
    for what, trial_id, at in (json.loads(line) for line in
                               (timeline.read_text().splitlines() if timeline.exists() else [])):
        marks[what][trial_id] = at
    reach, start = [], []       # per trial: its end to the driver, the driver's submit to its start
    first_began = min((line[4] for line in resumed_runs), default=0.0)
    for line in resumed_runs:
        by_pid.setdefault(line[0], []).append(line)
        _, trial_id, _, _, began, ended = line
        if trial_id in marks["done"]:
            reach.append(marks["done"][trial_id] - ended)
        if marks["submit"].get(trial_id, 0.0) > first_began:      # not waiting for the workers to start
            start.append(began - marks["submit"][trial_id])
    for lines in by_pid.values():
        lines.sort(key=lambda line: line[4])
        gaps.extend(max(0.0, b[4] - a[5]) for a, b in zip(lines, lines[1:]))
    span = max(r[5] for r in resumed_runs) - min(r[4] for r in resumed_runs) if resumed_runs else 0.0
    busy = sum(r[5] - r[4] for r in resumed_runs)
    decisions_path = folder / "decisions.jsonl"
    decisions = [json.loads(line)[1] for line in decisions_path.read_text().splitlines()] \
        if decisions_path.exists() else []
    print(f"3. a worker's wait between trials: {percentiles(gaps)} ({len(gaps)} gaps over {len(by_pid)} "
          f"processes); the workers trained {100 * busy / max(1e-9, args.workers * span):.0f}% of the "
          f"{span:.1f} s from the resumed run's first trial to its last\n"
          f"   the driver's decision after a finished trial: {percentiles(decisions)}\n"
          f"   a trial's end reaches the driver (the executor hands it back): {percentiles(reach)}\n"
          f"   a trial starts on a worker after the driver submits it: {percentiles(start)}")


if __name__ == "__main__":
    main()
