"""What a finished study gives its user: a real TensorBoard server's view of it (HParams
plugin and scalars over HTTP, and where chromium is installed a screenshot of the HParams
dashboard), `hpo report`, and `hpo best --export`."""

import json
import math
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from hpo.cli.tables import state_counts
from hpo.space import SearchSpace
from hpo.study import Study
from tests.support.cli import SMOKE, hpo, hpo_here, startup_lines, user_cli
from tests.support.experiments import SMOKE_STUDY_ARGS, SMOKE_STUDY_GROUP

# One worker runs this module and test_cli_e2e.py, so the study they share (tests/e2e/conftest.py
# `smoke_study`) is searched once, and this module's fixtures run once (pytest-xdist --dist loadgroup).
pytestmark = pytest.mark.xdist_group(SMOKE_STUDY_GROUP)

STATUSES = ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"]


@pytest.fixture(scope="module")
def searched(smoke_study):
    """The study every test here reads, and its `hpo search` run, as a user runs it."""
    return smoke_study


@pytest.fixture(scope="module")
def study_dir(searched):
    return searched[0]


@pytest.fixture(scope="module")
def exported(study_dir, tmp_path_factory):
    """`hpo best --export --json` on the study, run once for the tests that read the file."""
    path = tmp_path_factory.mktemp("export") / "best.keras"
    done = user_cli("best", str(study_dir), "--export", str(path), "--json", cwd=path.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return path, done


def test_no_tensorflow_start_up_line_reaches_the_console_of_search_or_export(searched, exported):
    _, search = searched
    _, export = exported
    assert "trial 11 finished" in search.stderr                       # the console's own lines are kept
    assert json.loads(export.stdout)["export"]["test_examples"] > 0
    for done in (search, export):
        assert not startup_lines(done), (startup_lines(done), done.stderr[-3000:])


@pytest.fixture(scope="module")
def board(study_dir):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The server `hpo tensorboard` starts (TensorBoard without TensorFlow imported).
    server = subprocess.Popen([sys.executable, "-m", "hpo.cli.tensorboard_server",
                               "--logdir", str(study_dir / "tensorboard"), "--host", "127.0.0.1", "--port", str(port),
                               "--reload_interval", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            runs = json.loads(urllib.request.urlopen(f"{url}/data/runs", timeout=5).read())
            if "search" in runs and len(runs) > 2:
                break
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise AssertionError(f"tensorboard did not come up: {server.communicate()[0][-2000:]}")
        time.sleep(0.5)
    yield url
    server.terminate()
    server.wait(timeout=20)


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "X-XSRF-Protected": "1"})
    return json.loads(urllib.request.urlopen(request, timeout=30).read())


def get(url):
    return json.loads(urllib.request.urlopen(url, timeout=30).read())


def test_hparams_experiment_lists_the_space_parameters_first_and_the_objective_first(study_dir, board):
    experiment = post(f"{board}/data/plugin/hparams/experiment", {"experimentName": ""})
    space = SearchSpace.from_dict(Study.open(study_dir).experiment()["space"])
    names = [info["name"] for info in experiment["hparamInfos"]]
    # The dashboard shows the columns in this order, only the first few checked.
    assert sorted(names[:len(space)]) == sorted(space.names)
    assert sorted(names[len(space):]) == ["bracket", "trial_id"]   # what changes on promotion is a metric
    metrics = [m["name"]["tag"] for m in experiment["metricInfos"]]
    assert metrics[:2] == ["hpo/objective", "hpo/budget"]
    assert experiment["metricInfos"][1]["displayName"] == "budget reached (epochs)"
    by_name = {info["name"]: info for info in experiment["hparamInfos"]}
    assert "domainInterval" in by_name["learning_rate"] and "domainDiscrete" in by_name["optimizer"]


def test_every_trial_is_a_session_with_its_objective(study_dir, board):
    groups = post(f"{board}/data/plugin/hparams/session_groups",
                  {"experimentName": "", "allowedStatuses": STATUSES, "colParams": [], "startIndex": 0,
                   "sliceSize": 1000})["sessionGroups"]
    study = Study.open(study_dir)
    trials = study.trials()
    space = SearchSpace.from_dict(study.experiment()["space"])
    lineages = {t.lineage for t in trials}
    assert {g["name"] for g in groups} == {f"trial_{n:04d}" for n in lineages}
    for group in groups:
        lineage = int(group["name"].split("_")[1])
        deepest = max((t for t in trials if t.lineage == lineage), key=lambda t: t.budget)
        assert set(space.names) <= set(group["hparams"])
        for name in space.names:                          # conditionals included, inactive ones marked
            expected = deepest.config.get(name, "inactive")
            got = group["hparams"][name]
            assert got == pytest.approx(expected) if isinstance(expected, float) else got == expected, name
        metrics = {m["name"]["tag"]: m["value"] for m in group["metricValues"]}
        assert metrics["hpo/objective"] == pytest.approx(deepest.value, rel=1e-6)
        assert metrics["hpo/budget"] == deepest.budget
    assert any(g["hparams"]["momentum"] == "inactive" for g in groups) or \
        all(t.config["optimizer"] == "sgd" for t in trials)


def test_scalars_hold_learning_curves_and_the_search_run(study_dir, board):
    trials = Study.open(study_dir).trials()
    for lineage in {t.lineage for t in trials}:
        run = f"trial_{lineage:04d}"
        deepest = max(t.budget for t in trials if t.lineage == lineage)
        for tag in ("val_accuracy", "loss", "learning_rate"):
            points = get(f"{board}/data/plugin/scalars/scalars?run={run}&tag={tag}")
            assert [step for _, step, _ in points] == list(range(1, round(deepest) + 1)), (run, tag)
    assert set(get(f"{board}/data/runs")) == {f"trial_{n:04d}" for n in {t.lineage for t in trials}} | {"search"}
    best = get(f"{board}/data/plugin/scalars/scalars?run=search&tag=search/best_objective")
    assert len(best) == len([t for t in trials if t.state.finished])
    tags = get(f"{board}/data/plugin/scalars/tags")["search"]
    assert {"search/best_objective_by_seconds", "search/trials_complete", "searcher/model_budget"} <= set(tags)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium); "
                                             ".ci/run installs it")
def test_hparams_dashboard_screenshot(board, tmp_path):
    shot = tmp_path / "hparams.png"
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1400,900",
                           "--virtual-time-budget=15000", f"--screenshot={shot}", f"{board}/#hparams"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000    # a rendered page, not a blank one


def test_report_page_has_its_plots(study_dir, capsys):
    # In this process: what is checked is the page the command writes, not how a process starts.
    done = hpo_here(capsys, "report", str(study_dir))
    assert done.returncode == 0, done.stderr[-2000:]
    page = (study_dir / "report" / "report.html").read_text()
    for image in ("best_so_far.png", "parallel_coordinates.png", "importance.png", "brackets.png"):
        data = (study_dir / "report" / image).read_bytes()
        assert data[:4] == b"\x89PNG" and len(data) > 5_000, image
        assert f"src='{image}'" in page
    best = Study.open(study_dir).best("maximize")
    assert f"<td>{best.trial_id}</td>" in page and "Parameter importance" in page
    # The trials counted per state as `hpo status` counts them, in the states' own order.
    assert f"trials: {state_counts(Study.open(study_dir, read_only=True).trials())}</p>" in page
    # The page reads as a story: how the search went, how far configurations got, what mattered,
    # where the good ones lie, then the table.
    order = ["Best so far", "Hyperband: how far", "Parameter importance", "Configurations at their furthest",
             "Top configurations"]
    positions = [page.index(f"<h2>{title}") for title in order]
    assert positions == sorted(positions)
    # 8 configurations: the importance comes with a warning.
    assert "Importance is fitted on only" in page


def _study_figures(study_dir):
    import matplotlib
    matplotlib.use("Agg")
    from hpo.cli import report
    study = Study.open(study_dir)
    trials, experiment = study.trials(), study.experiment()
    space = SearchSpace.from_dict(experiment["space"])
    done = [t for t in trials if t.value is not None]
    return report, trials, done, space


def test_parallel_coordinates_label_every_axis_with_its_values_and_show_a_colour_bar(study_dir):
    report, _, done, space = _study_figures(study_dir)
    fig = report.parallel_coordinates_figure(done, space, "val_accuracy")
    plot, bar = fig.axes
    assert [t.get_text() for t in plot.get_xticklabels()] == space.names + ["val_accuracy"]
    texts = [t.get_text() for t in plot.texts]
    assert {"adam", "sgd", "inactive"} <= set(texts)                # categories by name, inactive marked
    assert {"1", "2"} <= set(texts)                                  # layers: every integer of 1..2
    assert {"0.001", "0.03", "16", "64"} <= set(texts)               # learning_rate and units: their range
    values = [t.value for t in report._furthest(done)]
    assert f"{max(values):.4g}" in texts and f"{min(values):.4g}" in texts
    assert bar.get_ylabel() == "val_accuracy"                        # the colour bar says what colour means
    assert bar.get_ylim() == pytest.approx((min(values), max(values)))


def test_hyperband_diagram_has_a_bracket_legend_and_plain_budget_ticks(study_dir):
    report, trials, _, _ = _study_figures(study_dir)
    fig = report.brackets_figure(trials)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {f"bracket {t.bracket}" for t in trials} <= set(legend)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [f"{b:g}" for b in sorted({t.budget for t in trials})]    # '2', not '2x10^0'
    assert not [t for t in ax.xaxis.get_minorticklabels() if t.get_text()]


def test_importance_on_few_configurations_carries_a_warning(study_dir):
    report, _, done, space = _study_figures(study_dir)
    importance = report.parameter_importance(done, space, "maximize")
    configurations = len(report._furthest(done))
    assert configurations < report.IMPORTANCE_FEW_CONFIGURATIONS and importance is not None
    fig = report.importance_figure(importance, configurations)
    assert "rough guide" in fig.axes[0].get_title()
    many = report.importance_figure(importance, report.IMPORTANCE_FEW_CONFIGURATIONS)
    assert "rough guide" not in many.axes[0].get_title()


def test_best_model_export_is_scored_on_the_held_out_test_split(study_dir, exported):
    import keras
    import numpy as np

    from hpo.config import DataConfig
    from hpo.data import load_dataset

    path, done = exported
    record = json.loads(done.stdout)
    assert record["trial_id"] == Study.open(study_dir).best("maximize").trial_id
    # The saved model reproduces the printed test accuracy on the split the search never saw.
    data = load_dataset(DataConfig(dataset="digits", validation_split=0.2, test_split=0.1), seed=0)
    model = keras.models.load_model(path)
    accuracy = float(np.mean(np.argmax(model.predict(data.x_test, verbose=0), axis=1) == data.y_test))
    assert record["export"]["test_examples"] == len(data.x_test)
    assert accuracy == pytest.approx(record["export"]["test_accuracy"], abs=1e-6)
    assert accuracy > 0.3                     # better than chance (0.1) after a few epochs on digits


def test_exported_model_continues_training_with_the_trials_optimizer_in_plain_keras(study_dir, exported):
    import warnings

    import keras
    import numpy as np

    from hpo.config import DataConfig
    from hpo.data import load_dataset

    path, _ = exported
    best = Study.open(study_dir).best("maximize")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = keras.models.load_model(path, compile=True)
    assert not [w for w in caught if "Skipping variable loading" in str(w.message)], [str(w.message) for w in caught]
    expected = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD}[best.config["optimizer"]]
    optimizer = model.optimizer
    assert type(optimizer) is expected                      # Keras's own class: loads without hpo
    assert float(optimizer.learning_rate) == pytest.approx(best.config["learning_rate"], rel=1e-6)
    if best.config["optimizer"] == "sgd":
        assert float(optimizer.momentum) == pytest.approx(best.config["momentum"], rel=1e-6)
    # The trained state came along: the step count is the trial's (epochs x steps), slots are not zero.
    data = load_dataset(DataConfig(dataset="digits", validation_split=0.2, test_split=0.1), seed=0)
    steps_per_epoch = math.ceil(len(data.x_train) / 32)      # the last batch filled up, as fit counts
    trained_steps = round(best.budget) * steps_per_epoch
    assert int(optimizer.iterations) == trained_steps
    slots = [v for v in optimizer.variables if v.path.endswith(("_momentum", "_velocity"))]
    assert slots and any(np.abs(keras.ops.convert_to_numpy(v)).max() > 0 for v in slots)
    before = [w.copy() for w in model.get_weights()]
    model.fit(data.x_train, data.y_train, epochs=1, batch_size=32, verbose=0)
    assert int(optimizer.iterations) == trained_steps + math.ceil(len(data.x_train) / 32)
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def _cli_at(columns: int, *args):
    return hpo(*args, columns=columns)


def test_status_fits_80_columns_with_every_figure_whole_and_configs_one_command_away(study_dir):
    trials = Study.open(study_dir).trials()
    for width, configs_shown in ((80, True), (50, False)):
        # 80: the bracket and rung columns make room for the configs, wrapped; 50: they move out.
        done = _cli_at(width, "status", str(study_dir))
        assert done.returncode == 0, done.stderr[-2000:]
        lines = done.stdout.splitlines()
        command = f"  hpo status {study_dir} --trial N"                  # a path as long as it is, unwrapped
        assert (command in lines) != configs_shown and "…" not in done.stdout and "bracket" not in done.stdout
        assert ("learning_rate=" in done.stdout) == configs_shown
        table = [line for line in lines if line[:1].isdigit() or line.startswith(("trial ", "─", " "))]
        assert max(len(line) for line in table if line != command) <= width
        rows = {int(line.split()[0]): line.split() for line in lines if line.split() and line.split()[0].isdigit()}
        assert sorted(rows) == [t.trial_id for t in trials]
        for t in trials:
            assert rows[t.trial_id][1] == t.state.value
            if t.value is not None:
                assert f"{t.value:.4f}" in rows[t.trial_id]
    best = Study.open(study_dir).best("maximize")
    detail = _cli_at(80, "status", str(study_dir), "--trial", str(best.trial_id))
    assert detail.returncode == 0, detail.stderr[-2000:]
    for key, value in best.config.items():
        assert f"    {key}: {value}" in detail.stdout.splitlines()
    wide = _cli_at(160, "status", str(study_dir))
    assert "config / error" in wide.stdout and "learning_rate=" in wide.stdout


def test_top_configurations_list_each_configuration_once_at_its_deepest_rung_ranked_as_best(study_dir):
    study = Study.open(study_dir)
    trials, best = study.trials(), study.best("maximize")
    done = _cli_at(100, "status", str(study_dir), "--top", "3")
    assert done.returncode == 0, done.stderr[-2000:]
    ids = [int(line.split()[0]) for line in done.stdout.splitlines() if line.split() and line.split()[0].isdigit()]
    assert len(ids) == 3 and ids[0] == best.trial_id
    by_id = {t.trial_id: t for t in trials}
    lineages = [by_id[i].lineage for i in ids]
    assert len(set(lineages)) == 3                                   # each configuration once
    for i in ids:                                                    # ...at its deepest completed rung
        assert by_id[i].budget == max(t.budget for t in trials if t.lineage == by_id[i].lineage
                                      and t.value is not None)
    assert len({t.lineage for t in trials}) < len(trials)             # the study has promoted configurations
    # The table after a search ranks the same way.
    from rich.console import Console

    from hpo.cli.tables import top_table
    from hpo.search.multiobjective.objectives import Goals
    console = Console(width=80, record=True)
    console.print(top_table(trials, "val_accuracy", Goals.build(direction="maximize"), 80))
    shown = [int(line.split()[0]) for line in console.export_text().splitlines()
             if line.split() and line.split()[0].isdigit()]
    assert shown[:3] == ids and len({by_id[i].lineage for i in shown}) == len(shown)


def test_a_finished_search_run_again_says_it_is_complete_and_how_to_extend_it(study_dir, capsys, tmp_path):
    done = hpo_here(capsys, "search", SMOKE, "--study-dir", study_dir, *SMOKE_STUDY_ARGS)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "0 trial(s) finished" in done.stdout
    assert "the study is complete" in done.stdout and "--set search.max_trials=24" in done.stdout
    # Rerun with a smaller limit than the study ran with (on a copy: a resume stores the new
    # limit, and other tests read this study): it says what the study holds.
    copy = tmp_path / "copy"
    shutil.copytree(study_dir, copy)
    smaller = hpo_here(capsys, "search", SMOKE, "--study-dir", copy, *SMOKE_STUDY_ARGS,
                       "--set", "search.max_trials=6")
    assert smaller.returncode == 0, smaller.stderr[-2000:]
    assert "it has run 12 trials (search.max_trials=6)" in smaller.stdout
    assert "--set search.max_trials=24" in smaller.stdout
