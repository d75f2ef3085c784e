"""`hpo search` with fused trials, inline and on two local worker processes, matches the
same search unfused (the fused engine itself: tests/training/test_fused.py)."""

import pytest

from tests.support.experiments import LOCAL_FORKSERVER_GROUP


# In the xdist group of the other in-process local search (test_local_executor.py), so that
# one test process runs both and they share its forkserver (see LOCAL_FORKSERVER_GROUP).
@pytest.mark.xdist_group(LOCAL_FORKSERVER_GROUP)
def test_hpo_search_with_fused_trials_matches_the_same_search_unfused(tmp_path, capsys):
    """The runner hands the inline executor (or each local worker) several jobs; those sharing
    an architecture, batch size and epochs train fused, and every trial's results equal an
    unfused search's. (Fused shares on Dask: tests/e2e/test_dask_executor.py; a local worker killed mid
    fused group: tests/e2e/test_fault_injection.py.)"""
    from hpo.study import Study
    from tests.support.cli import SMOKE, hpo_here

    fixed_architecture = ["--set", "space={learning_rate: {type: float, low: 0.001, high: 0.03, log: true}, "
                                   "dropout: {type: float, low: 0.0, high: 0.3}}",
                          "--set", "model.params={layers: 1, units: 32}", "--set", "search.algorithm=random",
                          "--set", "search.min_budget=3", "--set", "search.max_budget=3",
                          "--set", "search.max_trials=8", "--set", "training.compile=graph"]
    runs = {}
    # The local workers are also recycled after 3 trials: a fusing worker is replaced between
    # the group it was sent and any trials still waiting to be sent. (This local run is also
    # the suite's check that two workers train at once and are recycled after their quota.)
    local = ["--set", "execution.backend=local", "--set", "execution.workers=2", "--set", "execution.recycle_after=3"]
    for fuse, extra in ((1, []), (4, []), ("auto", []), ("local", local)):
        study_dir = tmp_path / f"fuse{fuse}"
        # Every driver runs in this process; the local one starts its own worker processes.
        done = hpo_here(capsys, "search", SMOKE, "--study-dir", str(study_dir), *fixed_architecture, *extra,
                   "--set", f"training.fuse={4 if fuse == 'local' else fuse}")
        assert done.returncode == 0, done.stderr[-3000:]
        runs[fuse] = Study.open(study_dir)
    unfused, fused = runs[1].trials(), runs[4].trials()
    assert len(fused) == 8 and all(t.state.value == "complete" for t in fused)
    assert [t.config for t in fused] == [t.config for t in unfused]
    for a, b in zip(unfused, fused):
        assert b.value == pytest.approx(a.value, abs=1e-6)
    fused_epochs = [m for _, _, m in runs[4].epochs()]
    assert sum(m.get("fused_trials") == 4 for m in fused_epochs) == 8 * 3     # every trial, every epoch
    assert all(len(runs[4].epochs(t.trial_id)) == 3 for t in fused)
    assert (tmp_path / "fuse4" / "checkpoints" / "trial_0007.npz").exists()
    # auto: 8 jobs of 3 epochs are too little work to repay a probe, so the provisional size
    # (8) takes them all as one group; the results are still the unfused ones.
    for a, b in zip(unfused, runs["auto"].trials()):
        assert b.value == pytest.approx(a.value, abs=1e-6)
    assert {m.get("fused_trials") for _, _, m in runs["auto"].epochs()} == {8}
    # local, 2 workers: the 8 jobs are split 4 and 4, and each worker fuses its four.
    assert [t.config for t in runs["local"].trials()] == [t.config for t in unfused]
    for a, b in zip(unfused, runs["local"].trials()):
        assert b.value == pytest.approx(a.value, abs=1e-6), a.trial_id
    assert [m.get("fused_trials") for _, _, m in runs["local"].epochs()] == [4] * 8 * 3
    # The two workers trained their groups at the same time.
    local = runs["local"].trials()
    first_group, second_group = local[:4], local[4:]
    assert max(t.started_at for t in second_group) < min(t.finished_at for t in first_group), \
        [(t.trial_id, t.started_at, t.finished_at) for t in local]
    assert (tmp_path / "fuselocal" / "hpo.log").read_text().count("replacing it with a fresh process") >= 1
