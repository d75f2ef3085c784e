"""The study a search runs in, from start to end: `open_for_search`, one context manager for
every face that runs a search (`hpo search`, `hpo.driver.runner.run_experiment`, the tuners and
`hpo.optimize`), so each takes, logs to, releases and closes its study in the same order.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, ContextManager, Iterator

from hpo.config import Experiment
from hpo.study.resume import prepare_study
from hpo.study.store import Study


@contextlib.contextmanager
def open_for_search(experiment: Experiment, study_dir: str | Path, *, fresh: bool = False,
                    log_file: Callable[[Path], ContextManager] | None = None,
                    close: bool = True) -> Iterator[Study]:
    """Create, resume or (with `fresh`) move aside the study in `study_dir`, holding its driver
    lock (`hpo.study.resume.prepare_study`, which refuses before it changes anything), and
    yield it. While the block runs, `log_file(study.log_path)` (a context manager: the face's
    own way of writing `hpo.log`) is entered. On the way out, however the block ends, the
    lock is released first (another driver may take the study from then on), then the log
    file is left, then the study closed; `close=False` leaves it open for the caller to read
    and close (`run_experiment` returns it)."""
    study = prepare_study(experiment, Path(study_dir), fresh=fresh)
    try:
        with contextlib.ExitStack() as stack:
            if log_file is not None:
                stack.enter_context(log_file(study.log_path))
            stack.callback(study.release_driver_lock)
            yield study
    except BaseException:
        study.close()
        raise
    if close:
        study.close()
