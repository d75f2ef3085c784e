"""`hpo tensorboard STUDY`: TensorBoard on the study's logs (or on a view of them that
counts a dead driver's trials as interrupted), refreshed while it runs; the server is
`hpo.cli.tensorboard_server`, TensorBoard without TensorFlow imported."""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from hpo.cli.study_commands import open_study
from hpo.errors import UserInputError

log = logging.getLogger("hpo.cli")

VIEW_REFRESH_SECONDS = 5


def cmd_tensorboard(args: argparse.Namespace) -> int:
    from hpo.cli.tensorboard_view import link_new_files, logdir_to_show
    study = open_study(args.study_dir)
    own = study.tensorboard_dir
    if not own.is_dir():
        of_a_function = study.experiment().get("data") is None      # hpo.optimize's: a plain function logs none
        study.close()
        why = "a search of hpo.optimize writes none" if of_a_function else f"{own} is missing"
        raise UserInputError(f"{args.study_dir}: this study has no TensorBoard logs ({why}); `hpo status`, "
                             f"`hpo report` and `hpo export` read its trials")
    # A dead driver's running trials show as interrupted through a view built here, outside
    # the study (which stays read-only); it lives as long as TensorBoard runs, and takes in
    # the runs of a search resumed meanwhile.
    with tempfile.TemporaryDirectory(prefix="hpo-tensorboard-") as scratch:
        try:
            logdir = logdir_to_show(study, Path(scratch))
        finally:
            study.close()
        command = [sys.executable, "-m", "hpo.cli.tensorboard_server", "--logdir", str(logdir), *args.extra]
        log.info("running: %s", " ".join(command))
        if logdir == own:
            return _said(subprocess.call(command))
        board = subprocess.Popen(command)
        try:
            while True:
                try:
                    return _said(board.wait(timeout=VIEW_REFRESH_SECONDS))
                except subprocess.TimeoutExpired:
                    link_new_files(own, logdir)
        finally:
            # Stopped (Ctrl-C, kill): TensorBoard stops with it, as `subprocess.call` stops it for
            # a study at rest; the view it serves is deleted with the scratch folder.
            if board.poll() is None:
                board.terminate()
                try:
                    board.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    board.kill()


def _said(code: int) -> int:
    """TensorBoard's exit status as one of hpo's: an argument it refused (argparse's 2: an
    unknown option among the further arguments) is bad input, 2; a server that could not
    start (its port taken: its own "ERROR: ..." line is above) is 1, not its -1 read as 255."""
    if code == 0:
        return 0
    log.error("TensorBoard stopped with exit status %d; its message is above", code)
    return 2 if code == 2 else 1
