"""The study store: one SQLite file, the single source of truth of a search.

Only the driver writes. Every ask and every tell goes into an append-only event log in
the same transaction as the trial row it changes, so a kill between two writes leaves
the two consistent, and replaying the log rebuilds the searcher exactly.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from hpo.errors import UserInputError
from hpo.study import integrity as study_integrity
from hpo.study import lock as study_lock
from hpo.study.lock import LOCK_NAME  # noqa: F401 - re-exported: the lock file's name
from hpo.trial import Job, TrialResult, TrialState

SCHEMA_VERSION = 1
DB_NAME = "study.sqlite"

# `best` and `count` run after every trial: ordered by these, they read a few index entries
# instead of every row (at 10,000 trials a scan took 6 ms, the index 0.01 ms;
# benchmarks/decision_time.py). Made when a study is created, and when an older one is
# opened for writing.
_INDEXES = ("CREATE INDEX IF NOT EXISTS trials_best_min ON trials (state, budget DESC, value ASC)",
            "CREATE INDEX IF NOT EXISTS trials_best_max ON trials (state, budget DESC, value DESC)")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
    trial_id INTEGER PRIMARY KEY,
    lineage INTEGER NOT NULL,          -- first trial of this config; names its TensorBoard run
    config TEXT NOT NULL,
    budget REAL NOT NULL,
    continues INTEGER,
    bracket INTEGER,
    rung INTEGER,
    state TEXT NOT NULL,
    value REAL,
    metrics TEXT,
    error TEXT,
    epochs_trained REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL
);
CREATE TABLE IF NOT EXISTS epochs (
    trial_id INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    metrics TEXT NOT NULL,
    recorded_at REAL NOT NULL,
    PRIMARY KEY (trial_id, epoch)
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,                -- 'ask' | 'tell' | 'total_budget' (trial_id -1: the searcher told it)
    trial_id INTEGER NOT NULL,
    payload TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS compile_choices (
    signature TEXT PRIMARY KEY,
    mode TEXT NOT NULL,
    detail TEXT
);
""" + "\n".join(f"{statement};" for statement in _INDEXES)


CHECKPOINT_FOLDER = "checkpoints"      # in the study's folder: one file per trial (`trial_checkpoint`)


def trial_checkpoint(study_dir: str | os.PathLike, trial_id: int) -> Path:
    """Where trial `trial_id` of the study in `study_dir` keeps its last epoch's state (its
    best epoch's beside it: `hpo.training.best_epoch`): a path only, so a reader of one
    checkpoint need not open the study."""
    return Path(study_dir) / CHECKPOINT_FOLDER / f"trial_{trial_id:04d}.npz"


@dataclass(frozen=True)
class TrialRow:
    trial_id: int
    lineage: int
    config: dict[str, Any]
    budget: float
    continues: int | None
    bracket: int | None
    rung: int | None
    state: TrialState
    value: float | None
    metrics: dict[str, float]
    error: str | None
    epochs_trained: float
    attempts: int
    created_at: float
    started_at: float | None
    finished_at: float | None

    @property
    def job(self) -> Job:
        return Job(trial_id=self.trial_id, config=self.config, budget=self.budget,
                   continues=self.continues, bracket=self.bracket, rung=self.rung)

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at


class Study:
    """One study folder. `Study.open` checks the database before trusting it; a study
    opened `read_only` can neither create nor change a database, and shows the running
    trials of a driver that no longer holds the lock as interrupted."""

    def __init__(self, directory: Path, connection: sqlite3.Connection, *, read_only: bool = False):
        self.dir = Path(directory)
        self._db = connection
        self.read_only = read_only
        self._lock: study_lock.DriverLock | None = None
        # Where the trial and epoch timestamps come from: wall time, or a simulation's clock (hpo.clock).
        self.clock: Callable[[], float] = time.time
        # Derived once, when reading: a driver that died (kill -9) never marked its trials.
        self._driver_gone = read_only and study_lock.holder(self.dir) is None
        # The experiment a resume replaced (`hpo.study.resume`): stored again if the replay fails.
        self.replaced_experiment: Mapping[str, Any] | None = None

    # --- opening ------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: str | Path, experiment: Mapping[str, Any]) -> "Study":
        directory = Path(directory)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            probe = directory / ".write-test"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise UserInputError(f"{directory}: cannot write the study folder there ({exc.strerror}); "
                                 f"choose another with --study-dir or output.dir") from None
        path = directory / DB_NAME
        if path.exists():
            raise FileExistsError(path)
        # Built under another name and renamed into place once whole: a driver killed part-way
        # through creating leaves no half-made study.sqlite, which would read as damaged.
        staging = directory / f"{DB_NAME}.new"
        for leftover in (staging, Path(f"{staging}-wal"), Path(f"{staging}-shm")):
            leftover.unlink(missing_ok=True)
        db = _connect(staging)
        try:
            db.executescript(_SCHEMA)
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            db.execute("INSERT INTO meta VALUES ('experiment', ?)", (json.dumps(experiment, sort_keys=True),))
            db.execute("INSERT INTO meta VALUES ('created_at', ?)", (repr(time.time()),))
            # The experiment is stored with sorted keys; the searchers draw parameters in the
            # space's own order, which a resume must keep (`space_order`).
            db.execute("INSERT INTO meta VALUES ('space_order', ?)", (json.dumps(list(experiment.get("space") or {})),))
            db.execute("COMMIT")
        finally:
            db.close()          # the last connection: SQLite checkpoints the log into the file
        os.replace(staging, path)
        return cls(directory, _connect(path, mode="rw"))

    @classmethod
    def open(cls, directory: str | Path, *, read_only: bool = False, lock_held: bool = False) -> "Study":
        """An existing study, after `PRAGMA quick_check` and the schema-version check. Never
        creates a database: a missing, empty or damaged one is a UserInputError (exit 2)
        and its files are left as they were. `lock_held`: the caller has just taken the
        driver lock itself and nothing of its process writes the study, so no one can
        write the file while this study reads it (`hpo.study.resume` deciding to resume)."""
        directory = Path(directory)
        path = directory / DB_NAME
        if not path.exists():
            raise UserInputError(f"{directory}: no study here (expected {path}); run `hpo search` first")
        study_integrity.check_files(path)
        # Checked through a read-only connection: closing a writable one on a damaged file
        # could checkpoint its log into it, and the file must stay as it was. With no driver
        # running (or only the caller, who has written nothing yet) and no log to read, SQLite
        # may treat the file as immutable, and then creates no -wal and -shm beside it: a
        # command that only reads, or a search refused before it writes, adds no file.
        no_driver_writes = lock_held or study_lock.holder(directory) is None
        at_rest = no_driver_writes and not _has_log(path)
        try:
            db = _verified_connection(path, immutable=at_rest)
        except (study_integrity.DamagedStudy, sqlite3.DatabaseError):
            if not at_rest or lock_held:    # under the caller's own lock no driver can have started
                raise
            # A driver that started after the look at the lock writes pages an immutable
            # connection does not expect to change: what reads as damage then may be none.
            db = _verified_connection(path, immutable=False)
        study = cls(directory, db, read_only=True)
        if not read_only:
            study.make_writable()
        return study

    def make_writable(self) -> None:
        """Reopen a study that passed its checks read-only for writing: the driver decides
        to resume on a read-only connection, so a refusal leaves every file as it was."""
        if self.read_only:
            self._db.close()
            self._db = _connect(self.dir / DB_NAME, mode="rw")
            self.read_only = False
            self._driver_gone = False
            for statement in _INDEXES:
                self._db.execute(statement)

    def backup(self) -> Path:
        """A consistent copy at study.sqlite.bak (SQLite's online backup): taken before a resume."""
        return study_integrity.backup(self._db, self.dir / DB_NAME)

    def close(self) -> None:
        self.release_driver_lock()
        self._db.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # --- folders ------------------------------------------------------------------------
    @property
    def tensorboard_dir(self) -> Path:
        return self.dir / "tensorboard"

    @property
    def checkpoint_dir(self) -> Path:
        return self.dir / CHECKPOINT_FOLDER

    def checkpoint(self, trial_id: int) -> Path:
        """Where trial `trial_id`'s last epoch's state is kept (`trial_checkpoint`)."""
        return trial_checkpoint(self.dir, trial_id)

    @property
    def log_path(self) -> Path:
        return self.dir / "hpo.log"

    # --- metadata -----------------------------------------------------------------------
    def data_fingerprint(self) -> str | None:
        """How the loader split its examples when the study started (`Dataset.fingerprint`)."""
        row = self._db.execute("SELECT value FROM meta WHERE key='data_fingerprint'").fetchone()
        return None if row is None else row[0]

    def record_data_fingerprint(self, fingerprint: str) -> None:
        """Keep the first fingerprint: a resume compares against it (a study made before
        studies kept one takes its first resume's)."""
        with self._transaction() as db:
            db.execute("INSERT OR IGNORE INTO meta VALUES ('data_fingerprint', ?)", (fingerprint,))

    def experiment(self) -> dict[str, Any]:
        row = self._db.execute("SELECT value FROM meta WHERE key='experiment'").fetchone()
        return json.loads(row[0])

    def input_shape(self) -> tuple[int, ...] | None:
        """One example's input shape as the search saw it (where its face records it: a
        model built without keras.Input is rebuilt from it)."""
        row = self._db.execute("SELECT value FROM meta WHERE key='input_shape'").fetchone()
        return None if row is None else tuple(json.loads(row[0]))

    def record_input_shape(self, shape: tuple[int, ...]) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES ('input_shape', ?)", (json.dumps(list(shape)),))

    def space_order(self) -> list[str] | None:
        """The space's parameters in the order the study was created with (None: a study made
        before studies kept it)."""
        row = self._db.execute("SELECT value FROM meta WHERE key='space_order'").fetchone()
        return None if row is None else json.loads(row[0])

    def replace_experiment(self, experiment: Mapping[str, Any]) -> None:
        """Store the resumable parts that changed (max_trials, execution, ...)."""
        with self._transaction() as db:
            db.execute("UPDATE meta SET value=? WHERE key='experiment'", (json.dumps(experiment, sort_keys=True),))

    # --- writes -------------------------------------------------------------------------
    def record_ask(self, job: Job) -> int:
        """Insert the trial and its 'ask' event; returns the lineage (TensorBoard run) id."""
        lineage = job.trial_id
        if job.continues is not None:
            row = self._db.execute("SELECT lineage FROM trials WHERE trial_id=?", (job.continues,)).fetchone()
            if row is not None:
                lineage = row[0]
        with self._transaction() as db:
            db.execute("INSERT INTO trials (trial_id, lineage, config, budget, continues, bracket, rung, state,"
                       " created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                       (job.trial_id, lineage, json.dumps(dict(job.config), sort_keys=True), job.budget,
                        job.continues, job.bracket, job.rung, TrialState.PENDING.value, self.clock()))
            db.execute("INSERT INTO events (kind, trial_id, payload) VALUES ('ask', ?, ?)",
                       (job.trial_id, json.dumps(job.to_dict(), sort_keys=True)))
        return lineage

    def mark_running(self, trial_id: int) -> None:
        with self._transaction() as db:
            db.execute("UPDATE trials SET state=?, started_at=?, attempts=attempts+1 "
                       "WHERE trial_id=?", (TrialState.RUNNING.value, self.clock(), trial_id))

    def record_epoch(self, trial_id: int, epoch: int, metrics: Mapping[str, float]) -> None:
        """A rerun reports from where it restarted (its parent's or its own checkpoint):
        epochs from that point on, left by an earlier attempt, are dropped as it passes."""
        with self._transaction() as db:
            db.execute("DELETE FROM epochs WHERE trial_id=? AND epoch>=?", (trial_id, epoch))
            db.execute("INSERT INTO epochs VALUES (?,?,?,?)",
                       (trial_id, epoch, json.dumps(_finite(metrics)), self.clock()))

    def record_result(self, job: Job, result: TrialResult, epochs_trained: float = 0.0) -> None:
        """Finish a trial and append its 'tell' event atomically."""
        value = result.value if result.value is not None and math.isfinite(result.value) else None
        with self._transaction() as db:
            db.execute("UPDATE trials SET state=?, value=?, metrics=?, error=?, epochs_trained=?, finished_at=? "
                       "WHERE trial_id=?",
                       (result.state.value, value, json.dumps(_finite(result.metrics)), result.error,
                        epochs_trained, self.clock(), job.trial_id))
            db.execute("INSERT INTO events (kind, trial_id, payload) VALUES ('tell', ?, ?)",
                       (job.trial_id, json.dumps(result.to_dict(), sort_keys=True)))

    def record_total_budget(self, total_budget: float | None) -> None:
        """The searcher was told `search.total_budget` here, between the asks and tells around it,
        so that a replay tells it at the same point."""
        with self._transaction() as db:
            db.execute("INSERT INTO events (kind, trial_id, payload) VALUES ('total_budget', -1, ?)",
                       (json.dumps({"total_budget": total_budget}),))

    def mark_retrying(self, trial_id: int, reason: str) -> None:
        """An attempt was lost (its worker died); the trial waits to run again."""
        with self._transaction() as db:
            db.execute("UPDATE trials SET state=?, error=? WHERE trial_id=?",
                       (TrialState.PENDING.value, reason, trial_id))

    def mark_interrupted(self, trial_id: int, reason: str) -> None:
        with self._transaction() as db:
            db.execute("UPDATE trials SET state=?, error=? WHERE trial_id=? AND state IN (?, ?)",
                       (TrialState.INTERRUPTED.value, reason, trial_id, TrialState.RUNNING.value,
                        TrialState.PENDING.value))

    # The trainer's CompileChoices protocol (hpo.training.compile_mode): the measured compile
    # mode per architecture, kept here so later trials and resumed searches skip measuring.
    def record_compile_choice(self, key: str, mode: str, detail: Mapping[str, Any]) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO compile_choices VALUES (?,?,?)", (key, mode, json.dumps(detail)))

    def compile_choice(self, key: str) -> tuple[str, dict[str, Any]] | None:
        row = self._db.execute("SELECT mode, detail FROM compile_choices WHERE signature=?", (key,)).fetchone()
        return None if row is None else (row[0], json.loads(row[1] or "{}"))

    def compile_choices(self) -> dict[str, tuple[str, dict[str, Any]]]:
        rows = self._db.execute("SELECT signature, mode, detail FROM compile_choices").fetchall()
        return {key: (mode, json.loads(detail or "{}")) for key, mode, detail in rows}

    # --- reads --------------------------------------------------------------------------
    def events(self) -> list[tuple[str, int, dict[str, Any]]]:
        rows = self._db.execute("SELECT kind, trial_id, payload FROM events ORDER BY seq").fetchall()
        return [(kind, trial_id, json.loads(payload)) for kind, trial_id, payload in rows]

    def trials(self, trial_id: int | None = None) -> list[TrialRow]:
        """All trials in id order, or just the one with `trial_id`."""
        where, args = ("WHERE trial_id=?", (trial_id,)) if trial_id is not None else ("", ())
        rows = self._db.execute("SELECT trial_id, lineage, config, budget, continues, bracket, rung, state, value,"
                                " metrics, error, epochs_trained, attempts, created_at, started_at, finished_at"
                                f" FROM trials {where} ORDER BY trial_id", args).fetchall()
        return [TrialRow(trial_id=r[0], lineage=r[1], config=json.loads(r[2]), budget=r[3], continues=r[4],
                         bracket=r[5], rung=r[6], state=self._shown_state(TrialState(r[7])), value=r[8],
                         metrics=json.loads(r[9]) if r[9] else {}, error=r[10], epochs_trained=r[11],
                         attempts=r[12], created_at=r[13], started_at=r[14], finished_at=r[15])
                for r in rows]

    def _shown_state(self, state: TrialState) -> TrialState:
        if self._driver_gone and state == TrialState.RUNNING:
            return TrialState.INTERRUPTED
        return state

    def trial(self, trial_id: int) -> TrialRow | None:
        rows = self.trials(trial_id)
        return rows[0] if rows else None

    def epochs(self, trial_id: int | None = None) -> list[tuple[int, int, dict[str, float]]]:
        query = "SELECT trial_id, epoch, metrics FROM epochs"
        args: tuple = ()
        if trial_id is not None:
            query += " WHERE trial_id=?"
            args = (trial_id,)
        rows = self._db.execute(query + " ORDER BY trial_id, epoch", args).fetchall()
        return [(t, e, json.loads(m)) for t, e, m in rows]

    def best(self, direction: str) -> TrialRow | None:
        """Best complete trial, preferring the largest budget any complete trial reached; by
        budget and value alone, so the best of a study without constraints: every reader asks
        `hpo.study.ranking.best_in`, which ranks by constraints too and takes this SQL, which
        decodes one row rather than every trial, where there are none."""
        order = "DESC" if direction == "maximize" else "ASC"
        row = self._db.execute(
            "SELECT trial_id FROM trials WHERE state=? AND value IS NOT NULL "
            f"ORDER BY budget DESC, value {order}, trial_id ASC LIMIT 1", (TrialState.COMPLETE.value,)).fetchone()
        return None if row is None else self.trial(row[0])

    def count(self, *states: TrialState) -> int:
        marks = ",".join("?" * len(states))
        return self._db.execute(f"SELECT COUNT(*) FROM trials WHERE state IN ({marks})",
                                tuple(s.value for s in states)).fetchone()[0]

    # --- the one-driver lock --------------------------------------------------------------
    def acquire_driver_lock(self) -> None:
        """Hold the study's OS lock (hpo.study.lock) until release or close; a second driver
        is refused with StudyLocked naming the holder. Held already: nothing to do."""
        if self._lock is None:
            self._lock = study_lock.acquire(self.dir)

    def adopt_driver_lock(self, lock: study_lock.DriverLock) -> None:
        """Keep a lock taken before this Study was opened (taken before anything was written)."""
        if self._lock is None:
            self._lock = lock
        else:
            study_lock.release(lock)

    def release_driver_lock(self) -> None:
        if self._lock is not None:
            lock, self._lock = self._lock, None
            study_lock.release(lock)


def _verified_connection(path: Path, *, immutable: bool) -> sqlite3.Connection:
    """A read-only connection to a database that passed `study_integrity.verify`."""
    try:
        db = _connect(path, mode="ro", immutable=immutable)
    except sqlite3.DatabaseError as exc:
        raise study_integrity.damaged(path, f"SQLite cannot open it ({exc})") from None
    try:
        study_integrity.verify(db, path, SCHEMA_VERSION)
    except BaseException:
        db.close()
        raise
    return db


def _has_log(path: Path) -> bool:
    """A write-ahead log with frames not yet checkpointed into the file (a killed writer's)."""
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except FileNotFoundError:
        return False


def _connect(path: Path, mode: str = "rwc", *, immutable: bool = False) -> sqlite3.Connection:
    """mode 'rwc' creates (Study.create only), 'rw' opens an existing file, 'ro' only reads;
    `immutable` (with 'ro') promises SQLite that no one writes the file while it is open."""
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode={mode}" + ("&immutable=1" if immutable else "")
    db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30)
    if mode != "ro":
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process kills
    return db


def _finite(metrics: Mapping[str, float]) -> dict[str, float | None]:
    out = {}
    for k, v in metrics.items():
        v = float(v)
        out[k] = v if math.isfinite(v) else None
    return out
