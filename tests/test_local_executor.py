"""The local process pool: several trials at once, worker deaths survived."""

import signal

from faults import SMOKE, assert_parallel_smoke_run, hpo, query, start_hpo, wait_for, worker_processes
from hpo.executors.local import default_workers, visible_gpu_for
from hpo.study import Study


def test_one_worker_per_gpu_else_per_core():
    assert default_workers(["/device:CPU:0", "/device:GPU:0", "/device:GPU:1"], cpu_count=16) == 2
    assert default_workers(["/device:CPU:0"], cpu_count=2) == 2
    assert default_workers(["/device:CPU:0"], cpu_count=64) == 8
    assert default_workers([], cpu_count=1) == 1


def test_each_worker_sees_one_gpu_through_cuda_visible_devices():
    assert [visible_gpu_for(slot, 4, None) for slot in range(5)] == ["0", "1", "2", "3", "0"]
    # A parent already limited to some GPUs hands out exactly those.
    assert [visible_gpu_for(slot, 2, "5,7") for slot in range(3)] == ["5", "7", "5"]
    assert visible_gpu_for(0, 0, None) is None and visible_gpu_for(1, 0, "") is None


def test_two_workers_run_trials_at_the_same_time(tmp_path):
    study_dir = tmp_path / "study"
    done = hpo("search", SMOKE, "--study-dir", str(study_dir), "--set", "execution.backend=local",
               "--set", "execution.workers=2")
    assert_parallel_smoke_run(done, study_dir)


def test_a_worker_that_dies_fails_only_its_trial(tmp_path):
    study_dir = tmp_path / "study"
    done = hpo("search", SMOKE, "--study-dir", str(study_dir), "--set", "execution.backend=local",
               "--set", "execution.workers=2", "--set", "model.builder=tests.crashing_builder:build",
               "--set", "space.units.low=12", "--set", "space.units.high=14", "--set", "space.units.log=false",
               "--set", "execution.max_retries=1")
    assert done.returncode == 0, done.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    failed = [t for t in trials if t.state.value == "failed"]
    assert failed, "no config drew units=13; the test needs one"
    # A crash that repeats is retried max_retries times, then the trial fails with the reason.
    assert all(t.config["units"] == 13 and t.attempts == 2 and "worker process died with exit code 9" in t.error
               and "gave up after 2 attempts" in t.error for t in failed)
    assert any(t.state.value == "complete" for t in trials)


def test_workers_are_recycled_after_their_quota_of_trials(tmp_path):
    study_dir = tmp_path / "study"
    done = hpo("search", SMOKE, "--study-dir", str(study_dir), "--set", "execution.backend=local",
               "--set", "execution.workers=1", "--set", "execution.recycle_after=3")
    assert done.returncode == 0, done.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    assert len(trials) == 8 and all(t.state.value == "complete" for t in trials)
    # 8 trials at 3 per process: two replacements (after trials 3 and 6).
    assert (study_dir / "hpo.log").read_text().count("replacing it with a fresh process") == 2


def test_sigterm_stops_the_search_cleanly_and_it_resumes(tmp_path):
    study_dir = tmp_path / "study"
    args = ["search", SMOKE, "--study-dir", str(study_dir), "--set", "execution.backend=local",
            "--set", "execution.workers=2"]
    driver = start_hpo(*args)
    wait_for(lambda: query(study_dir, "SELECT 1 FROM trials WHERE state='complete'"), what="a finished trial",
             process=driver)
    workers = worker_processes(driver.pid)
    assert workers, "the driver has no worker processes"
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=60)
    assert driver.returncode == 130, err[-2000:]
    states = [t.state.value for t in Study.open(study_dir).trials()]
    assert "complete" in states and "running" not in states
    wait_for(lambda: not any(w.is_running() and w.status() != "zombie" for w in workers), timeout=20,
             what="the workers to exit with the driver")
    resumed = hpo(*args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    assert sum(t.state.value == "complete" for t in trials) >= 8
