"""A second driver refused by the lock changes no byte of the study, with or without --fresh
and --set, and neither does a driver that takes the lock and then refuses a changed experiment.
`hpo search` runs in this process; it imports TensorFlow for its pre-flight before it reaches
the lock, so this lives beside the other refusals that follow the pre-flight."""

import hashlib
from pathlib import Path

import pytest

from hpo.cli import main
from hpo.config import load_experiment
from hpo.study.resume import prepare_study
from hpo.trial import Job, TrialResult
from tests.support.cli import hpo_here, write_experiment
from tests.support.experiments import LOCKED as EXPERIMENT
from tests.support.study_lock_holder import hold_lock


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("extra", [["--fresh"], ["--set", "search.max_trials=5"],
                                   ["--fresh", "--set", "search.max_trials=5"]],
                         ids=["fresh", "set", "fresh+set"])
def test_a_refused_second_driver_leaves_every_byte_of_the_study_as_it_was(tmp_path, capsys, extra):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT)
    study_dir = tmp_path / "study"
    experiment = load_experiment(path)
    study = prepare_study(experiment, study_dir)
    for trial_id in range(3):
        job = Job(trial_id, {"units": 8 + trial_id}, 1.0)
        study.record_ask(job)
        study.mark_running(trial_id)
        study.record_result(job, TrialResult(value=0.5, metrics={"val_accuracy": 0.5}), 1.0)
    (study_dir / "hpo.log").write_text("the first driver's log\n")
    study.close()
    holder = hold_lock(study_dir)
    try:
        before = _digests(study_dir)
        siblings = sorted(p.name for p in tmp_path.iterdir())
        code = main(["search", str(path), "--study-dir", str(study_dir), *extra])
        output = "".join(capsys.readouterr())
        assert code == 2, output
        assert f"being run by process {holder.pid}" in output and "Traceback" not in output
        assert _digests(study_dir) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == siblings, "--fresh moved something aside"
    finally:
        holder.kill()
        holder.wait()


def test_a_resume_refused_for_a_changed_experiment_adds_no_file_and_changes_no_byte(tmp_path, capsys):
    """`hpo search` holds the lock itself when it finds the stored experiment differs: it reads
    the study without SQLite's -wal and -shm, so the refusal leaves the folder as it was."""
    path = write_experiment(tmp_path, EXPERIMENT.replace("max_trials: 2", "max_trials: 1"))
    study_dir = tmp_path / "study"
    first = hpo_here(capsys, "search", path, "--study-dir", study_dir)
    assert first.returncode == 0, first.stdout + first.stderr
    before = _digests(study_dir)
    assert "study.sqlite" in before and "study.sqlite-wal" not in before and "study.sqlite-shm" not in before
    done = hpo_here(capsys, "search", path, "--study-dir", study_dir, "--set", "search.algorithm=bohb")
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "search.algorithm: 'random' -> 'bohb'" in output and "Traceback" not in output
    assert _digests(study_dir) == before
