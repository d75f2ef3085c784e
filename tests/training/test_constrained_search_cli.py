"""One objective with a constraint through `hpo search` (in-process): the closing line, the
table after the search, `hpo best` and `hpo status --top` all rank a trial that breaks the
constraint after every feasible one (hpo.study.ranking).

The objective is the model's own size, maximised under `params <= PARAMS_BOUND`: the biggest
model that fits. Its value does not depend on training, so the best unconstrained trial (the
biggest model) is known to break the constraint."""

import json
import re

import pytest

from hpo.study import Study
from hpo.trial import TrialState
from tests.support.cli import hpo_here, write_experiment
from tests.support.experiments import PARAMS_BOUND

pytestmark = pytest.mark.slow        # a search of 5 trials through the CLI, with TensorFlow

EXPERIMENT = """\
name: biggest-that-fits
seed: 3
data: {dataset: digits, validation_split: 0.2, test_split: 0.1, limit: 300}
model: {builder: mlp, params: {layers: 1, dropout: 0.0}}
space:
  units: {type: int, low: 8, high: 64}
search:
  algorithm: random
  objective: params
  direction: maximize
  constraints: ["params <= %d"]
  min_budget: 1
  max_budget: 1
  max_trials: 5
training: {compile: graph, batch_size: 32}
""" % PARAMS_BOUND


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("constrained")
    return write_experiment(folder, EXPERIMENT), folder / "study"


def test_search_best_and_status_name_the_biggest_model_that_fits(searched, capsys):
    path, study_dir = searched
    done = hpo_here(capsys, "search", path, "--study-dir", study_dir)
    assert done.returncode == 0, done.stderr[-2000:]
    study = Study.open(study_dir, read_only=True)
    try:
        trials = [t for t in study.trials() if t.state == TrialState.COMPLETE]
    finally:
        study.close()
    fits = [t for t in trials if t.value <= PARAMS_BOUND]
    assert fits and max(t.value for t in trials) > PARAMS_BOUND      # the constraint binds
    expected = max(fits, key=lambda t: t.value)
    closing = [line for line in done.stdout.splitlines() if line.startswith("best: trial")]
    assert closing == [f"best: trial {expected.trial_id}, params={expected.value:.4f} at budget 1, "
                       f"config units={expected.config['units']}"]
    # The table after the search: feasible first, the biggest first among them; then those
    # that break the constraint, the least first.
    table = done.stdout[done.stdout.index("top configurations by params (maximize), feasible first"):]
    shown = [(int(i), feasible) for i, feasible in re.findall(r"^(\d+)\s+1\s+\S+\s+(yes|no)\s", table, re.MULTILINE)]
    breaking = sorted((t for t in trials if t.value > PARAMS_BOUND), key=lambda t: t.value)
    # ... each row saying whether it is feasible, so that the order reads as it is meant.
    assert shown == [(t.trial_id, "yes" if t.value <= PARAMS_BOUND else "no")
                     for t in sorted(fits, key=lambda t: -t.value) + breaking][:5]
    record = json.loads(hpo_here(capsys, "best", study_dir, "--json").stdout)
    assert (record["trial_id"], record["feasible"]) == (expected.trial_id, True)
    top = hpo_here(capsys, "status", study_dir, "--top", 1).stdout
    assert re.search(rf"^{expected.trial_id}\s+complete", top, re.MULTILINE)
    # `best --export` saves that trial's model: its size is the objective's value.
    saved = study_dir.parent / "best.keras"
    exported = hpo_here(capsys, "best", study_dir, "--export", saved)
    assert exported.returncode == 0, exported.stderr[-2000:]
    import keras
    assert keras.models.load_model(saved).count_params() == expected.value
