"""TensorFlow's own start-up log lines, filtered by `TF_CPP_MIN_LOG_LEVEL` as TensorFlow
used to.

TensorFlow 2.21 logs through Abseil, and Abseil writes every message logged before
`absl::InitializeLog()` to stderr whatever its severity. So `import tensorflow` prints a
dozen INFO lines (oneDNN, CUDA stubs, CPU features) in every process, each worker of a
search included, and `TF_CPP_MIN_LOG_LEVEL` no longer silences them (tensorflow PR
#102212, abseil-cpp PR #1957). `import_tensorflow()` imports TensorFlow and lets it look
for devices with file descriptor 2 routed through a filter that drops the records below
the level asked for (INFO, WARNING and ERROR are 0, 1 and 2, as before) with their
continuation lines, and Abseil's notice about it. Anything else written to stderr in that
window, Python's own output included, passes through unchanged and in order.

A CLI command runs inside `cli_native_logs(verbose)`: without `-v`, and unless the user set
`TF_CPP_MIN_LOG_LEVEL`, every TensorFlow record short of FATAL is dropped (the CUDA probe's
`failed call to cuInit` is an ERROR on every machine without a GPU), from this process and
from the processes it starts (workers, TensorBoard), whichever module imports TensorFlow
first. Python's own writes to `sys.stderr` go straight to the terminal, so the console
keeps its colours and live progress bar.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from typing import Iterator

# An Abseil/glog record: severity letter, MMDD, then a space ("I0000 00:00:17953...").
_RECORD = re.compile(rb"^([IWEF])\d{4} ")
# Python's own stderr output (a warning, a traceback, a program's "ERROR: ..." such as
# TensorBoard's when its port is taken) is never a record's continuation.
_PYTHON_OUTPUT = re.compile(rb"^(Traceback |\S+\.py:\d+: |ERROR: )")
_ABSL_NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}


def min_log_level() -> int:
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def kept_lines(lines: Iterator[bytes], level: int) -> Iterator[bytes]:
    """The lines of a stderr stream that survive `level`: records below it are dropped with
    the lines that continue them (up to the next record or blank line)."""
    dropping = False
    for line in lines:
        if line.rstrip(b"\r\n") == _ABSL_NOTICE:
            continue
        record = _RECORD.match(line)
        if record:
            dropping = _SEVERITY[record.group(1)] < level
        elif not line.strip() or _PYTHON_OUTPUT.match(line):
            dropping = False
        if not dropping:
            yield line


@contextlib.contextmanager
def filtered_stderr(level: int | None = None, wait: float = 10.0):
    """Route file descriptor 2 through `kept_lines` for the duration. `wait`: how long to
    wait at the end for the filter to pass on what is left (a child process that outlives
    the block keeps the pipe open)."""
    level = min_log_level() if level is None else level
    if level <= 0:
        yield
        return
    sys.stderr.flush()
    original = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for line in kept_lines(iter(pipe.readline, b""), level):
                os.write(original, line)

    thread = threading.Thread(target=forward, name="stderr-filter", daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)       # the pipe's last write end closes: the filter reads to its end
        thread.join(timeout=wait)
        if not thread.is_alive():
            os.close(original)


QUIET_LEVEL = 3       # drop INFO, WARNING and ERROR records; keep FATAL


@contextlib.contextmanager
def cli_native_logs(verbose: bool = False):
    """The CLI's setting for TensorFlow's native log lines, for the duration of a command
    (see the module docstring). `verbose` shows them at the level the user set (default all)."""
    if verbose or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        yield
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = str(QUIET_LEVEL)     # children inherit it, and `filtered_stderr`
    python_stderr = sys.stderr
    direct = None
    try:
        if python_stderr is not None and python_stderr.fileno() == 2:
            # Python's own output bypasses the filter: same terminal, written in order, isatty kept.
            direct = open(os.dup(2), "w", encoding=python_stderr.encoding, errors=python_stderr.errors,
                          buffering=1)
    except (AttributeError, OSError, ValueError):   # a replaced stream (pytest's capture): leave it
        direct = None
    try:
        if direct is not None:
            sys.stderr = direct
        with filtered_stderr(QUIET_LEVEL, wait=2.0):
            yield
    finally:
        if direct is not None:
            sys.stderr = python_stderr
            direct.close()
        os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)


def import_tensorflow():
    """`import tensorflow`, with its start-up log lines filtered (see the module docstring).
    Also lists the GPUs, whose driver probe logs too; a later import is free."""
    with filtered_stderr():
        import tensorflow as tf
        tf.config.list_physical_devices("GPU")
    return tf
