"""Opening a study for a search: create, resume, or refuse; and rebuilding the searcher.

A searcher's state is never pickled. It is rebuilt by replaying the study's ask/tell log
into a fresh searcher with the same seed; every replayed ask must reproduce the stored
job exactly, otherwise the study and the code disagree and we stop rather than guess.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Callable

from hpo.config import Experiment, binding_differences, diff_experiments, with_added_keys
from hpo.config.diff import replayed_differences
from hpo.errors import ConfigError, UserInputError
from hpo.search.base import Searcher
from hpo.study import DB_NAME, Study
from hpo.study import lock as study_lock
from hpo.study.lock import LOCK_NAME
from hpo.trial import Job, TrialResult

log = logging.getLogger("hpo.driver.runner")


class ReplayMismatch(UserInputError, RuntimeError):
    """The searcher did not reproduce the stored history: the user's changed options (or
    seed) refused, exit 2, the stored experiment put back."""


def prepare_study(experiment: Experiment, study_dir: Path, fresh: bool = False) -> Study:
    """A study for this experiment: new, resumed, or (with fresh) a new one beside the old.

    Call it after the experiment is validated: it takes the driver lock first, and only
    then creates, moves or changes anything, so a driver refused here (another one runs
    the study, the stored experiment differs, the database is damaged) leaves the study's
    files as they were. The returned study holds the lock until it is closed."""
    study_dir = Path(study_dir)
    check_study_dir(study_dir, experiment.source)
    try:
        # The lock file lives in the study folder, so the folder must exist to hold it.
        study_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{study_dir}: cannot write the study folder there ({exc.strerror}); expected a "
                          f"folder hpo can create and write", key="output.dir", source=experiment.source) from None
    lock = study_lock.acquire(study_dir)
    try:
        # Taken afresh (not shared with a study this process already runs): nothing writes the
        # study until this driver does, so the stored experiment is read without SQLite's files.
        study = _prepare_locked(experiment, study_dir, fresh, lock_held=lock.holders == 1)
    except BaseException:
        study_lock.release(lock)
        raise
    study.adopt_driver_lock(lock)
    return study


def check_study_dir(study_dir: Path, source: str = "--study-dir", named_by: str = "--study-dir or output.dir") -> None:
    """A study folder is a named folder: not '', '.', '..' or a file. `named_by`: where the
    caller's user names it (a Python face names its argument)."""
    if study_dir.name in ("", ".", "..") or str(study_dir) in ("", "."):
        raise ConfigError(f"expected a named study folder, got {str(study_dir)!r}; name one with {named_by}",
                          key="output.dir", source=source)
    if study_dir.exists() and not study_dir.is_dir():
        raise ConfigError(f"{study_dir} is a file; expected a study folder", key="output.dir", source=source)


def differences_blocking_resume(folder: Path, experiment: Experiment) -> list[str]:
    """How the study in `folder` was run differently from `experiment` in a way a resume must
    refuse (`hpo.config.binding_differences`, stored -> now; empty where `folder` holds no
    study). Read before the lock, so the study is opened read-only."""
    if not (folder / DB_NAME).exists():
        return []
    study = Study.open(folder, read_only=True)
    try:
        return _blocking(study, experiment.to_dict())
    finally:
        study.close()


def _blocking(study: Study, current: dict) -> list[str]:
    """`binding_differences`, and a space whose parameters come in another order: the
    searchers draw them in that order, so the same seed would propose other configs."""
    blocking = binding_differences(study.experiment(), current)
    stored_order, order = study.space_order(), list(current.get("space") or {})
    if stored_order is not None and stored_order != order and sorted(stored_order) == sorted(order):
        blocking.append(f"the order of the space's parameters: {stored_order} -> {order}")
    return blocking


def _prepare_locked(experiment: Experiment, study_dir: Path, fresh: bool, lock_held: bool) -> Study:
    current = experiment.to_dict()
    if not (study_dir / DB_NAME).exists():
        return _create(experiment, study_dir)
    if fresh:
        moved = _move_aside(study_dir)
        log.warning("started afresh: the previous study was moved to %s", moved)
        return _create(experiment, study_dir)
    study = Study.open(study_dir, read_only=True, lock_held=lock_held)
    try:
        stored = study.experiment()
        blocking = _blocking(study, current)
        if blocking:
            raise UserInputError(
                f"{study_dir}: the study was run with a different experiment, so resuming would mix "
                f"incomparable trials. Differences (stored -> now):\n  " + "\n  ".join(blocking) +
                "\nRun with --fresh to start a new study (the old one is kept beside it), or choose "
                "another --study-dir.")
        study.make_writable()
        backup = study.backup()
        log.debug("backed up the study to %s before resuming", backup)
        changed = diff_experiments(with_added_keys(stored), current)
        if changed:
            log.info("resuming with changed settings: %s", "; ".join(changed))
            study.replace_experiment(current)
            study.replaced_experiment = stored       # put back if the replay refuses the new options
    except BaseException:
        study.close()
        raise
    return study


def _move_aside(study_dir: Path) -> Path:
    """Move the study's files (never the folder itself, and never the lock file we hold:
    a second driver must keep finding the same lock) into a sibling `<name>.old-<time>`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = study_dir.with_name(f"{study_dir.name}.old-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = study_dir.with_name(f"{study_dir.name}.old-{stamp}-{n}")
    target.mkdir()
    for entry in sorted(study_dir.iterdir()):
        if entry.name != LOCK_NAME:
            shutil.move(str(entry), str(target / entry.name))
    return target


def _create(experiment: Experiment, study_dir: Path) -> Study:
    try:
        return Study.create(study_dir, experiment.to_dict())
    except UserInputError as exc:
        raise ConfigError(f"{exc}; expected a folder hpo can create and write", key="output.dir",
                          source=experiment.source) from None


def replay(study: Study, searcher: Searcher, on_tell: Callable[[int], None] | None = None) -> list[Job]:
    """Feed the stored history to `searcher`; returns the asked-but-unfinished jobs.
    `on_tell(n)`: called after the n-th result is told (progress over a long history)."""
    told = 0
    for kind, trial_id, payload in study.events():
        if kind == "ask":
            job = searcher.ask()
            stored = Job.from_dict(payload)
            if job is None or _canonical(job) != _canonical(stored):
                changed = ""
                if study.replaced_experiment is not None:
                    changed = _changed_options(study.replaced_experiment, study.experiment())
                    study.replace_experiment(study.replaced_experiment)
                raise ReplayMismatch(f"replaying the study: trial {trial_id} was stored as {payload}, "
                                     f"but the searcher now asks {job and job.to_dict()}{changed} (its options, seed, "
                                     f"version or the order of the space's parameters differ from the "
                                     f"study's: name the values the study ran with in the searcher's options "
                                     f"(search.options; options= in Python), e.g. a default that changed "
                                     f"between versions such as BOHB's explore_from, async_bohb's batch "
                                     f"(argmax before it became penalty), async_bohb's model (tpe before it "
                                     f"became gp) or the BOHB family's max_good (null, uncapped, before it "
                                     f"became 25), or start anew (--fresh; fresh=True in Python))")
        elif kind == "tell":
            searcher.tell(searcher.pending[trial_id], TrialResult.from_dict(payload))
            told += 1
            if on_tell is not None:
                on_tell(told)
        elif kind == "total_budget" and searcher.plans_total_budget:
            searcher.plan_total_budget(payload["total_budget"])
    return sorted(searcher.pending.values(), key=lambda j: j.trial_id)


def _changed_options(stored, current) -> str:
    """The searcher's options this run changed against the study's (stored -> now), the likely
    cause of a replay that differs; empty when none did."""
    lines = replayed_differences(stored, current)
    return f"; this run changed {'; '.join(lines)} (stored -> now)" if lines else ""


def _canonical(job: Job) -> str:
    return json.dumps(job.to_dict(), sort_keys=True)
