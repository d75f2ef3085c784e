"""SIGTERM during a search run from Python (`hpo.termination`): what the handler does while the
search runs and after it, and how the process ends. Cases that end the process run in one
of their own."""

import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from hpo.study import Study
from hpo.termination import Terminated, sigterm_stops_search
from tests.support.cli import cli_env


@pytest.fixture
def default_sigterm():
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_the_handler_is_armed_while_the_search_runs_and_restored_however_it_ends(default_sigterm):
    with sigterm_stops_search():
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with pytest.raises(ValueError):
        with sigterm_stops_search():
            raise ValueError("the search failed")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_handler_of_the_callers_own_or_an_ignored_sigterm_is_left_alone(default_sigterm):
    def own(signum, frame):
        pass
    for handler in (own, signal.SIG_IGN):
        signal.signal(signal.SIGTERM, handler)
        with sigterm_stops_search():
            assert signal.getsignal(signal.SIGTERM) is handler
        assert signal.getsignal(signal.SIGTERM) is handler


def test_outside_the_main_thread_nothing_is_installed(default_sigterm):
    seen = []

    def search():
        with sigterm_stops_search():
            seen.append(signal.getsignal(signal.SIGTERM))
    thread = threading.Thread(target=search)
    thread.start()
    thread.join()
    assert seen == [signal.SIG_DFL]


def run_python(code: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=cli_env())


def test_the_process_ends_as_sigterm_ends_it_once_the_block_is_done_and_a_second_one_cuts_nothing_short(tmp_path):
    done = run_python('''
        import signal
        from hpo.termination import Terminated, sigterm_stops_search
        with sigterm_stops_search():
            try:
                signal.raise_signal(signal.SIGTERM)
            except Terminated:
                print("interrupted: marking the running trials")
                signal.raise_signal(signal.SIGTERM)       # a second kill while the first is handled
                print("marked them")
        print("never reached")
    ''', tmp_path)
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert done.stdout.splitlines() == ["interrupted: marking the running trials", "marked them"]


def test_a_search_nested_in_an_objective_passes_sigterm_on_as_sigterm(tmp_path):
    done = run_python('''
        import signal
        import hpo
        SPACE = {"x": {"type": "float", "low": 0, "high": 1}}

        def inner(config, budget):
            signal.raise_signal(signal.SIGTERM)
            return config["x"]

        def outer(config, budget):
            hpo.optimize(inner, SPACE, "random", min_budget=1, max_budget=1, max_trials=2)
            return config["x"]

        hpo.optimize(outer, SPACE, "random", min_budget=1, max_budget=1, max_trials=3, study_dir="outer")
    ''', tmp_path)
    assert done.returncode == -signal.SIGTERM, done.stderr
    study = Study.open(tmp_path / "outer", read_only=True)
    try:
        trials = study.trials()
    finally:
        study.close()
    assert [(t.state.value, t.error) for t in trials] == [("interrupted", "terminated (SIGTERM)")]
    assert issubclass(Terminated, KeyboardInterrupt)
