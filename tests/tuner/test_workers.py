"""Parallel from Python: workers=N with a build_model defined in the script's __main__."""

import subprocess
import sys
from pathlib import Path

import pytest

from hpo.study import Study
from tests.support.cli import cli_env

SCRIPT = Path(__file__).parent / "scripts" / "workers_from_main.py"


@pytest.mark.slow
def test_a_build_model_in_main_ships_to_two_worker_processes(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=cli_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trials 6 ['COMPLETED']" in done.stdout
    study = Study.open(tmp_path / "par", read_only=True)
    assert study.experiment()["execution"] == {**study.experiment()["execution"], "backend": "local", "workers": 2}
    assert all(t.state.value == "complete" for t in study.trials())
