"""Python scripts as users write them, run as real processes with two local workers: no
`if __name__ == "__main__":` guard, a search started at the top level (issue 59, case 1)."""

import contextlib
import re
import signal
import subprocess
import sys
from pathlib import Path

from hpo.study import Study
from tests.support.cli import cli_env

ROOT = Path(__file__).resolve().parents[2]

TOP_LEVEL_SCRIPT = '''
import sys

import keras
from sklearn.datasets import load_digits

import hpo.keras_tuner as kt

print("the script runs", flush=True)


def build_model(hp):
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(hp.Choice("units", [16, 32]), activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile(keras.optimizers.Adam(hp.Float("lr", 1e-3, 1e-2, sampling="log")),
                  "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


x, y = load_digits(return_X_y=True)
x = (x / 16.0).astype("float32")
tuner = kt.Hyperband(build_model, objective="val_accuracy", max_epochs=3, factor=3, seed=0,
                     directory="runs", project_name="top", workers=int(sys.argv[1]))
tuner.search(x[:600], y[:600], validation_data=(x[600:900], y[600:900]), batch_size=32)
print("trials", len(tuner.oracle.trials), sorted({t.status for t in tuner.oracle.trials.values()}))
'''


def run_script(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=400,
                          cwd=path.parent, env=cli_env())


def test_a_top_level_script_without_a_main_guard_runs_with_two_workers_as_with_one(tmp_path):
    script = tmp_path / "search_digits.py"
    script.write_text(TOP_LEVEL_SCRIPT)
    done = run_script(script, "2")
    assert done.returncode == 0, done.stderr[-3000:]
    # The workers never ran the script: it ran (and searched) once, in the driver.
    assert done.stdout.count("the script runs") == 1, done.stdout
    assert "trials 6 ['COMPLETED']" in done.stdout
    assert "[hpo] 6/6 trials finished" in done.stdout
    study = Study.open(tmp_path / "runs" / "top", read_only=True)
    try:
        assert study.experiment()["execution"]["backend"] == "local"
        assert study.experiment()["execution"]["workers"] == 2
        assert all(t.state.value == "complete" for t in study.trials())
    finally:
        study.close()


# The spawn start method (workers with a GPU each, and off Linux), taken here on a CPU machine.
SPAWNED_WORKERS = '''
import multiprocessing

import hpo.executors.local

hpo.executors.local.worker_start_context = lambda *args, **kwargs: multiprocessing.get_context("spawn")
'''


def test_spawned_workers_do_not_run_a_top_level_script_either(tmp_path):
    """A spawned worker runs the parent's __main__ first unless hpo stands in for it while the
    worker starts (hpo.executors.local._hpo_as_main): the script, which searches at the top
    level, must run once, in the driver, as with forked workers."""
    script = tmp_path / "search_digits.py"
    script.write_text(SPAWNED_WORKERS + TOP_LEVEL_SCRIPT)
    done = run_script(script, "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("the script runs") == 1, done.stdout
    assert "trials 6 ['COMPLETED']" in done.stdout


def readme_python_snippet() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("**From Python or a notebook**"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_python_snippet_runs_as_written_with_two_workers_and_no_main_guard(tmp_path):
    snippet = readme_python_snippet()
    assert "workers=2" in snippet and "__main__" not in snippet
    script = tmp_path / "readme_snippet.py"
    script.write_text(snippet + "\nprint('best model', type(best).__name__, len(tuner.oracle.trials))\n")
    done = run_script(script)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"best model \w+ \d+", done.stdout), done.stdout[-2000:]
    study = Study.open(tmp_path / "runs" / "digits", read_only=True)
    try:
        assert study.experiment()["execution"] == {**study.experiment()["execution"], "backend": "local",
                                                   "workers": 2}
        assert study.trials() and all(t.state.value == "complete" for t in study.trials())
    finally:
        study.close()


SLOW_OBJECTIVE_SCRIPT = '''
import time

import hpo


def objective(config, budget):
    time.sleep(0.3)
    return (config["x"] - 0.3) ** 2 + 1 / budget


result = hpo.optimize(objective, {"x": {"type": "float", "low": 0, "high": 1}}, "asha", min_budget=1,
                      max_budget=9, max_trials=12, study_dir="study", workers=2)
print("finished", len(result.trials), result.stopped_because)
'''


def signalled(script: Path, text: str, ready: str, what: str, signal_number: int) -> tuple[int, str]:
    """Run `text` as `script` until the query `ready` finds a row in its study, send it
    `signal_number`, and return its exit status and standard error; the child never outlives
    the test."""
    from tests.support.faults import query, wait_for
    # Where a driver that outlives the signal is stuck, should one ever: SIGUSR1 prints every
    # thread's stack (the script's behaviour is otherwise the user's, untouched).
    script.write_text(STACKS_ON_SIGUSR1 + text)
    driver = subprocess.Popen([sys.executable, str(script)], cwd=script.parent, env=cli_env(), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_sigint_as_in_a_terminal)
    try:
        wait_for(lambda: query(script.parent / "study", ready), what=what, process=driver)
        driver.send_signal(signal_number)
        try:
            _, err = driver.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            driver.send_signal(signal.SIGUSR1)
            with contextlib.suppress(subprocess.TimeoutExpired):
                driver.wait(5)
            driver.kill()
            _, err = driver.communicate()
            raise AssertionError(f"the driver did not end within 60 s of signal {signal_number}; its stacks:\n"
                                 f"{err[-6000:]}") from None
    finally:
        driver.kill()       # a no-op once it ended
    return driver.returncode, err


def _sigint_as_in_a_terminal() -> None:
    """In the script's process, before it starts: SIGINT at its default action, as a script
    started from a terminal has it. A test run started in the background by a shell without
    job control (`cmd &` in a script) has SIGINT ignored, its children inherit that, and
    Python leaves an inherited SIG_IGN in place: Ctrl-C would never reach the script."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


STACKS_ON_SIGUSR1 = "import faulthandler, signal\nfaulthandler.register(signal.SIGUSR1, all_threads=True)\n"


def test_sigterm_stops_an_optimize_script_with_its_study_safe_and_the_same_script_resumes(tmp_path):
    script, study_dir = tmp_path / "search.py", tmp_path / "study"
    code, err = signalled(script, SLOW_OBJECTIVE_SCRIPT,
                          "SELECT 1 FROM trials WHERE state='running' AND EXISTS "
                          "(SELECT 1 FROM trials WHERE state='complete')",
                          "a finished trial and a running one", signal.SIGTERM)
    # Ended by SIGTERM (as `kill` expects), once the running trials were marked.
    assert code == -signal.SIGTERM, err[-2000:]
    study = Study.open(study_dir, read_only=True)
    try:
        trials = study.trials()
    finally:
        study.close()
    assert "running" not in {t.state.value for t in trials}
    interrupted = [t for t in trials if t.state.value == "interrupted"]
    assert interrupted and all(t.error == "terminated (SIGTERM)" for t in interrupted), [t.error for t in trials]
    done = run_script(script)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "finished 12 max_trials" in done.stdout, done.stdout


BLOCKING_OBJECTIVE_SCRIPT = '''
import threading

import hpo


def objective(config, budget):
    threading.Event().wait()        # a call that never returns: only the process's end stops it
    return config["x"]


hpo.optimize(objective, {"x": {"type": "float", "low": 0, "high": 1}}, "random", min_budget=1, max_budget=1,
             max_trials=4, study_dir="study", workers=2)
'''


def test_ctrl_c_ends_a_script_whose_threads_are_still_calling_the_objective(tmp_path):
    from tests.support.faults import query
    # The two calls never return: the script ends all the same, its study safe, as with one worker.
    code, err = signalled(tmp_path / "search.py", BLOCKING_OBJECTIVE_SCRIPT,
                          "SELECT COUNT(*) FROM trials WHERE state='running' HAVING COUNT(*) = 2",
                          "two running trials", signal.SIGINT)
    assert code == -signal.SIGINT and err.rstrip().endswith("KeyboardInterrupt"), err[-2000:]
    assert "Exception ignored" not in err, err[-2000:]
    stopped = ("interrupted", "interrupted by the user (Ctrl-C)")
    assert query(tmp_path / "study", "SELECT state, error FROM trials") == [stopped] * 2
