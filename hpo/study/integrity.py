"""Trust a study database only after checking it; back it up before a resume writes to it.

A study folder whose `study.sqlite` is empty, unreadable, cut short or failing SQLite's
own check is a damaged study, never a new one: it is refused with exit code 2 and left
byte for byte as it was. Before each resume the driver copies the database with SQLite's
online backup to `study.sqlite.bak`, so a damaged study can be restored with one command.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from pathlib import Path

from hpo.errors import UserInputError

BACKUP_SUFFIX = ".bak"
WAL_HEADER_BYTES = 32
WAL_FRAME_HEADER_BYTES = 24


class DamagedStudy(UserInputError):
    """The study database cannot be trusted; nothing was changed."""


# How each face starts anew where a damaged study lies; a tuner says it in its own terms
# (`hpo.tuner.driver.in_python_terms`).
FRESH_ADVICE = "`hpo search EXPERIMENT --fresh`, or fresh=True in hpo.optimize()"


def backup_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + BACKUP_SUFFIX)


def damaged(db_path: Path, what: str) -> DamagedStudy:
    bak = backup_path(db_path)
    restore = (f"restore the backup taken before the last resume (rm -f {db_path}-wal {db_path}-shm && "
               f"cp {bak} {db_path}), or " if bak.exists() else "restore it from a backup, or ")
    return DamagedStudy(f"{db_path}: not a readable study database, it is damaged: {what}. It was left exactly as "
                        f"it is. "
                        f"To go on, {restore}start a new study beside it (the damaged one is moved aside, not "
                        f"deleted): {FRESH_ADVICE}.")


def check_files(db_path: Path) -> None:
    """What can be judged before SQLite touches the files: empty, unreadable, a cut WAL."""
    try:
        size = db_path.stat().st_size
        with open(db_path, "rb") as handle:
            header = handle.read(100)
    except OSError as exc:
        raise damaged(db_path, f"it cannot be read ({exc.strerror})") from None
    if size == 0:
        raise damaged(db_path, "the file is empty (0 bytes), as a truncated copy or a full disk leaves it")
    if not header.startswith(b"SQLite format 3\x00"):
        raise damaged(db_path, "it is not an SQLite database (its header is wrong)")
    wal = db_path.with_name(db_path.name + "-wal")
    try:
        wal_size = wal.stat().st_size
    except FileNotFoundError:
        return
    except OSError as exc:
        raise damaged(db_path, f"its write-ahead log {wal} cannot be read ({exc.strerror})") from None
    if wal_size == 0:
        return
    page_size = _wal_page_size(wal)
    # SQLite silently drops a WAL's torn tail, and with it committed transactions: a log
    # that does not hold whole frames was cut short, so results would vanish without a word.
    if page_size is None or (wal_size - WAL_HEADER_BYTES) % (page_size + WAL_FRAME_HEADER_BYTES) != 0:
        raise damaged(db_path, f"its write-ahead log {wal} is cut short ({wal_size} bytes, not whole frames)")


def _wal_page_size(wal: Path) -> int | None:
    with open(wal, "rb") as handle:
        header = handle.read(WAL_HEADER_BYTES)
    if len(header) < WAL_HEADER_BYTES or struct.unpack(">I", header[:4])[0] not in (0x377F0682, 0x377F0683):
        return None
    page_size = struct.unpack(">I", header[8:12])[0]
    return 65536 if page_size == 1 else page_size


def verify(db: sqlite3.Connection, db_path: Path, schema_version: int) -> None:
    """SQLite's quick_check (every page and index, without the slow cross-checks of
    integrity_check), then the schema version."""
    try:
        problems = [row[0] for row in db.execute("PRAGMA quick_check(5)").fetchall()]
    except sqlite3.DatabaseError as exc:
        raise damaged(db_path, f"SQLite cannot read it ({exc})") from None
    if problems != ["ok"]:
        raise damaged(db_path, "SQLite's integrity check failed: " + "; ".join(problems))
    try:
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.DatabaseError:
        raise damaged(db_path, "it holds no study (no 'meta' table)") from None
    if row is None:
        raise damaged(db_path, "it records no schema version")
    if str(row[0]) != str(schema_version):
        raise UserInputError(f"{db_path}: study schema version {row[0]} is not the version this hpo reads "
                             f"({schema_version}); open it with the hpo that wrote it")


def backup(db: sqlite3.Connection, db_path: Path) -> Path:
    """A consistent copy of the open database at study.sqlite.bak (written beside it, then
    renamed over the old backup, so a kill mid-copy leaves the previous backup whole)."""
    target = backup_path(db_path)
    scratch = target.with_name(target.name + ".tmp")
    scratch.unlink(missing_ok=True)
    copy = sqlite3.connect(scratch)
    try:
        db.backup(copy)
    finally:
        copy.close()
    os.replace(scratch, target)
    return target
