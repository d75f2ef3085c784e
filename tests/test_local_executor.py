"""The local process pool: several trials at once, worker deaths survived."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpo.executors.local import default_workers, visible_gpu_for
from hpo.study import Study

ROOT = Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "experiments" / "smoke.yaml")


def hpo(*args, timeout=300):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "hpo", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env)


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
    assert done.returncode == 0, done.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    assert len(trials) == 8 and all(t.state.value == "complete" for t in trials)
    spans = sorted((t.started_at, t.finished_at) for t in trials)
    overlapping = sum(1 for (a, b), (c, d) in zip(spans, spans[1:]) if c < b)
    assert overlapping >= 1, spans


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
    import signal
    import time
    study_dir = tmp_path / "study"
    args = ["search", SMOKE, "--study-dir", str(study_dir), "--set", "execution.backend=local",
            "--set", "execution.workers=2"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "COLUMNS": "200"}
    driver = subprocess.Popen([sys.executable, "-m", "hpo", *args], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if (study_dir / "study.sqlite").exists() and any(
                t.state.value == "complete" for t in Study.open(study_dir).trials()):
            break
    workers = _children_of(driver.pid)
    assert workers, "the driver has no worker processes"
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=60)
    assert driver.returncode == 130, err[-2000:]
    states = [t.state.value for t in Study.open(study_dir).trials()]
    assert "complete" in states and "running" not in states
    time.sleep(2)
    assert not [pid for pid in workers if _alive(pid)], "worker processes outlived the driver"
    resumed = hpo(*args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    assert sum(t.state.value == "complete" for t in trials) >= 8


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:     # a zombie is dead too
        return stat.read().split(")")[-1].split()[0] != "Z"


def _children_of(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-eo", "pid,ppid"], capture_output=True, text=True).stdout.split("\n")[1:]
    return {int(line.split()[0]) for line in out if line.split() and int(line.split()[1]) == pid}
