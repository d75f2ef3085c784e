"""What the Dask driver waits for, said on the console: it never waits in silence.

Joining a scheduler ends within Dask's connect timeout, with one line naming the address
and what to check. Once joined, waiting is not an error (a worker that imports TensorFlow on
a loaded machine, or one that has yet to join, may take minutes), so the driver says every
`QUIET_SECONDS` what it waits for: trials that have sent no word, or a scheduler call that
has not returned (a blocked call cannot speak for itself, so a watcher thread says it).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

log = logging.getLogger("hpo.executors")

QUIET_SECONDS = 60.0      # how long the driver waits in silence before it says what it waits for


class SchedulerUnreachable(RuntimeError):
    """The driver could not join the Dask scheduler."""


def join_scheduler(address: str):
    """A `Client` of the scheduler at `address`, or `SchedulerUnreachable` with what to check.
    The wait is Dask's connect timeout (`distributed.comm.timeouts.connect`)."""
    import dask
    from distributed import Client

    timeout = dask.config.get("distributed.comm.timeouts.connect")
    try:
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError, TypeError, ValueError) as exc:     # TypeError: tls:// with no TLS settings
        tls = ", and Dask's TLS settings (distributed.comm.tls.*)" if address.startswith("tls://") else ""
        raise SchedulerUnreachable(
            f"could not join the Dask scheduler at {address}: {exc}. Check that it runs, that this machine "
            f"reaches it{tls}; a slow cluster may need more than distributed.comm.timeouts.connect "
            f"({timeout})") from exc


def quiet_trials_note(address: str, trials: int, tasks: int, workers: int, quiet_s: float) -> str:
    """The line the driver logs when its trials have sent no word for `quiet_s` seconds."""
    if workers == 0:
        what = f"it has no worker: start one (`dask worker {address}`)"
    else:
        what = (f"it has {workers} worker(s); a worker's first trial imports TensorFlow and loads the data, "
                f"slow on a loaded machine; if this goes on, read the workers' logs")
    return (f"no word from the Dask workers for {quiet_s:.0f} s: {trials} trial(s) in {tasks} task(s) "
            f"wait on the scheduler at {address}; {what}")


class CallWatch:
    """Logs a warning every `QUIET_SECONDS` while a scheduler call has not returned."""

    def __init__(self, address: str, every: float = QUIET_SECONDS):
        self.address = address
        self._every = every
        self._call: tuple[str, float] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="hpo-dask-call-watch", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def call(self, what: str):
        self._call = (what, time.monotonic())
        try:
            yield
        finally:
            self._call = None

    def close(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        said_for, said_at = None, 0.0
        while not self._stop.wait(min(5.0, self._every / 4)):
            call = self._call
            if call is None:
                continue
            waited = time.monotonic() - call[1]
            if waited >= self._every and (said_for is not call or waited - said_at >= self._every):
                said_for, said_at = call, waited
                log.warning("the Dask scheduler at %s has not answered %s for %.0f s; check that it runs and "
                            "that its log shows no error (a scheduler whose output nobody reads can block)",
                            self.address, call[0], waited)
