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
# Python's own stderr output (a warning, a traceback) is never a record's continuation.
_PYTHON_OUTPUT = re.compile(rb"^(Traceback |\S+\.py:\d+: )")
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
def filtered_stderr(level: int | None = None):
    """Route file descriptor 2 through `kept_lines` for the duration."""
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
        thread.join(timeout=10)
        if not thread.is_alive():
            os.close(original)


def import_tensorflow():
    """`import tensorflow`, with its start-up log lines filtered (see the module docstring).
    Also lists the GPUs, whose driver probe logs too; a later import is free."""
    with filtered_stderr():
        import tensorflow as tf
        tf.config.list_physical_devices("GPU")
    return tf
