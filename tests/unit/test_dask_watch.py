"""The Dask driver never waits in silence: joining fails with what to check, and a wait
that goes on is said on the console. In-process and without TensorFlow: cheap."""

import logging
import socket
import threading

import dask
import distributed  # noqa: F401 - its config defaults, before a `dask.config.set` that would drop them on exit
import pytest

from hpo.executors.dask_watch import CallWatch, SchedulerUnreachable, join_scheduler, quiet_trials_note


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_joining_a_scheduler_that_is_not_there_fails_with_the_address_and_what_to_check():
    address = f"tcp://127.0.0.1:{_closed_port()}"
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(SchedulerUnreachable) as caught:
            join_scheduler(address)
    message = str(caught.value)
    assert message.startswith(f"could not join the Dask scheduler at {address}: ")
    assert "distributed.comm.timeouts.connect (1s)" in message and "TLS" not in message


def test_joining_a_tls_scheduler_without_tls_settings_names_them():
    address = f"tls://127.0.0.1:{_closed_port()}"
    with pytest.raises(SchedulerUnreachable) as caught:
        join_scheduler(address)
    assert f"at {address}: TLS expects" in str(caught.value) and "distributed.comm.tls.*" in str(caught.value)


@pytest.fixture
def warnings_said():
    """The warnings `hpo.executors` logs, read at the logger itself: an earlier in-process
    search in this test process may have stopped it from propagating to pytest's caplog."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("hpo.executors")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_a_scheduler_call_that_does_not_return_is_said_and_said_again(warnings_said):
    watch = CallWatch("tls://10.0.0.1:8786", every=0.2)
    released = threading.Event()
    try:
        with watch.call("a read of the trials' event queue"):
            released.wait(0.9)
    finally:
        watch.close()
    said = [r.getMessage() for r in warnings_said if "has not answered" in r.getMessage()]
    assert len(said) >= 2, said
    assert said[0].startswith("the Dask scheduler at tls://10.0.0.1:8786 has not answered a read of the "
                              "trials' event queue for "), said
    assert "check that it runs" in said[0]


def test_a_call_that_returns_in_time_says_nothing(warnings_said):
    watch = CallWatch("tcp://127.0.0.1:8786", every=0.5)
    try:
        for _ in range(3):
            with watch.call("a request for its workers"):
                pass
        threading.Event().wait(0.7)
    finally:
        watch.close()
    assert not [r for r in warnings_said if "has not answered" in r.getMessage()]


def test_quiet_trials_name_the_scheduler_and_what_is_missing():
    none = quiet_trials_note("tls://h:1", trials=2, tasks=1, workers=0, quiet_s=61.2)
    assert none == ("no word from the Dask workers for 61 s: 2 trial(s) in 1 task(s) wait on the scheduler at "
                    "tls://h:1; it has no worker: start one (`dask worker tls://h:1`)")
    some = quiet_trials_note("tls://h:1", trials=2, tasks=1, workers=3, quiet_s=120)
    assert "it has 3 worker(s)" in some and "read the workers' logs" in some
