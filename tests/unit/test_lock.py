"""The one-driver lock is an OS lock held for the driver's life, and a refused driver
changes nothing: it is refused before it creates, moves or rewrites any file."""

import multiprocessing as mp
import os
import textwrap
from pathlib import Path

import pytest

from hpo.config import load_experiment
from hpo.study import lock as study_lock
from hpo.study.lock import StudyLocked
from hpo.study.resume import prepare_study
from tests.support.experiments import LOCKED as EXPERIMENT
from tests.support.study_lock_holder import hold_lock

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 200
CONTENDERS = 8


def _contend(root: str, barrier, holders, concurrent, worst) -> None:
    for r in range(ROUNDS):
        folder = Path(root) / f"round{r}"
        folder.mkdir(exist_ok=True)
        barrier.wait()                       # all eight try at once, on a lock file none has created yet
        try:
            lock = study_lock.acquire(folder)
        except StudyLocked:
            lock = None
        if lock is not None:
            with holders.get_lock():
                holders[r] += 1
            with concurrent.get_lock():
                concurrent.value += 1
                worst.value = max(worst.value, concurrent.value)
        barrier.wait()                       # every contender has tried while the winner holds it
        if lock is not None:
            with concurrent.get_lock():
                concurrent.value -= 1
            study_lock.release(lock)


@pytest.mark.slow      # 1,600 driver processes: a statistical check, not a quick one
def test_exactly_one_of_eight_simultaneous_drivers_holds_the_lock_in_each_of_200_rounds(tmp_path):
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(CONTENDERS)
    holders = ctx.Array("i", ROUNDS)
    concurrent, worst = ctx.Value("i", 0), ctx.Value("i", 0)
    procs = [ctx.Process(target=_contend, args=(str(tmp_path), barrier, holders, concurrent, worst))
             for _ in range(CONTENDERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    assert list(holders) == [1] * ROUNDS
    assert worst.value == 1


def test_the_lock_is_released_when_its_holder_is_killed_and_names_the_holder_meanwhile(tmp_path):
    holder = hold_lock(tmp_path)
    try:
        with pytest.raises(StudyLocked, match=f"process {holder.pid}"):
            study_lock.acquire(tmp_path)
        assert study_lock.holder(tmp_path) == holder.pid
    finally:
        holder.kill()
        holder.wait()
    assert study_lock.holder(tmp_path) is None
    lock = study_lock.acquire(tmp_path)
    study_lock.release(lock)


def test_a_second_study_object_in_the_driver_shares_its_lock(tmp_path):
    first = study_lock.acquire(tmp_path)
    second = study_lock.acquire(tmp_path)
    assert second is first
    study_lock.release(second)
    assert study_lock.holder(tmp_path) == os.getpid()
    study_lock.release(first)
    assert study_lock.holder(tmp_path) is None




def test_fresh_moves_the_study_files_aside_and_keeps_the_lock_file_in_place(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT)
    study_dir = tmp_path / "study"
    experiment = load_experiment(path)
    prepare_study(experiment, study_dir).close()
    lock_inode = (study_dir / "study.lock").stat().st_ino
    study = prepare_study(experiment, study_dir, fresh=True)
    try:
        old = [p for p in tmp_path.iterdir() if p.name.startswith("study.old-")]
        assert len(old) == 1 and (old[0] / "study.sqlite").exists()
        # The lock a second driver would try is the same file, held by us all along.
        assert (study_dir / "study.lock").stat().st_ino == lock_inode
        assert study_lock.holder(study_dir) == os.getpid()
    finally:
        study.close()


def test_fresh_on_a_folder_without_a_study_moves_nothing(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(textwrap.dedent(EXPERIMENT))
    runs = tmp_path / "runs"
    (runs / "other-study").mkdir(parents=True)
    (runs / "other-study" / "study.sqlite").write_bytes(b"")
    study = prepare_study(load_experiment(path), runs, fresh=True)
    study.close()
    assert (runs / "other-study" / "study.sqlite").exists()
    assert not [p for p in tmp_path.iterdir() if ".old-" in p.name]
