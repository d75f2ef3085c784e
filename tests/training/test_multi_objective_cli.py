"""Several objectives through the CLI (`hpo.cli.main`, in-process): a search on digits with
[val_accuracy, params] and a constraint, its Pareto front in `best` and `export`, resume,
and a single-objective study stored without the new keys reading and resuming as before.
(Bad objectives and constraints: the catalogue, tests/support/bad_inputs.py.)"""

import json
import shutil

import numpy as np
import pytest

from hpo.cli import main
from hpo.study import Study
from hpo.trial import TrialState
from tests.support.cli import hpo_here, write_experiment
from tests.support.experiments import MULTI_OBJECTIVE as EXPERIMENT
from tests.support.experiments import PARAMS_BOUND

# Slow (a search of 6 trials through the CLI, resumed and extended): left out of `-m "not slow"`.
# One worker runs this module, so its module-scoped search runs once, not once in each test
# process that draws one of its tests (pytest-xdist --dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("multi_objective_cli")]


def cli(capsys, *args):
    done = hpo_here(capsys, *args)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mo")
    path = str(write_experiment(folder, EXPERIMENT))
    study = folder / "study"
    assert main(["search", path, "--study-dir", str(study)]) == 0
    return path, study


def losses(metrics):
    return np.array([-metrics["val_accuracy"], metrics["params"]])


def completed(study_dir):
    study = Study.open(study_dir, read_only=True)
    try:
        return [t for t in study.trials() if t.state == TrialState.COMPLETE]
    finally:
        study.close()


def front(capsys, study_dir):
    code, out, _ = cli(capsys, "best", str(study_dir), "--json")
    assert code == 0
    return json.loads(out)


def assert_true_front(record, trials):
    """Every member is feasible when any trial is, and no feasible finished trial dominates it."""
    feasible = [t for t in trials if t.metrics["params"] <= PARAMS_BOUND]
    for member in record["pareto"]:
        assert member["feasible"] and member["objectives"]["params"] <= PARAMS_BOUND
        point = losses(member["objectives"])
        for t in feasible:
            other = losses(t.metrics)
            assert not (np.all(other <= point) and np.any(other < point)), (member, t.trial_id)


def test_search_finds_a_feasible_front_of_several_members(searched, capsys):
    _, study = searched
    trials = completed(study)
    assert len(trials) == 6 and all("params" in t.metrics for t in trials)
    record = front(capsys, study)
    assert record["objectives"] == [{"name": "val_accuracy", "direction": "maximize"},
                                    {"name": "params", "direction": "minimize"}]
    assert len(record["pareto"]) >= 2
    assert_true_front(record, trials)
    # params is the mlp's own count: one hidden layer of `units` on 64 inputs and 10 classes.
    for member in record["pareto"]:
        assert member["objectives"]["params"] == 75 * member["config"]["units"] + 10


def test_best_prints_the_front_as_a_table(searched, capsys):
    _, study = searched
    code, out, _ = cli(capsys, "best", str(study))
    ids = [m["trial_id"] for m in front(capsys, study)["pareto"]]
    assert code == 0 and "Pareto front" in out and "params (min)" in out
    rows = [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].isdigit()]
    assert rows == [str(i) for i in ids]


def test_export_carries_objectives_measures_and_feasibility(searched, capsys):
    _, study = searched
    code, out, _ = cli(capsys, "export", str(study), "--format", "json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 6
    for row in rows:
        assert set(row["objectives"]) == {"val_accuracy", "params"}
        assert row["measures"] == {"params": row["objectives"]["params"]}
        assert row["feasible"] == (row["objectives"]["params"] <= PARAMS_BOUND)
    code, out, _ = cli(capsys, "export", str(study), "--format", "csv")
    header = out.splitlines()[0].split(",")
    assert {"objective.val_accuracy", "objective.params", "measure.params", "feasible"} <= set(header)


def test_resume_keeps_the_front(searched, capsys, tmp_path):
    path, study = searched
    copy = tmp_path / "study"
    shutil.copytree(study, copy)
    before = {m["trial_id"]: m for m in front(capsys, copy)["pareto"]}
    capsys.readouterr()
    assert main(["search", path, "--study-dir", str(copy), "--set", "search.max_trials=9"]) == 0
    closing = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("best:", "Pareto front"))]
    trials = completed(copy)
    assert len(trials) == 9
    after = front(capsys, copy)
    # The search's last line names the front, not one objective's best.
    members = sorted(m["trial_id"] for m in after["pareto"])
    assert closing == [f"Pareto front (val_accuracy, params): {len(members)} trial(s), "
                       f"{', '.join(map(str, members))}; `hpo best` lists them"]
    assert_true_front(after, trials)
    kept = {m["trial_id"] for m in after["pareto"]}
    new = [losses(t.metrics) for t in trials if t.trial_id >= 6 and t.metrics["params"] <= PARAMS_BOUND]
    for trial_id, member in before.items():
        # An old member leaves the front only when a new trial dominates it.
        point = losses(member["objectives"])
        assert trial_id in kept or any(np.all(p <= point) and np.any(p < point) for p in new), trial_id


def test_export_of_a_chosen_front_member(searched, capsys, tmp_path):
    _, study = searched
    chosen = front(capsys, study)["pareto"][-1]["trial_id"]
    target = tmp_path / "m.keras"
    code, out, err = cli(capsys, "best", str(study), "--trial", str(chosen), "--export", str(target), "--json")
    assert code == 0, err
    assert json.loads(out)["export"]["trial_id"] == chosen and target.exists()
    code, _, err = cli(capsys, "best", str(study), "--export", str(target))
    assert code == 2 and "--trial N" in err


def test_single_objective_study_without_the_new_keys_reads_and_resumes(tmp_path, capsys):
    """A study stored before `search.objectives`, `search.constraints` and
    `training.latency_batch` existed: `best` and `export` read it as before, and it resumes."""
    single = EXPERIMENT.replace("  objectives: [val_accuracy, {name: params, direction: minimize}]\n", "") \
                       .replace('  constraints: ["params <= %d"]\n' % PARAMS_BOUND, "") \
                       .replace("max_trials: 6", "max_trials: 2")
    path, study_dir = str(write_experiment(tmp_path, single)), tmp_path / "study"
    assert main(["search", path, "--study-dir", str(study_dir)]) == 0
    study = Study.open(study_dir)
    stored = study.experiment()
    # `best --export` rebuilds the experiment from the stored form, which keeps the defaults as [].
    from hpo.config import experiment_from_dict
    assert stored["search"]["objectives"] == [] and experiment_from_dict(stored).search.objectives == ()
    for section, key in (("search", "objectives"), ("search", "constraints"), ("training", "latency_batch")):
        del stored[section][key]
    study.replace_experiment(stored)
    study.close()
    assert experiment_from_dict(stored).training.latency_batch == 1
    code, out, _ = cli(capsys, "best", str(study_dir), "--json")
    record = json.loads(out)
    assert code == 0 and set(record) == {"trial_id", "objective", "direction", "value", "budget", "config",
                                         "metrics"}
    assert record["objective"] == "val_accuracy" and "params" not in record["metrics"]
    code, out, _ = cli(capsys, "export", str(study_dir), "--format", "json")
    assert code == 0 and all("objectives" not in row and "feasible" not in row for row in json.loads(out))
    code, out, _ = cli(capsys, "export", str(study_dir), "--format", "csv")
    assert not any(column.startswith(("objective.", "measure.")) for column in out.splitlines()[0].split(","))
    assert main(["search", path, "--study-dir", str(study_dir), "--set", "search.max_trials=3"]) == 0
    assert len(completed(study_dir)) == 3


def test_report_shows_the_front_and_the_hypervolume(searched, capsys):
    from hpo.cli.report_pareto import hypervolume_curve
    from hpo.study.pareto import stored_goals

    _, study = searched
    code, _, _ = cli(capsys, "report", str(study))
    report = study / "report"
    assert code == 0 and (report / "pareto_front.png").exists() and (report / "hypervolume.png").exists()
    assert "Pareto front" in (report / "report.html").read_text()
    handle = Study.open(study, read_only=True)
    goals, trials = stored_goals(handle.experiment()), handle.trials()
    handle.close()
    epochs, volumes = hypervolume_curve(trials, goals)
    # One budget: the front only grows, so its hypervolume never falls.
    assert epochs == sorted(epochs) and len(volumes) == 6 and volumes[-1] > 0
    assert all(b >= a for a, b in zip(volumes, volumes[1:]))


def test_hypervolume_is_exact():
    from itertools import product

    from hpo.search.multiobjective.hypervolume import hypervolume
    assert hypervolume([[0.5, 0.0], [0.0, 0.5]], [1, 1]) == pytest.approx(0.75)
    assert hypervolume([[2.0, 0.0]], [1, 1]) == 0.0          # beyond the reference: nothing
    # Three objectives against a grid count of the dominated unit cells.
    points = np.array([[1, 3, 2], [2, 1, 3], [3, 2, 1], [2, 2, 2], [4, 4, 0]])
    cells = sum(any(np.all(p <= np.array(c)) for p in points) for c in product(range(5), repeat=3))
    assert hypervolume(points, [5, 5, 5]) == pytest.approx(cells)


def test_model_measures_of_a_small_model():
    import keras

    from hpo.training.model_measures import measure_model
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.BatchNormalization()])
    measured = measure_model(model, ["params", "model_bytes", "latency_ms"], np.zeros((1, 4), "float32"), batch=2)
    # Dense 4*3+3 and the batch norm's scale and offset train; its two moving statistics are stored too.
    assert measured["params"] == 4 * 3 + 3 + 2 * 3
    assert measured["model_bytes"] == 4 * (4 * 3 + 3 + 4 * 3)
    assert measured["latency_ms"] > 0
    assert measure_model(model, ["val_accuracy"], np.zeros((1, 4), "float32")) == {}


def test_tensorboard_has_every_goal_as_a_metric_and_the_hypervolume(searched):
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer
    from tensorboard.plugins.hparams import plugin_data_pb2

    _, study = searched
    runs = EventMultiplexer()
    runs.AddRunsFromDirectory(str(study / "tensorboard"))
    runs.Reload()
    trial_runs = [r for r in runs.Runs() if r.startswith("trial_")]
    assert len(trial_runs) == 6 and all("params" in runs.Runs()[r]["tensors"] for r in trial_runs)
    config = runs.SummaryMetadata("search", "_hparams_/experiment").plugin_data.content
    metrics = {m.name.tag for m in plugin_data_pb2.HParamsPluginData.FromString(config).experiment.metric_infos}
    assert {"val_accuracy", "params"} <= metrics
    volumes = [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in runs.Tensors("search", "search/hypervolume")]
    assert [step for step, _ in volumes] == [1, 2, 3, 4, 5, 6] and all(v > 0 for _, v in volumes)
