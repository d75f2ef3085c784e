"""`hpo.study.searching.open_for_search`: the study every face runs a search in, taken with its
driver lock, logged to while the search runs, then released, left and closed in that order."""

import contextlib
import os

import pytest

from hpo.config import experiment_from_dict
from hpo.study import lock as study_lock
from hpo.study.searching import open_for_search


def experiment(tmp_path):
    return experiment_from_dict({"name": "scope", "seed": 1, "space": {"x": {"type": "float", "low": 0, "high": 1}},
                                 "search": {"algorithm": "random", "objective": "y", "direction": "minimize",
                                            "max_trials": 2}, "output": {"dir": str(tmp_path / "study")}},
                                source="test", needs_data=False)


def recording_log(events):
    @contextlib.contextmanager
    def log_file(path):
        events.append(("log entered", path.name))
        try:
            yield
        finally:
            events.append(("log left", study_lock.holder(path.parent)))
    return log_file


def test_the_study_is_held_while_the_block_runs_then_released_left_and_closed(tmp_path):
    exp = experiment(tmp_path)
    events = []
    with open_for_search(exp, tmp_path / "study", log_file=recording_log(events)) as study:
        assert study_lock.holder(tmp_path / "study") == os.getpid()
        study.trials()
    # The lock went before the log file was left; the study is closed after both.
    assert events == [("log entered", "hpo.log"), ("log left", None)]
    with pytest.raises(Exception, match="closed"):
        study.trials()


def test_a_failing_search_still_releases_the_lock_and_closes_the_study(tmp_path):
    exp = experiment(tmp_path)
    events = []
    with pytest.raises(RuntimeError, match="the search failed"):
        with open_for_search(exp, tmp_path / "study", log_file=recording_log(events)) as study:
            raise RuntimeError("the search failed")
    assert events[-1] == ("log left", None) and study_lock.holder(tmp_path / "study") is None
    with pytest.raises(Exception, match="closed"):
        study.trials()
    # Another driver takes the study at once.
    with open_for_search(exp, tmp_path / "study") as again:
        assert again.trials() == []


def test_close_false_leaves_the_study_open_for_its_caller_and_unlocked(tmp_path):
    exp = experiment(tmp_path)
    with open_for_search(exp, tmp_path / "study", close=False) as study:
        pass
    assert study.trials() == [] and study_lock.holder(tmp_path / "study") is None
    study.close()
