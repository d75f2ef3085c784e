"""FreezeThaw through `hpo search`: the runner tells it each job's learning curve (the
objective after every epoch of the job), the study stores the curve with the result, and a
resumed search replays the same asks from it."""

from pathlib import Path

import pytest

from hpo.cli import main
from hpo.study import Study

ROOT = Path(__file__).resolve().parents[1]
while not (ROOT / "experiments").is_dir():
    ROOT = ROOT.parent
SMOKE = ROOT / "experiments" / "smoke.yaml"
SETTINGS = ["--set", "search.algorithm=freeze_thaw", "--set", "search.max_budget=4",
            "--set", "search.options={n_startup: 3}",
            "--set", "training.compile=graph", "--set", "data.limit=300"]

pytestmark = pytest.mark.slow


def test_freeze_thaw_is_told_each_jobs_curve_and_a_resume_replays_it(tmp_path):
    folder = tmp_path / "study"
    assert main(["search", str(SMOKE), "--study-dir", str(folder), "--set", "search.max_trials=6", *SETTINGS]) == 0
    study = Study.open(folder, read_only=True)
    tells = {trial_id: payload for kind, trial_id, payload in study.events() if kind == "tell"}
    epochs = {}
    for trial_id, epoch, metrics in study.epochs():
        epochs.setdefault(trial_id, []).append((epoch, metrics["val_accuracy"]))
    trials = {t.trial_id: t for t in study.trials()}
    study.close()
    continued = [t for t in trials.values() if t.continues is not None]
    assert continued, "FreezeThaw continued no trial from its checkpoint"
    for trial_id, payload in tells.items():
        assert payload["state"] == "complete"
        logged = [value for _, value in sorted(epochs[trial_id])]
        assert payload["curve"] == pytest.approx(logged), trial_id      # every epoch of this job, in order
        assert payload["curve"][-1] == pytest.approx(payload["value"])
    for t in continued:
        parent_epochs = len(epochs[t.continues])
        assert len(tells[t.trial_id]["curve"]) == round(t.budget) - round(trials[t.continues].budget), \
            (t.trial_id, parent_epochs)

    assert main(["search", str(SMOKE), "--study-dir", str(folder), "--set", "search.max_trials=9", *SETTINGS]) == 0
    resumed = Study.open(folder, read_only=True)
    assert len(resumed.trials()) == 9 and all(t.state.value == "complete" for t in resumed.trials())
    resumed.close()
