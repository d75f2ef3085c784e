"""SIGTERM (`kill`, what schedulers and container runtimes send) stops a search as Ctrl-C does:
the running trials are marked interrupted, the study is left safe, and a rerun resumes.

`hpo search` turns SIGTERM into Ctrl-C for the whole command (`stop_on_sigterm`). A search run
from Python (`hpo.optimize`, a tuner's `search`, `run_experiment`: each `stops_on_sigterm`)
takes SIGTERM only while it runs, and then, once the study is safe and the call has said how to
resume, ends the process as SIGTERM would have: a script killed mid-search exits with SIGTERM's
status (143 in a shell) and leaves no trial marked running. Only in the main thread (where
Python runs signal handlers) and only where SIGTERM has its default action: a handler of the
caller's own, or an ignored SIGTERM, is left alone.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from typing import Callable, Iterator, TypeVar


class Terminated(KeyboardInterrupt):
    """Raised where SIGTERM lands: a KeyboardInterrupt, so every path that stops a search
    cleanly on Ctrl-C stops it on SIGTERM too; its own type, so the study can say which."""


def interruption(by_sigterm: bool) -> KeyboardInterrupt:
    """What a search stopped by SIGTERM (`Terminated`) or by Ctrl-C raises to its caller once
    the study is safe: a search nested in another's objective is then labelled by its cause."""
    return Terminated("SIGTERM") if by_sigterm else KeyboardInterrupt()


def _raise_terminated(signum, frame):
    raise Terminated("SIGTERM")


def stop_on_sigterm() -> None:
    """For a command-line process: SIGTERM raises `Terminated` from here on (main thread only:
    Python sets signal handlers there alone)."""
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGTERM, _raise_terminated)


@contextlib.contextmanager
def sigterm_stops_search() -> Iterator[None]:
    """While the block runs, the first SIGTERM raises `Terminated`; once the block has ended
    (however it ended), a SIGTERM received takes its default action. A second SIGTERM while
    the first one's interrupt is being handled (trials marked, workers stopped) is only
    counted, so it cannot cut that short."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    received = []

    def terminated(signum, frame):
        received.append(signum)
        if len(received) == 1 and not closing:
            _raise_terminated(signum, frame)

    closing = False
    signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        closing = True
        if signal.getsignal(signal.SIGTERM) is terminated:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if received:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os.kill(os.getpid(), signal.SIGTERM)


Call = TypeVar("Call", bound=Callable)


def stops_on_sigterm(function: Call) -> Call:
    """`function` (a face that runs a search) under `sigterm_stops_search`."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with sigterm_stops_search():
            return function(*args, **kwargs)
    return wrapper  # type: ignore[return-value]
