import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hpo.errors import UserInputError
from hpo.study import DB_NAME, Study
from hpo.trial import Job, TrialResult, TrialState

EXPERIMENT = {"name": "t", "search": {"objective": "val_loss"}}


def test_new_study_uses_wal_and_stores_the_experiment(tmp_path):
    study = Study.create(tmp_path / "s", EXPERIMENT)
    mode = study._db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    assert Study.open(tmp_path / "s").experiment() == EXPERIMENT


def test_trial_lifecycle_and_epochs(tmp_path):
    study = Study.create(tmp_path, EXPERIMENT)
    job = Job(trial_id=0, config={"lr": 0.1}, budget=3.0, bracket=1, rung=0)
    assert study.record_ask(job) == 0
    study.mark_running(0)
    for epoch in (1, 2, 3):
        study.record_epoch(0, epoch, {"val_loss": 1.0 / epoch, "loss": float("nan")})
    study.record_result(job, TrialResult(value=1 / 3, metrics={"val_loss": 1 / 3}), epochs_trained=3)
    row = study.trial(0)
    assert row.state == TrialState.COMPLETE and row.value == pytest.approx(1 / 3)
    assert (row.bracket, row.rung, row.epochs_trained, row.attempts) == (1, 0, 3, 1)
    epochs = study.epochs(0)
    assert [e for _, e, _ in epochs] == [1, 2, 3] and epochs[0][2]["loss"] is None
    assert [kind for kind, _, _ in study.events()] == ["ask", "tell"]


def test_promotions_share_the_lineage_of_their_first_trial(tmp_path):
    study = Study.create(tmp_path, EXPERIMENT)
    study.record_ask(Job(0, {"a": 1}, 1.0))
    study.record_ask(Job(1, {"a": 2}, 1.0))
    assert study.record_ask(Job(2, {"a": 2}, 3.0, continues=1)) == 1
    assert study.record_ask(Job(3, {"a": 2}, 9.0, continues=2)) == 1


def test_failed_trial_keeps_its_error(tmp_path):
    study = Study.create(tmp_path, EXPERIMENT)
    job = Job(0, {}, 1.0)
    study.record_ask(job)
    study.record_result(job, TrialResult(value=None, state=TrialState.FAILED, error="NaN loss"))
    assert study.trial(0).error == "NaN loss" and study.best("minimize") is None


def test_best_prefers_the_largest_budget(tmp_path):
    study = Study.create(tmp_path, EXPERIMENT)
    for trial_id, (value, budget) in enumerate([(0.1, 1.0), (0.5, 9.0), (0.3, 9.0)]):
        job = Job(trial_id, {}, budget)
        study.record_ask(job)
        study.record_result(job, TrialResult(value=value))
    assert study.best("minimize").trial_id == 2
    assert study.best("maximize").trial_id == 1


def test_interrupted_trial_is_marked(tmp_path):
    study = Study.create(tmp_path, EXPERIMENT)
    study.record_ask(Job(0, {}, 1.0))
    study.mark_running(0)
    study.mark_interrupted(0, "Ctrl-C")
    assert study.trial(0).state == TrialState.INTERRUPTED


def test_corrupted_database_is_a_clear_error_and_left_untouched(tmp_path):
    (tmp_path / DB_NAME).write_bytes(b"this is not sqlite" * 100)
    before = (tmp_path / DB_NAME).read_bytes()
    with pytest.raises(UserInputError, match="not a readable study database"):
        Study.open(tmp_path)
    assert (tmp_path / DB_NAME).read_bytes() == before


def test_missing_study_is_a_clear_error(tmp_path):
    with pytest.raises(UserInputError, match="no study here"):
        Study.open(tmp_path)


def test_second_driver_is_refused_and_a_dead_drivers_lock_is_free(tmp_path):
    study = Study.create(tmp_path, EXPERIMENT)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from hpo.study import Study; "
                               "s = Study.open(sys.argv[1]); s.acquire_driver_lock(); print('held', flush=True); "
                               "time.sleep(60)", str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UserInputError, match=f"process {holder.pid}"):
            study.acquire_driver_lock()
    finally:
        holder.kill()                                   # kill -9: the OS drops its lock
        holder.wait()
    assert (tmp_path / "study.lock").read_text().strip() == str(holder.pid)   # a pid left behind means nothing
    study.acquire_driver_lock()
    assert (tmp_path / "study.lock").read_text().strip() == str(os.getpid())
    study.release_driver_lock()
    assert (tmp_path / "study.lock").exists(), "the lock file stays: deleting it would allow two holders"


def test_writes_are_transactional(tmp_path):
    study = Study.create(tmp_path, EXPERIMENT)
    study.record_ask(Job(0, {}, 1.0))
    with pytest.raises(sqlite3.IntegrityError):
        study.record_ask(Job(0, {}, 1.0))           # duplicate id: the whole ask is rolled back
    assert [kind for kind, _, _ in study.events()] == ["ask"]
