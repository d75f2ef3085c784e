"""A trainer that fuses (`training.fuse`) offers the runner room for several jobs; only an
idle worker opens new work. So synchronous Hyperband asks the same jobs fused as unfused,
its promotions included, rather than opening the next brackets to fill the fused group."""

import pytest

from hpo.config import experiment_from_dict
from hpo.driver.runner import build_runner
from hpo.executors.inline import InlineExecutor
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
