"""The TensorBoard search run shows the trials of a driver that holds no lock as interrupted,
as `hpo status` and `hpo export` do: derived when reading (`hpo tensorboard` on a study opened
read-only) and on resume, never by writing to a study that is only being looked at."""

import hashlib
import subprocess
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util.tensor_util import make_ndarray

from hpo.cli import main
from hpo.cli.tensorboard_view import logdir_to_show
from hpo.config import experiment_from_dict, load_experiment
from hpo.driver.runner import Runner, build_keras_runner
from hpo.executors.function import FunctionExecutor
from hpo.search import make_searcher
from hpo.study import Study
from hpo.study import lock as study_lock
from hpo.study.resume import prepare_study
from hpo.study.tensorboard_logs import SEARCH_RUN, SearchBoard
from hpo.trial import Job, TrialResult, TrialState
from tests.support.cli import SMOKE
from tests.support.searcher_harness import SPACE, objective


def last_counts(run_dir) -> dict[str, tuple[int, float]]:
    """What TensorBoard shows last for each `search/trials_<state>`: (step, count)."""
    events = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    events.Reload()
    out = {}
    for tag in events.Tags()["tensors"]:
        if tag.startswith("search/trials_"):
            last = events.Tensors(tag)[-1]
            out[tag.removeprefix("search/trials_")] = (last.step, float(make_ndarray(last.tensor_proto)))
    return out


def fingerprint(folder) -> dict[str, str]:
    """Every file's sha256 but SQLite's side files (-wal, -shm), which any reader may create."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*")) if not p.name.endswith(("-wal", "-shm"))}


def dead_driver_study(study_dir) -> None:
    """A study as a driver killed with SIGKILL leaves it: two trials finished, one still
    'running', and its search run's last counts saying so."""
    study = Study.create(study_dir, {"name": "killed"})
    board = SearchBoard(study.tensorboard_dir, "val_loss", "minimize")
    for trial_id in range(3):
        job = Job(trial_id=trial_id, config={"x": trial_id}, budget=3.0)
        study.record_ask(job)
        study.mark_running(trial_id)
    for trial_id in range(2):
        study.record_result(Job(trial_id=trial_id, config={"x": trial_id}, budget=3.0),
                            TrialResult(value=1.0 + trial_id), epochs_trained=3)
        board.trial_finished(3, 1.0, 1.0, {"running": 2 - trial_id, "complete": trial_id + 1, "failed": 0}, {})
    board.close()
    study.close()


def test_hpo_tensorboard_shows_a_dead_drivers_running_trials_as_interrupted(tmp_path, monkeypatch):
    study_dir = tmp_path / "study"
    dead_driver_study(study_dir)
    assert last_counts(study_dir / "tensorboard" / SEARCH_RUN)["running"] == (6, 1.0)
    before = fingerprint(study_dir)
    shown = {}

    class TensorBoard:                 # what `hpo tensorboard` starts, looking at its logdir as it runs
        def __init__(self, command):
            self.logdir = Path(command[command.index("--logdir") + 1])
            self.waits = 0

        def poll(self):
            return 0 if self.waits > 1 else None

        def wait(self, timeout=None):
            self.waits += 1
            if self.waits == 1:
                shown["logdir"] = self.logdir
                shown["counts"] = last_counts(self.logdir / SEARCH_RUN)
                shown["unchanged"] = fingerprint(study_dir) == before
                # Meanwhile the search is resumed: a new trial run, a new event file in `search`.
                (study_dir / "tensorboard" / "trial_0002").mkdir()
                (study_dir / "tensorboard" / SEARCH_RUN / "events.out.tfevents.9999999999.resumed.v2").touch()
                raise subprocess.TimeoutExpired("tensorboard", timeout)
            shown["runs"] = sorted(p.name for p in self.logdir.iterdir())
            shown["search"] = sorted(p.name for p in (self.logdir / SEARCH_RUN).iterdir())
            return 0

    monkeypatch.setattr("hpo.cli.tensorboard_command.subprocess.Popen", TensorBoard)
    monkeypatch.setattr("hpo.cli.tensorboard_command.VIEW_REFRESH_SECONDS", 0)
    assert main(["tensorboard", str(study_dir)]) == 0
    # Shown where the driver left off (6 epochs trained): one interrupted, none running.
    assert shown["counts"] == {"running": (6, 0.0), "complete": (6, 2.0), "failed": (6, 0.0),
                               "interrupted": (6, 1.0)}
    assert not str(shown["logdir"]).startswith(str(study_dir))
    assert shown["unchanged"], "looking at a study changed its files"
    # The view followed the resumed search; the derived counts still sort before its new file.
    assert shown["runs"] == ["search", "trial_0002"]
    assert shown["search"][-1] == "events.out.tfevents.9999999999.resumed.v2"
    assert any(name.endswith(".hpo-derived") for name in shown["search"])


def test_the_view_links_every_run_of_the_study(tmp_path):
    study_dir = tmp_path / "study"
    dead_driver_study(study_dir)
    (study_dir / "tensorboard" / "trial_0000").mkdir()
    study = Study.open(study_dir, read_only=True)
    view = logdir_to_show(study, tmp_path / "scratch")
    study.close()
    assert view != study_dir / "tensorboard"
    assert (view / "trial_0000").resolve() == study_dir / "tensorboard" / "trial_0000"
    written = {p.name for p in (study_dir / "tensorboard" / SEARCH_RUN).iterdir()}
    assert written < {p.name for p in (view / SEARCH_RUN).iterdir()}


def test_with_a_driver_holding_the_lock_tensorboard_reads_the_study_as_written(tmp_path):
    study_dir = tmp_path / "study"
    dead_driver_study(study_dir)
    lock = study_lock.acquire(study_dir)          # the driver is alive: its running trial runs
    try:
        study = Study.open(study_dir, read_only=True)
        assert logdir_to_show(study, tmp_path / "scratch") == study_dir / "tensorboard"
        study.close()
    finally:
        study_lock.release(lock)
    assert not (tmp_path / "scratch").exists()


def test_a_resumed_search_counts_a_dead_drivers_trials_as_interrupted(tmp_path):
    experiment = load_experiment(SMOKE)
    study = prepare_study(experiment, tmp_path / "study")
    runner = build_keras_runner(experiment, study)
    for _ in range(2):                            # as the runner writes them, then kill -9
        job = runner.searcher.ask()
        study.record_ask(job)
        study.mark_running(job.trial_id)
    runner.board.close()
    study.close()

    resumed = prepare_study(experiment, tmp_path / "study")
    runner = build_keras_runner(experiment, resumed)
    runner.board.close()
    resumed.close()
    counts = last_counts(tmp_path / "study" / "tensorboard" / SEARCH_RUN)
    assert counts == {"running": (0, 0.0), "complete": (0, 0.0), "failed": (0, 0.0), "interrupted": (0, 2.0)}
    # The database still says 'running' until the trials run again: derived, not written.
    stored = Study.open(tmp_path / "study", read_only=True)
    assert stored.count(TrialState.RUNNING) == 2
    stored.close()


def test_an_interrupted_search_counts_its_trials_interrupted_in_the_search_run(tmp_path):
    exp = experiment_from_dict({
        "name": "interrupted", "seed": 5, "data": {"dataset": "synthetic"}, "space": SPACE,
        "search": {"algorithm": "random", "objective": "objective", "direction": "minimize",
                   "min_budget": 1, "max_budget": 9, "eta": 3, "max_trials": 30},
        "output": {"dir": str(tmp_path)}})
    calls = {"n": 0}

    def ctrl_c_on_the_third_trial(config, budget):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return objective(config, budget)

    study = prepare_study(exp, exp.study_dir)
    searcher = make_searcher("random", exp.space, seed=exp.seed, direction="minimize", min_budget=1,
                             max_budget=9, eta=3)
    runner = Runner(exp, study, searcher, FunctionExecutor(ctrl_c_on_the_third_trial, "objective"))
    runner.board = SearchBoard(study.tensorboard_dir, "objective", "minimize")
    assert runner.run().stopped_because == "interrupted"
    study.close()
    counts = last_counts(exp.study_dir / "tensorboard" / SEARCH_RUN)
    step = counts["complete"][0]
    assert counts == {"running": (step, 0.0), "complete": (step, 2.0), "failed": (step, 0.0),
                      "interrupted": (step, 1.0)}


def test_stopping_hpo_tensorboard_on_a_view_stops_the_server_too(tmp_path, monkeypatch):
    """On a dead driver's study TensorBoard serves a view built outside it; Ctrl-C or a kill
    stops the command, and the server with it (it was left serving an emptied folder)."""
    import hpo.cli.tensorboard_command as command

    study_dir = tmp_path / "study"
    dead_driver_study(study_dir)
    started = []

    class Server:
        def __init__(self, args):
            self.args, self.stopped = args, None
            started.append(self)

        def wait(self, timeout=None):
            if self.stopped is None:
                raise KeyboardInterrupt         # the user stops `hpo tensorboard` meanwhile
            return self.stopped

        def poll(self):
            return self.stopped

        def terminate(self):
            self.stopped = -15

        def kill(self):
            self.stopped = -9
    monkeypatch.setattr(command.subprocess, "Popen", Server)
    assert main(["tensorboard", str(study_dir)]) == 130
    assert [server.stopped for server in started] == [-15]
