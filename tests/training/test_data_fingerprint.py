"""A loader that splits its examples otherwise on another call (an unseeded shuffle): a resumed
search says so, and `hpo best --export` refuses to score on a test split the search may
have trained on. A loader that gives the same examples exports as before."""

import pytest

from hpo.study import Study
from tests.support.cli import hpo_here, write_experiment
from tests.support.experiments import DATA_TASK

pytestmark = pytest.mark.slow        # two searches and an export, with TensorFlow

EXPERIMENT = DATA_TASK + "training: {{batch_size: 16, compile: graph}}\n"


def test_a_loader_that_shuffles_without_a_seed_is_caught_on_resume_and_at_export(tmp_path, capsys):
    path = write_experiment(tmp_path, EXPERIMENT.format(loader="unseeded_shuffle"))
    study_dir = tmp_path / "study"
    assert hpo_here(capsys, "search", path, "--study-dir", study_dir).returncode == 0
    study = Study.open(study_dir, read_only=True)
    try:
        kept = study.data_fingerprint()
    finally:
        study.close()
    assert kept is not None and kept.startswith("splits-v1:") and len(kept) == len("splits-v1:") + 64
    resumed = hpo_here(capsys, "search", path, "--study-dir", study_dir, "--set", "search.max_trials=2")
    assert resumed.returncode == 0
    assert "now splits its examples otherwise than when this study started" in (study_dir / "hpo.log").read_text()
    exported = hpo_here(capsys, "best", study_dir, "--export", tmp_path / "best.keras", "--trust-code")
    assert exported.returncode == 2 and "seed its shuffles" in exported.stdout + exported.stderr
    assert not (tmp_path / "best.keras").exists()


def test_a_loader_that_gives_the_same_examples_exports_its_best(tmp_path, capsys):
    path = write_experiment(tmp_path, EXPERIMENT.format(loader="pair"))
    study_dir = tmp_path / "study"
    assert hpo_here(capsys, "search", path, "--study-dir", study_dir).returncode == 0
    exported = hpo_here(capsys, "best", study_dir, "--export", tmp_path / "best.keras", "--trust-code")
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert (tmp_path / "best.keras").exists()
