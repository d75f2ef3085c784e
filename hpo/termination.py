"""SIGTERM (`kill`, what schedulers and container runtimes send) stops a search as Ctrl-C does:
the running trials are marked interrupted, the study is left safe, and a rerun resumes.

`hpo search` turns SIGTERM into Ctrl-C for the whole command (`stop_on_sigterm`). A search run
from Python (`hpo.optimize`, the tuners, `run_experiment`) takes SIGTERM only while it runs
(`sigterm_stops_search`), and then ends the process as SIGTERM would have, once the study is
safe: a script killed mid-search exits with SIGTERM's status (143 in a shell) rather than
Python's, and leaves no trial marked running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Iterator


class Terminated(KeyboardInterrupt):
    """Raised where SIGTERM lands: a KeyboardInterrupt, so every path that stops a search
    cleanly on Ctrl-C stops it on SIGTERM too; its own type, so the study can say which."""


def _raise_terminated(signum, frame):
    raise Terminated("SIGTERM")


def stop_on_sigterm() -> None:
    """For a command-line process: SIGTERM raises `Terminated` from here on (main thread only:
    Python sets signal handlers there alone)."""
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGTERM, _raise_terminated)


@contextlib.contextmanager
def sigterm_stops_search() -> Iterator[None]:
    """While the block runs, SIGTERM raises `Terminated`; if one did, SIGTERM's default action
    is taken once the block has ended (however it ended). Only in the main thread and only
    where SIGTERM has its default action: a handler of the caller's own (or the CLI's) is
    left alone."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    received = []

    def terminated(signum, frame):
        received.append(signum)
        _raise_terminated(signum, frame)

    signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is terminated:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if received:
            os.kill(os.getpid(), signal.SIGTERM)
