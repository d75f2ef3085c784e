"""What `hpo tensorboard` shows: the study's TensorBoard runs as the driver wrote them, plus
what is derived when reading.

A driver killed with SIGKILL never logs that its trials stopped, so the `search` run's last
trial counts still say `running`. When no driver holds the study's lock, those trials show
as interrupted, as `hpo status` and `hpo export` show them. That is derived, never written:
the study is opened read-only, so TensorBoard is given a folder outside it in which every
run links to the study's, and the `search` run also holds one event file of its own with
the derived counts at the run's last step.
"""

from __future__ import annotations

from pathlib import Path

from hpo.study import Study
from hpo.study import lock as study_lock
from hpo.study.tensorboard_logs import SEARCH_RUN, counts_with_driver_gone, trial_counts, write_derived_counts
from hpo.trial import TrialState


def logdir_to_show(study: Study, scratch: Path) -> Path:
    """The folder to give TensorBoard: the study's own, or, when a driver that holds no lock
    left trials running, a view of it built under `scratch` (which must outlive TensorBoard)."""
    logdir = study.tensorboard_dir
    if not logdir.is_dir() or study_lock.holder(study.dir) is not None:
        return logdir
    # Counted from the stored states (`Study.count`), where the dead driver's are 'running'.
    if not study.count(TrialState.RUNNING):
        return logdir
    counts = trial_counts(study)
    step = sum(t.epochs_trained for t in study.trials() if t.state.finished)
    view = Path(scratch) / logdir.name
    (view / SEARCH_RUN).mkdir(parents=True)
    link_new_files(logdir, view)
    # The SearchBoard's step: epochs trained by the finished trials.
    write_derived_counts(view / SEARCH_RUN, int(round(step)), counts_with_driver_gone(counts))
    return view


def link_new_files(logdir: Path, view: Path) -> None:
    """Link into `view` each run of `logdir`, and each file of its `search` run, that the view
    lacks: called again while TensorBoard runs, a view follows a search resumed meanwhile (its
    new runs, and the search run's new event files, which sort after the derived one)."""
    for entry in sorted(logdir.iterdir()):
        if entry.name == SEARCH_RUN and entry.is_dir():
            for file in sorted(entry.iterdir()):
                _link(file, view / SEARCH_RUN / file.name)
        else:
            _link(entry, view / entry.name)


def _link(entry: Path, link: Path) -> None:
    if not link.is_symlink():
        link.symlink_to(entry.resolve(), target_is_directory=entry.is_dir())
