"""tests/e2e: the real CLI in processes of its own, worker processes, and kills. Every test
here is marked `slow` (deselect them with `-m "not slow"`), and gets TensorFlow set up in the
test process as tests/conftest.py `tf_logical_cpus` says (some run searches in-process too)."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.fspath).resolve().parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def tensorflow_with_logical_cpus(tf_logical_cpus):
    return tf_logical_cpus


@pytest.fixture(scope="session")
def smoke_study(tmp_path_factory):
    """The study test_cli_e2e.py and test_study_outputs.py read (one test process runs both:
    their xdist group SMOKE_STUDY_GROUP, tests/support/experiments.py). `hpo search` on
    experiments/smoke.yaml with SMOKE_STUDY_ARGS, in a process of its own, as a user runs it:
    TF_CPP_MIN_LOG_LEVEL unset. COLUMNS is fixed, as for every test that reads the console, so
    that a long study path is never wrapped. Returns the study folder and the finished process."""
    from tests.support.cli import SMOKE, cli_env, hpo
    from tests.support.experiments import SMOKE_STUDY_ARGS

    study = tmp_path_factory.mktemp("smoke") / "study"
    done = hpo("search", SMOKE, "--study-dir", str(study), *SMOKE_STUDY_ARGS, cwd=study.parent,
               env=cli_env(columns=200, tf_log_level=None))
    assert done.returncode == 0, done.stderr[-3000:]
    return study, done
