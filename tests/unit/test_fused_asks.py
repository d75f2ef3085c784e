"""A trainer that fuses (`training.fuse`) offers the runner room for several jobs; only an
idle worker opens new work. So synchronous Hyperband asks the same jobs fused as unfused,
its promotions included, rather than opening the next brackets to fill the fused group."""

import pytest

from hpo.config import experiment_from_dict
from hpo.driver.runner import build_runner
from hpo.executors.inline import InlineExecutor
from hpo.jobs import TrainTask, TrialDone
from hpo.study.resume import prepare_study
from tests.support import kill_search


def asked_jobs(tmp_path, algorithm: str, fuse: int) -> list[tuple]:
    experiment = experiment_from_dict({
        "name": f"fused-{fuse}", "seed": 3, "data": {"dataset": "synthetic"}, "space": kill_search.SPACE,
        "search": {"algorithm": algorithm, "objective": "val_loss", "min_budget": 1, "max_budget": 9, "eta": 3,
                   "max_trials": 20},
        "training": {"fuse": fuse}, "output": {"dir": str(tmp_path / f"fuse{fuse}")}}, source="test")
    study = prepare_study(experiment, experiment.study_dir)
    try:
        trainer = kill_search.EpochTrainer()
        build_runner(experiment, study, InlineExecutor(lambda: trainer, slots=fuse)).run()
        return [(t.config["x"], t.budget, t.continues) for t in study.trials()]
    finally:
        study.close()


@pytest.mark.parametrize("algorithm", ["hyperband", "bohb"])
def test_a_fused_trainer_gets_the_jobs_an_unfused_one_gets(tmp_path, monkeypatch, algorithm):
    monkeypatch.setattr(kill_search.EpochTrainer, "epoch_seconds", 0.0)
    unfused = asked_jobs(tmp_path, algorithm, fuse=1)
    fused = asked_jobs(tmp_path, algorithm, fuse=4)
    assert sum(c is not None for _, _, c in unfused) >= 4            # promotions, within the 20 jobs
    if algorithm == "hyperband":       # configs drawn uniformly: the very same jobs
        assert fused == unfused
    else:                              # the model proposes from what it has seen: the same schedule
        assert [(b, c is None) for _, b, c in fused] == [(b, c is None) for _, b, c in unfused]


class TwoFusingWorkers:
    """Two workers of four fused slots each, jobs placed on the least-loaded one; a worker's
    jobs train side by side, each ending `budget` time units after it started (no processes)."""

    def __init__(self):
        self.now = 0.0
        self.jobs: dict[int, tuple[int, float, TrainTask]] = {}     # trial -> (worker, end, task)
        self.capacity = 4

    def load(self, worker: int) -> int:
        return sum(w == worker for w, _, _ in self.jobs.values())

    def free_slots(self):
        return 2 * self.capacity - len(self.jobs)

    def idle_workers(self):
        return sum(self.load(w) == 0 for w in (0, 1))

    def running(self):
        return list(self.jobs)

    def has_event(self):
        return False

    def submit(self, task):
        worker = min((0, 1), key=self.load)
        self.jobs[task.trial_id] = (worker, self.now + (task.end_epoch - task.start_epoch), task)

    def next_event(self):
        trial_id = min(self.jobs, key=lambda t: (self.jobs[t][1], t))
        _, self.now, task = self.jobs.pop(trial_id)
        return TrialDone(trial_id=trial_id, epochs_trained=task.end_epoch - task.start_epoch,
                         measures={"val_loss": kill_search.loss(task.config, task.end_epoch)})

    def cancel(self, trial_id):
        self.jobs.pop(trial_id, None)

    def close(self):
        pass


@pytest.mark.parametrize("algorithm", ["hyperband", "bohb"])
def test_a_worker_left_idle_gets_new_work_while_the_other_fills_its_fused_group(tmp_path, algorithm):
    """A fill ask (every worker busy) never comes while a worker is idle, however the jobs
    are spread: with two workers of four slots, one may hold several jobs and the other none."""
    experiment = experiment_from_dict({
        "name": "two", "seed": 3, "data": {"dataset": "synthetic"}, "space": kill_search.SPACE,
        "search": {"algorithm": algorithm, "objective": "val_loss", "min_budget": 1, "max_budget": 9, "eta": 3,
                   "max_trials": 40},
        "training": {"fuse": 4}, "output": {"dir": str(tmp_path / "study")}}, source="test")
    executor = TwoFusingWorkers()
    study = prepare_study(experiment, experiment.study_dir)
    try:
        runner = build_runner(experiment, study, executor)
        asks = []
        ask = runner.searcher.ask

        def recorded(fill=False):
            asks.append((fill, executor.idle_workers()))
            return ask(fill=fill)
        runner.searcher.ask = recorded
        runner.run()
    finally:
        study.close()
    assert any(fill for fill, _ in asks) and any(not fill for fill, _ in asks)
    assert not [idle for fill, idle in asks if fill and idle], "a fill ask while a worker was idle"
