"""Faults delivered for real: processes killed with SIGKILL mid-trial, through the CLI.

Each test runs `hpo search` in a subprocess, watches the study from outside and strikes
when a trial is part-way through its epochs.
"""

import pytest

from faults import SMOKE, hpo, kill, query, running_trial_with_epochs, start_hpo, wait_for, worker_processes
from hpo.study import Study

EPOCHS = 30
LONG_TRIALS = ["--set", "search.algorithm=random", "--set", f"search.min_budget={EPOCHS}",
               "--set", f"search.max_budget={EPOCHS}", "--set", "search.max_trials=4"]


@pytest.mark.parametrize("backend", ["local", "dask"])
def test_a_worker_killed_mid_trial_is_retried_from_its_checkpoint(tmp_path, backend):
    study_dir = tmp_path / "study"
    driver = start_hpo("search", SMOKE, "--study-dir", str(study_dir), *LONG_TRIALS,
                       "--set", f"execution.backend={backend}", "--set", "execution.workers=2")
    try:
        wait_for(lambda: running_trial_with_epochs(study_dir, 3) is not None, what="a trial 3 epochs in",
                 process=driver)
        workers = worker_processes(driver.pid)
        assert len(workers) >= 2, workers
        kill(workers[0])
        progress_at_kill = dict(query(study_dir, "SELECT trial_id, MAX(epoch) FROM epochs GROUP BY trial_id"))
        out, err = driver.communicate(timeout=240)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, err[-3000:]
    trials = Study.open(study_dir).trials()
    assert len(trials) == 4 and all(t.state.value == "complete" for t in trials), \
        [(t.trial_id, t.state, t.error) for t in trials]
    retried = [t for t in trials if t.attempts == 2]
    assert len(retried) == 1 and sum(t.attempts for t in trials) == 5, [(t.trial_id, t.attempts) for t in trials]
    # Every epoch of every trial is recorded exactly once, the retried trial's included.
    for t in trials:
        epochs = [row[0] for row in query(study_dir, "SELECT epoch FROM epochs WHERE trial_id=? ORDER BY epoch",
                                          (t.trial_id,))]
        assert epochs == list(range(1, EPOCHS + 1)), (t.trial_id, epochs)
    # The retry picked up from its own progress checkpoint (written after every epoch), not
    # from epoch 0: its last attempt trained only the epochs the killed one had not finished.
    done_before = progress_at_kill.get(retried[0].trial_id, 0)
    assert retried[0].epochs_trained <= EPOCHS - done_before, (retried[0].epochs_trained, done_before)
    status = hpo("status", str(study_dir))
    assert status.returncode == 0
