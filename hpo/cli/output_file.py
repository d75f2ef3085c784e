"""Where the commands that read a study write what they export (`hpo export -o FILE`, `hpo best
--export MODEL.keras`): outside the study they read, and whole or not at all.

A command that only reads a study changes no byte of it, so its output may not be one of the
study's files (the database, its -wal, -shm and .bak, hpo.log, study.lock, a checkpoint), nor
anything else in the study folder, whichever way the path reaches it (a symlink, `..`). A file
is written beside its target under a temporary name and renamed over it once whole: a failed
write leaves no half file, and a hard link to a study file elsewhere is replaced, never
written through.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import Iterator

from hpo.errors import UserInputError


def checked_output(study_dir: str | os.PathLike, output: str | os.PathLike, *, make_folder: bool = False) -> Path:
    """`output` with its symlinks and `..` resolved, once it is known to lie outside the study
    folder and in a folder that exists (or, with `make_folder`, that can be made); exit 2 otherwise.
    A pipe or a device (`-o /dev/stdout`, `-o /dev/null`, a FIFO) is no study file and is
    written as it is, unresolved: /dev/stdout resolves to a /proc path that cannot be opened."""
    given = Path(output)
    with contextlib.suppress(OSError):
        if not stat.S_ISREG(given.stat().st_mode) and not stat.S_ISDIR(given.stat().st_mode):
            return given
    target = given.resolve()
    study = Path(study_dir).resolve()
    seen_as = "" if target == given.absolute() else f" (that is {target})"
    if target == study or study in target.parents:
        raise UserInputError(f"{given}{seen_as}: that is inside the study folder {study_dir}, and an export "
                             f"never writes into the study it reads; choose a path outside it")
    if target.is_dir():
        raise UserInputError(f"{given}{seen_as}: that is a folder; expected a file name")
    folder = target.parent
    if not folder.is_dir():
        existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():
            raise UserInputError(f"{given}: cannot write there: {existing} is a file, not a folder")
        if not make_folder or existing is None:
            raise UserInputError(f"{given}: cannot write there: the folder {folder} does not exist")
        folder = existing
    if not os.access(folder, os.W_OK):
        raise UserInputError(f"{given}: cannot write there: the folder {folder} is not writable")
    return target


@contextlib.contextmanager
def written_whole(target: Path, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path beside `target` (ending in `suffix`) for the block to write; renamed over
    `target` when the block ends without an error, else removed. A target that exists and is no
    regular file (a pipe, /dev/stdout) is written as it is: there is nothing to rename over."""
    if target.exists() and not stat.S_ISREG(target.stat().st_mode):
        yield target
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserInputError(f"{target}: cannot write there ({exc.strerror})") from None
    temporary = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}{suffix}")
    try:
        yield temporary
        with contextlib.suppress(FileNotFoundError):       # a file replaced keeps its permissions
            os.chmod(temporary, stat.S_IMODE(target.stat().st_mode))
        os.replace(temporary, target)
    except OSError as exc:
        raise UserInputError(f"{target}: cannot write there ({exc.strerror or exc})") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def write_text(target: Path, text: str) -> None:
    """`text` into `target`, whole or not at all (`written_whole`)."""
    with written_whole(target) as path, open(path, "w" if path == target else "x") as handle:
        handle.write(text)
