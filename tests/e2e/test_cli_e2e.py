"""The real CLI, real TensorFlow, on experiments/smoke.yaml: the study of tests/e2e/conftest.py
`smoke_study`, one `hpo search` process that test_study_outputs.py reads too."""

import json

import pytest

from tests.support.cli import SMOKE, hpo_here
from tests.support.experiments import SMOKE_STUDY_ARGS, SMOKE_STUDY_GROUP, SMOKE_STUDY_TRIALS

# One worker runs this module and test_study_outputs.py, so their study is searched once
# (pytest-xdist --dist loadgroup).
pytestmark = pytest.mark.xdist_group(SMOKE_STUDY_GROUP)


def test_search_records_every_trial(smoke_study):
    from hpo.study import Study
    study_dir, done = smoke_study
    study = Study.open(study_dir)
    trials = study.trials()
    assert len(trials) == SMOKE_STUDY_TRIALS and all(t.state.value == "complete" for t in trials)
    assert all(t.value is not None and 0 <= t.value <= 1 for t in trials)
    assert any(t.continues is not None for t in trials)         # BOHB's Hyperband brackets promoted something
    for t in trials:
        epochs = [e for _, e, _ in study.epochs(t.trial_id)]
        parent_epochs = 0 if t.continues is None else round(study.trial(t.continues).budget)
        assert epochs == list(range(parent_epochs + 1, round(t.budget) + 1))
    assert study.experiment()["name"] == "smoke"
    assert f"tensorboard --logdir {study_dir / 'tensorboard'}" in done.stdout
    assert "best: trial" in done.stdout
    assert "digits from sklearn" in done.stderr                   # the data source is logged


def test_tensorboard_logs_hold_curves_and_hparams(smoke_study):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    from hpo.study import Study
    study_dir, _ = smoke_study
    study = Study.open(study_dir)
    tb = study_dir / "tensorboard"
    search = EventAccumulator(str(tb / "search"), size_guidance={"tensors": 0}).Reload()
    assert "_hparams_/experiment" in search.Tags()["tensors"]
    assert not [p for p in tb.iterdir() if p.is_file()]            # nothing at the root: no run named '.'

    lineages = {t.lineage for t in study.trials()}
    assert {p.name for p in tb.iterdir() if p.is_dir()} == {f"trial_{n:04d}" for n in lineages} | {"search"}
    for lineage in lineages:
        run = EventAccumulator(str(tb / f"trial_{lineage:04d}"), size_guidance={"tensors": 0}).Reload()
        steps = [e.step for e in run.Tensors("val_accuracy")]
        deepest = max(t.budget for t in study.trials() if t.lineage == lineage)
        assert steps == list(range(1, round(deepest) + 1))         # one continuous curve, step = epoch
        assert "hpo/objective" in run.Tags()["tensors"]
        start = run.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
        info = plugin_data_pb2.HParamsPluginData.FromString(start).session_start_info
        assert {"layers", "units", "learning_rate", "optimizer", "trial_id", "bracket"} <= set(info.hparams)
        assert not {"budget", "rung"} & set(info.hparams)         # they change on promotion: metrics instead


def test_best_json_parses_and_matches_status(smoke_study, capsys):
    # In this process, as the commands below: what is checked is what they print, not how a
    # process starts (the search above is the real process).
    study_dir, _ = smoke_study
    best = hpo_here(capsys, "best", study_dir, "--json")
    assert best.returncode == 0
    record = json.loads(best.stdout)
    assert record["objective"] == "val_accuracy" and 0 < record["value"] <= 1
    assert set(record["config"]) >= {"layers", "units", "learning_rate", "optimizer"}
    status = hpo_here(capsys, "status", study_dir)
    assert status.returncode == 0 and "complete" in status.stdout


def test_export_json_and_csv(smoke_study, tmp_path, capsys):
    study_dir, _ = smoke_study
    out = tmp_path / "trials.json"
    assert hpo_here(capsys, "export", study_dir, "--format", "json", "-o", out).returncode == 0
    rows = json.loads(out.read_text())
    assert len(rows) == SMOKE_STUDY_TRIALS and all(r["epochs"] for r in rows)
    csv = hpo_here(capsys, "export", study_dir, "--format", "csv")
    header = csv.stdout.splitlines()[0].split(",")
    assert {"trial_id", "config.units", "epoch", "metric.val_accuracy"} <= set(header)
    assert len(csv.stdout.splitlines()) - 1 == sum(len(r["epochs"]) for r in rows)


def test_a_rerun_with_a_changed_experiment_is_refused(smoke_study, capsys):
    """(A rerun of the same experiment resumes and finds the study complete:
    test_study_outputs.py `test_a_finished_search_run_again_says_it_is_complete_and_how_to_extend_it`,
    on this study.)"""
    study_dir, _ = smoke_study
    # In this process: what is checked is what the command does, not how a process starts.
    changed = hpo_here(capsys, "search", SMOKE, "--study-dir", study_dir, *SMOKE_STUDY_ARGS, "--set", "search.eta=3")
    assert changed.returncode == 2
    assert "search.eta: 2.0 -> 3.0" in changed.stderr and "--fresh" in changed.stderr
    assert "Traceback" not in changed.stderr
