"""The one-driver lock: an OS lock (`fcntl.flock`) on `study.lock`, held for the driver's life.

The operating system releases the lock when its process dies, however it dies, so a lock
is never guessed stale from a pid. The pid is written into the file only so that the
refusal can name the holder. The file is never deleted: deleting it would let a process
that already opened the old file and one that creates a new file both hold "the" lock.

flock works between processes on one machine. On NFS, Linux emulates it with byte-range
locks (NFSv4) or not at all, so a study folder belongs on a local disk.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpo.errors import UserInputError

LOCK_NAME = "study.lock"
READER_RETRY_S = (0.005, 0.01, 0.02, 0.05)


class StudyLocked(UserInputError):
    """Another process is running this study."""


@dataclass
class DriverLock:
    path: Path
    fd: int
    holders: int = field(default=1)


# Locks this process holds, by real path: flock refuses a second open file of the same
# process too, so a second Study object in the driver shares the first one's lock.
_HELD: dict[str, DriverLock] = {}


def acquire(directory: Path) -> DriverLock:
    """Take the study's lock without waiting; StudyLocked names the process that holds it."""
    path = Path(directory) / LOCK_NAME
    key = os.path.realpath(path)
    held = _HELD.get(key)
    if held is not None:
        held.holders += 1
        return held
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        _flock_exclusive(fd)
    except BlockingIOError:
        pid = _pid_in(fd)
        os.close(fd)
        who = f"process {pid}" if pid else "another process"
        raise StudyLocked(f"{Path(directory)}: this study is being run by {who} (it holds the lock on {path}); "
                          f"wait for it to finish or stop it first. Nothing was changed.") from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    lock = _HELD[key] = DriverLock(path=path, fd=fd)
    return lock


def _flock_exclusive(fd: int) -> None:
    """LOCK_EX without waiting on a driver, but past a reader's brief shared lock (`holder`
    takes one for microseconds): a few short retries before BlockingIOError."""
    for delay in READER_RETRY_S:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(delay)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def release(lock: DriverLock) -> None:
    lock.holders -= 1
    if lock.holders > 0:
        return
    _HELD.pop(os.path.realpath(lock.path), None)
    try:
        os.ftruncate(lock.fd, 0)     # while still held: nobody reads a pid that is gone
    finally:
        os.close(lock.fd)            # closing the last descriptor releases the flock


def holder(directory: Path) -> int | None:
    """The pid of the process running this study (0 when it wrote none yet), or None when
    no process holds the lock. Opens the file read-only and never creates it."""
    path = Path(directory) / LOCK_NAME
    if os.path.realpath(path) in _HELD:
        return os.getpid()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _pid_in(fd) or 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _pid_in(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip() or 0) or None
    except (OSError, ValueError):
        return None
