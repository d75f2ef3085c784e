"""Faults delivered for real: processes killed with SIGKILL mid-trial, through the CLI.

Each test runs `hpo search` in a subprocess, watches the study from outside and strikes
when a trial is part-way through its epochs.
"""

from hpo.study import Study
from tests.support.cli import SMOKE, hpo, hpo_here, start_hpo
from tests.support.faults import kill, query, running_trial_with_epochs, wait_for, worker_processes

# Long enough that a trial struck 3 epochs in has most of its epochs still to go.
EPOCHS = 12
LONG_TRIALS = ["--set", "search.algorithm=random", "--set", f"search.min_budget={EPOCHS}",
               "--set", f"search.max_budget={EPOCHS}", "--set", "search.max_trials=4",
               "--set", "training.checkpoint_seconds=0",     # a checkpoint after every (short) epoch
               "--set", "training.compile=graph"]            # no compile-mode measurement: faults, not speed


# A killed Dask worker's trials come back lost and run again the same way: the Dask kill points
# of tests/e2e/test_random_kill.py, and a fused share restarted from its progress checkpoints in
# tests/e2e/test_dask_executor.py.
def test_a_worker_killed_mid_fused_group_loses_and_retries_only_its_group(tmp_path, capsys):
    """Two local workers each fuse two of the four trials. One worker dies mid-group: both of its
    trials come back lost and run again from the group's progress checkpoints (written after
    every epoch), training only the epochs not yet checkpointed; the other worker's two trials
    finish untouched. Every epoch of every trial is recorded once."""
    study_dir = tmp_path / "study"
    progress_at_kill = kill_a_worker_mid_trial(
        study_dir, 2, "--set", "space={learning_rate: {type: float, low: 0.001, high: 0.03, log: true}}",
        "--set", "model.params={layers: 1, units: 16}", "--set", "execution.backend=local",
        "--set", "execution.workers=2", "--set", "training.fuse=2", "--set", "execution.max_retries=1")
    trials = all_complete_with_every_epoch_once(study_dir)
    assert sorted(t.attempts for t in trials) == [1, 1, 2, 2], [(t.trial_id, t.attempts) for t in trials]
    fused = query(study_dir, "SELECT COUNT(*) FROM epochs WHERE metrics LIKE '%\"fused_trials\": 2%'")
    assert fused[0][0] >= 2 * 3                      # at least the killed group's first epochs trained fused
    # The retries trained only the epochs the killed group had not checkpointed.
    for t in trials:
        if t.attempts == 2:
            assert t.epochs_trained <= EPOCHS - progress_at_kill.get(t.trial_id, 0), (t.trial_id, t.epochs_trained)
    status = hpo_here(capsys, "status", str(study_dir))
    assert status.returncode == 0


def kill_a_worker_mid_trial(study_dir, workers_at_least: int, *args) -> dict[int, int]:
    """Run a search of 4 long trials, SIGKILL a worker once a trial is 3 epochs in, and let
    the search finish; returns each trial's last recorded epoch at the kill."""
    driver = start_hpo("search", SMOKE, "--study-dir", str(study_dir), *LONG_TRIALS, *args)
    try:
        wait_for(lambda: running_trial_with_epochs(study_dir, 3) is not None, what="a trial 3 epochs in",
                 process=driver)
        workers = worker_processes(driver.pid)
        assert len(workers) >= workers_at_least, workers
        kill(workers[0])
        progress_at_kill = dict(query(study_dir, "SELECT trial_id, MAX(epoch) FROM epochs GROUP BY trial_id"))
        _, err = driver.communicate(timeout=240)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, err[-3000:]
    return progress_at_kill


def all_complete_with_every_epoch_once(study_dir) -> list:
    """The 4 trials all complete, and every epoch of each recorded exactly once (a retried
    trial's included)."""
    trials = Study.open(study_dir).trials()
    assert len(trials) == 4 and all(t.state.value == "complete" for t in trials), \
        [(t.trial_id, t.state, t.error) for t in trials]
    for t in trials:
        epochs = [row[0] for row in query(study_dir, "SELECT epoch FROM epochs WHERE trial_id=? ORDER BY epoch",
                                          (t.trial_id,))]
        assert epochs == list(range(1, EPOCHS + 1)), (t.trial_id, epochs)
    return trials


# --- the driver killed outright ---------------------------------------------------------------

SLOW_SMOKE = ["--set", "training.batch_size=8", "--set", "search.min_budget=2", "--set", "search.max_budget=8",
              "--set", "training.compile=graph"]


def _finished(study_dir):
    return {row[0]: row[1:] for row in query(
        study_dir, "SELECT trial_id, state, value, budget, config FROM trials WHERE state IN ('complete','failed')")}


# Kills at random moments over inline, local and dask, drivers still starting included, are in
# tests/e2e/test_random_kill.py (the real driver, study and executors with a trainer of
# millisecond epochs): there a killed driver's local and Dask workers exit, and nothing
# finished is lost. This one goes through the real CLI and the Keras trainer: a trial killed
# mid-way resumes from its progress checkpoint.
def test_driver_killed_with_sigkill_mid_trial_resumes_without_losing_a_trial(tmp_path, capsys):
    study_dir = tmp_path / "study"
    args = ["search", SMOKE, "--study-dir", str(study_dir), *SLOW_SMOKE]
    driver = start_hpo(*args)
    try:
        wait_for(lambda: running_trial_with_epochs(study_dir, 2) is not None, what="a trial 2 epochs in",
                 process=driver)
        kill(driver.pid)
        driver.communicate(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    before = _finished(study_dir)
    # What resume sees as interrupted. (Rarely the kill lands between one trial's end and the
    # next one's start, and nothing is left running.)
    running_at_kill = [row[0] for row in query(study_dir, "SELECT trial_id FROM trials WHERE state='running'")]
    assert (study_dir / "study.lock").exists(), "kill -9 leaves the lock behind: resume must take it over"

    resumed = hpo_here(capsys, *args)      # the resume in this process: the kill needed one of its own
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = _finished(study_dir)
    assert all(after.get(trial_id) == row for trial_id, row in before.items()), "a finished trial changed or vanished"
    trials = Study.open(study_dir).trials()
    assert len(trials) == 8 and all(t.state.value == "complete" for t in trials), \
        [(t.trial_id, t.state.value, t.error) for t in trials]
    for trial_id in running_at_kill:
        assert trials[trial_id].attempts == 2, f"trial {trial_id} was running at the kill and did not run again"


# --- trials that fail: out of memory, a full disk --------------------------------------------

def test_out_of_memory_fails_the_trial_and_the_search_goes_on(tmp_path, capsys):
    # 2**28 units of 64 inputs is a 64 GiB kernel: TensorFlow's allocator refuses it for real,
    # after waiting 10 s for memory to be freed. Three trials: the second is the big one.
    study_dir = tmp_path / "study"
    done = hpo_here(capsys, "search", SMOKE, "--study-dir", str(study_dir), "--set", "search.algorithm=random",
               "--set", "search.max_trials=3", "--set", "space.units={type: choice, values: [16, 268435456]}")
    assert done.returncode == 0, done.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    oom = [t for t in trials if t.config["units"] == 268435456]
    assert [t.trial_id for t in oom] == [1]
    assert all(t.state.value == "failed" and "out of memory" in t.error for t in oom)
    # The search went on past the failure.
    assert [t.state.value for t in trials if t not in oom] == ["complete", "complete"]


def test_disk_full_while_checkpointing_fails_that_trial_and_keeps_the_study(tmp_path):
    from hpo.config import load_experiment
    from hpo.driver.runner import run_experiment

    study_dir = tmp_path / "study"
    (study_dir / "checkpoints").mkdir(parents=True)
    # Every write to trial 2's checkpoint lands on /dev/full: the kernel answers ENOSPC.
    (study_dir / "checkpoints" / "trial_0002.npz.tmp").symlink_to("/dev/full")
    experiment = load_experiment(SMOKE, ["search.max_trials=6"])
    summary, study = run_experiment(experiment, study_dir)
    trials = study.trials()
    assert len(trials) == 6
    full = study.trial(2)
    assert full.state.value == "failed" and "No space left on device" in full.error
    assert all(t.state.value == "complete" for t in trials if t.trial_id != 2)
    assert not (study_dir / "checkpoints" / "trial_0002.npz").exists()
    study.close()
    status = hpo("status", str(study_dir))
    assert status.returncode == 0 and "No space left" in status.stdout
