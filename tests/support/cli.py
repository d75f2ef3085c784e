"""The one set of helpers that write an experiment file and run the CLI, for every test.

Three ways to run a command, one result shape (`subprocess.CompletedProcess`):
- `hpo_here`: `hpo.cli.main` in the test process. For tests whose subject is what a command
  does, not how a process starts; it saves a process start and its TensorFlow import.
- `hpo`: `python -m hpo` in a process of its own, with this checkout first on PYTHONPATH.
- `console_script`: the installed `hpo` script, started in a chosen working folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "experiments" / "smoke.yaml")


def write_experiment(folder: Path, text: str | bytes, name: str = "exp.yaml") -> Path:
    """Write an experiment file (text is dedented; bytes are written as they are)."""
    path = Path(folder) / name
    path.write_bytes(text if isinstance(text, bytes) else textwrap.dedent(text).encode())
    return path


def search_args(experiment, study_dir, *overrides: str) -> list[str]:
    """`search EXPERIMENT --study-dir STUDY_DIR --set A --set B ...`"""
    args = ["search", str(experiment), "--study-dir", str(study_dir)]
    for override in overrides:
        args += ["--set", override]
    return args


def cli_env(columns: int | None = 200, tf_log_level: str | None = "2") -> dict[str, str]:
    """The environment of a CLI process: this checkout first on PYTHONPATH, a fixed terminal
    width (None: the caller's), and TensorFlow's C++ log level (None: as in a user's shell,
    where nobody set it)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if tf_log_level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = tf_log_level
    if columns is not None:
        env["COLUMNS"] = str(columns)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return env


def hpo(*args, timeout: float = 300, columns: int = 200, cwd=ROOT, env=None) -> subprocess.CompletedProcess:
    """`python -m hpo ARGS` in a process of its own."""
    return subprocess.run([sys.executable, "-m", "hpo", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env or cli_env(columns))


def start_hpo(*args) -> subprocess.Popen:
    """`python -m hpo ARGS` started, not waited for (a test that signals or kills it)."""
    return subprocess.Popen([sys.executable, "-m", "hpo", *map(str, args)], cwd=ROOT, env=cli_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def user_cli(*args, cwd) -> subprocess.CompletedProcess:
    """`python -m hpo` as a user runs it: no TF_CPP_MIN_LOG_LEVEL of their own."""
    return hpo(*args, cwd=cwd, env=cli_env(columns=None, tf_log_level=None))


# What TensorFlow's C++ start-up prints unless the CLI keeps it off the console.
STARTUP_LINES = ("failed call to cuInit", "All log messages before absl::InitializeLog()",
                 "Could not find cuda drivers")


def startup_lines(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in STARTUP_LINES if line in done.stdout + done.stderr]


def console_script(*args, cwd, timeout: float = 300) -> subprocess.CompletedProcess:
    """The installed `hpo` console script (not `python -m`), started in `cwd`."""
    return subprocess.run(["hpo", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def hpo_here(capsys, *args) -> subprocess.CompletedProcess:
    """The CLI's entry point called in this test process, with the same result shape as `hpo`.

    Python warnings are not on its stderr (pytest records them)."""
    from hpo.cli import main
    capsys.readouterr()                  # drop what an earlier in-process command printed
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["hpo", *map(str, args)], code, out, err)
