"""Kills at random moments, on every backend: nothing finished is ever lost.

Each backend's search (tests/support/kill_search.py: the real driver, study and executors, with a
trainer whose epochs take milliseconds) is struck at kill points drawn from a seeded RNG:
what dies by SIGKILL (the driver; a driver still starting, from its imports through the
lock, the study's creation or backup and the replay; or on local and Dask one worker
process) and after what delay. A killed driver is resumed. At every kill point and at the end,
each trial that had finished at an earlier kill point is still finished, with the same
value, epochs and per-epoch metrics; and the search ends with every trial complete, each
epoch recorded once. The inline search with two objectives and a constraint (`inline-mo`)
ends with the trials, and so the Pareto front, of the same search run without a kill.
"""

import json
import os
import random
import subprocess
import sys
import time

import psutil
import pytest

from tests.support.cli import ROOT, cli_env
from tests.support.faults import kill, query, wait_for, worker_processes
from tests.support.kill_search import MAX_TRIALS

# Kill points per backend: 24 in all. Dask's fewer, because each resume starts a LocalCluster.
KILL_POINTS = {"inline": 7, "inline-mo": 4, "local": 7, "dask": 6}
# Delays up to 0.6 s: trials take 10 to 90 ms, so a kill lands anywhere in one, and the kill
# points use well under half of the search, however fast this machine runs it.
MAX_DELAY_S = 0.6
WORKER_KILL_SHARE = 0.3        # on local and dask, the share of kill points that strike a worker
START_UP_KILL_SHARE = 0.3      # the share that strike a driver still starting (lock, create, backup, replay)
START_UP_MAX_DELAY_S = 1.5     # after launch: Python's imports, then the lock, the study, the workers
# Another seed draws other kill points (the suite runs seed 0): HPO_RANDOM_KILL_SEED=7 pytest ...
SEED = os.environ.get("HPO_RANDOM_KILL_SEED", "0")


def kill_plan(backend: str) -> list[tuple[float, str]]:
    """(delay in seconds, target): 'driver' and 'worker' after the driver is searching,
    'starting driver' after a driver is launched (the previous kill point killed its driver)."""
    rng = random.Random(f"random-kill-{backend}" + ("" if SEED == "0" else f"-{SEED}"))
    plan = []
    for _ in range(KILL_POINTS[backend]):
        draw = rng.random()
        restarting = not plan or plan[-1][1] != "worker"
        if not backend.startswith("inline") and draw < WORKER_KILL_SHARE:
            target = "worker"
        elif restarting and draw > 1 - START_UP_KILL_SHARE:
            target = "starting driver"
        else:
            target = "driver"
        longest = START_UP_MAX_DELAY_S if target == "starting driver" else MAX_DELAY_S
        plan.append((round(rng.uniform(0.0, longest), 3), target))
    return plan


def start_driver(backend: str, study_dir) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from tests.support import kill_search; kill_search.main()",
                             backend, str(study_dir)], cwd=ROOT, env=cli_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def searching(study_dir, since: float):
    """The driver started at `since` is searching: its workers are up and have reported an
    epoch (a killed driver's trials stay 'running' in the database, so that says nothing)."""
    return lambda: query(study_dir, "SELECT 1 FROM epochs WHERE recorded_at>?", (since,))


def finished_trials(study_dir) -> dict[int, tuple]:
    """Each finished trial: its row and its per-epoch metrics, as an outside reader sees them."""
    rows = query(study_dir, "SELECT trial_id, state, value, budget, config, epochs_trained FROM trials "
                            "WHERE state IN ('complete', 'failed')")
    epochs: dict[int, list] = {}
    for trial_id, epoch, metrics in query(study_dir, "SELECT trial_id, epoch, metrics FROM epochs ORDER BY 1, 2"):
        epochs.setdefault(trial_id, []).append((epoch, json.loads(metrics)))
    return {row[0]: (*row[1:], tuple(map(str, epochs.get(row[0], [])))) for row in rows}


def assert_nothing_finished_lost(kept: dict, study_dir, where: str) -> None:
    now = finished_trials(study_dir)
    changed = [trial_id for trial_id, row in kept.items() if now.get(trial_id) != row]
    assert not changed, f"{where}: finished trials changed or vanished: " + \
        "; ".join(f"{t}: {kept[t]} -> {now.get(t)}" for t in changed[:3])
    kept.update(now)


def strike(driver: subprocess.Popen, target: str, rng: random.Random) -> str:
    """Kill the target; returns what a killed driver had written on stderr."""
    if target == "worker":
        # The processes that train: leaves of the driver's tree (a Dask worker, not its nanny).
        leaves = [p for p in worker_processes(driver.pid) if not p.children()]
        assert leaves, f"no worker to kill: {worker_processes(driver.pid)}"
        kill(rng.choice(leaves))
        return ""
    orphans = worker_processes(driver.pid)
    kill(driver.pid)
    _, err = driver.communicate(timeout=30)
    # Workers notice their driver is gone and exit; wait for them so they train for nobody.
    wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in orphans),
             timeout=30, what="the killed driver's workers to exit")
    return err


def study_trials(study_dir):
    from hpo.study import Study
    study = Study.open(study_dir, read_only=True)
    try:
        return study.experiment(), study.trials()
    finally:
        study.close()


def assert_same_search_as_without_kills(study_dir, reference_dir, monkeypatch):
    """The killed and resumed inline search ran the trials an unkilled one runs (the searcher
    replays its asks and tells, and one slot runs them in the same order), so its Pareto
    front is that search's, member for member."""
    from hpo.config import experiment_from_dict
    from hpo.study.pareto import pareto_set
    from tests.support import kill_search
    monkeypatch.setattr(kill_search, "EPOCH_SECONDS", 0.0)
    with pytest.raises(SystemExit) as ended:
        kill_search.main(["inline-mo", str(reference_dir)])
    assert ended.value.code == 0
    fronts = []
    for folder in (study_dir, reference_dir):
        experiment, trials = study_trials(folder)
        rows = [(t.trial_id, t.config, t.budget, t.continues, t.state, t.metrics) for t in trials]
        front = pareto_set(trials, experiment_from_dict(experiment).search.goals())
        fronts.append((rows, [(m.trial_id, m.objectives, m.feasible) for m in front]))
    (killed, killed_front), (unkilled, unkilled_front) = fronts
    assert killed == unkilled
    assert killed_front == unkilled_front
    assert len(killed_front) >= 3 and all(feasible for *_, feasible in killed_front), killed_front


@pytest.mark.parametrize("backend", ["inline", "inline-mo", "local", "dask"])
def test_random_kills_lose_no_finished_trial(tmp_path, backend, monkeypatch):
    """SIGKILL at seeded random moments; after each resume nothing finished has changed."""
    study_dir = tmp_path / "study"
    plan = kill_plan(backend)
    print(f"{backend} kill points, seed {SEED} (delay s, target): {plan}")
    rng = random.Random(f"victims-{backend}-{SEED}")
    kept: dict[int, tuple] = {}
    driver = None
    said = []          # every driver's stderr
    try:
        for n, (delay, target) in enumerate(plan):
            where = f"kill point {n} of {plan} ({backend})"
            if driver is None:
                started = time.time()
                driver = start_driver(backend, study_dir)
                if target != "starting driver":
                    wait_for(searching(study_dir, started), timeout=60, what=f"a running trial before {where}",
                             process=driver)
            assert_nothing_finished_lost(kept, study_dir, f"before {where}")
            try:
                driver.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                pass
            assert driver.poll() is None, f"the search ended before {where}: raise MAX_TRIALS"
            said.append(strike(driver, target, rng))
            if target != "worker":
                driver = None
            assert_nothing_finished_lost(kept, study_dir, f"just after {where}")
            print(f"{backend} kill point {n}: {target} after {delay}s, {len(kept)} trials finished")
        assert kept, f"no trial had finished by the last of {plan}: nothing was at stake"
        if driver is None:
            driver = start_driver(backend, study_dir)
        _, err = driver.communicate(timeout=240)
        said.append(err)
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 0, f"after {plan}: {err[-3000:]}"
    assert_nothing_finished_lost(kept, study_dir, f"at the end of {plan}")

    trials = query(study_dir, "SELECT trial_id, state, budget, continues, attempts FROM trials ORDER BY trial_id")
    assert len(trials) == MAX_TRIALS and all(state == "complete" for _, state, *_ in trials), trials
    budget = {trial_id: b for trial_id, _, b, _, _ in trials}
    for trial_id, _, b, continues, _ in trials:
        start = 0 if continues is None else int(round(budget[continues]))
        recorded = [row[0] for row in query(study_dir, "SELECT epoch FROM epochs WHERE trial_id=? ORDER BY epoch",
                                            (trial_id,))]
        assert recorded == list(range(start + 1, int(round(b)) + 1)), (trial_id, recorded, plan)
    # The kills struck mid-trial: some trial was running at one of them and ran again.
    assert sum(attempts for *_, attempts in trials) > MAX_TRIALS, plan
    # A LocalCluster's scheduler runs in the driver; the losses it logs are the runner's to say.
    assert not [line for text in said for line in text.splitlines() if "distributed.scheduler - ERROR" in line]
    if backend == "inline-mo":
        assert_same_search_as_without_kills(study_dir, tmp_path / "unkilled" / "study", monkeypatch)


def test_a_driver_killed_while_creating_its_study_leaves_one_the_next_run_creates_again(tmp_path, monkeypatch):
    """The schema is written, the experiment not yet (a kill, or any death, in between): the
    half-made database never takes the name study.sqlite, so the next run is not refused
    as a damaged study."""
    import sqlite3

    import hpo.study
    from hpo.study.resume import prepare_study
    from tests.support.kill_search import experiment_for

    study_dir = tmp_path / "study"
    experiment = experiment_for("inline", study_dir)
    monkeypatch.setattr(hpo.study.store, "_SCHEMA", hpo.study.store._SCHEMA + "CREATE TABLE meta (dies_here);")
    with pytest.raises(sqlite3.OperationalError):
        prepare_study(experiment, study_dir)
    assert not (study_dir / "study.sqlite").exists()
    monkeypatch.undo()
    study = prepare_study(experiment, study_dir)
    assert study.experiment() == experiment.to_dict()
    study.close()
    assert sorted(p.name for p in study_dir.iterdir()) == ["study.lock", "study.sqlite"]
