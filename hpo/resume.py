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

from hpo.config import Experiment, binding_differences, diff_experiments
from hpo.errors import ConfigError, UserInputError
from hpo.search.base import Searcher
from hpo.study import DB_NAME, Study
from hpo.trial import Job, TrialResult

log = logging.getLogger("hpo.runner")


class ReplayMismatch(RuntimeError):
    """The searcher did not reproduce the stored history."""


def prepare_study(experiment: Experiment, study_dir: Path, fresh: bool = False) -> Study:
    """A study for this experiment: new, resumed, or (with fresh) a new one beside the old."""
    current = experiment.to_dict()
    if not (study_dir / DB_NAME).exists():
        return _create(experiment, study_dir)
    if fresh:
        backup = study_dir.with_name(f"{study_dir.name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.move(str(study_dir), str(backup))
        log.warning("--fresh: moved the previous study to %s", backup)
        return _create(experiment, study_dir)
    study = Study.open(study_dir)
    stored = study.experiment()
    blocking = binding_differences(stored, current)
    if blocking:
        study.close()
        raise UserInputError(
            f"{study_dir}: the study was run with a different experiment, so resuming would mix "
            f"incomparable trials. Differences (stored -> now):\n  " + "\n  ".join(blocking) +
            "\nRun with --fresh to start a new study (the old one is kept beside it), or choose "
            "another --study-dir.")
    changed = diff_experiments(stored, current)
    if changed:
        log.info("resuming with changed settings: %s", "; ".join(changed))
        study.replace_experiment(current)
    return study


def _create(experiment: Experiment, study_dir: Path) -> Study:
    try:
        return Study.create(study_dir, experiment.to_dict())
    except UserInputError as exc:
        raise ConfigError(f"{exc}; expected a folder hpo can create and write", key="output.dir",
                          source=experiment.source) from None


def replay(study: Study, searcher: Searcher) -> list[Job]:
    """Feed the stored history to `searcher`; returns the asked-but-unfinished jobs."""
    for kind, trial_id, payload in study.events():
        if kind == "ask":
            job = searcher.ask()
            stored = Job.from_dict(payload)
            if job is None or _canonical(job) != _canonical(stored):
                raise ReplayMismatch(f"replaying the study: trial {trial_id} was stored as {payload}, "
                                     f"but the searcher now asks {job and job.to_dict()}")
        elif kind == "tell":
            searcher.tell(searcher.pending[trial_id], TrialResult.from_dict(payload))
    return sorted(searcher.pending.values(), key=lambda j: j.trial_id)


def _canonical(job: Job) -> str:
    return json.dumps(job.to_dict(), sort_keys=True)
