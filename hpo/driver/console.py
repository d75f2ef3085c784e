"""The CLI's console layer: logging to the terminal and to the study's hpo.log, progress."""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

# What the CLI prints is mostly the user's text (configs, errors, paths): rich would read
# "[bold]" in it as a style and ":fire:" as an emoji, so neither is read; style goes in as Text.
console = Console(stderr=True, markup=False, emoji=False)
stdout = Console(soft_wrap=True, markup=False, emoji=False)


def _reader_gone() -> None:
    """Rich's default for a closed pipe exits 1 (an error, by hpo's exit codes); the CLI ends
    such a command quietly instead (`hpo ... | head`)."""
    raise BrokenPipeError


stdout.on_broken_pipe = _reader_gone

_FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _WholeLinesHandler(RichHandler):
    """RichHandler's level column, but a message one line long is printed whole and left to the
    terminal to wrap: rich would fold it at the terminal's width and cut a path in the middle,
    which a user then cannot copy. Records with several lines or a traceback keep RichHandler's
    layout."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or "\n" in record.getMessage():
            super().emit(record)
            return
        try:
            self.console.print(Text.assemble(self.get_level_text(record), " ", self.format(record)),
                               soft_wrap=True)
        except Exception:
            self.handleError(record)


def setup_logging(verbose: bool = False) -> None:
    root = logging.getLogger("hpo")
    root.setLevel(logging.DEBUG)
    root.propagate = False
    if not any(isinstance(h, RichHandler) for h in root.handlers):
        handler = _WholeLinesHandler(console=console, show_path=False, show_time=False, markup=False)
        handler.setLevel(logging.DEBUG if verbose else logging.INFO)
        root.addHandler(handler)


def log_to_file(path: Path) -> logging.Handler:
    """Everything, tracebacks included, goes to the study's hpo.log."""
    handler = logging.FileHandler(path)
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter(_FILE_FORMAT))
    logging.getLogger("hpo").addHandler(handler)
    return handler


@contextlib.contextmanager
def library_log_file(path: Path):
    """A study's hpo.log for a library call (`hpo.optimize(study_dir=...)`): every record
    of the `hpo` loggers, debug ones (tracebacks) included, goes to the file, while the
    application's own handlers get exactly what they got before (records at or above the
    `hpo` logger's effective level), so debug lines never leak onto its console."""
    logger = logging.getLogger("hpo")
    saved_level, saved_propagate = logger.level, logger.propagate
    threshold = logger.getEffectiveLevel()
    handler = log_to_file(path)
    forward = None
    if saved_propagate:
        forward = _Forward(threshold)
        logger.addHandler(forward)
        logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        yield
    except Exception as exc:
        # The caller gets the exception; the study's log keeps it too, traceback and all,
        # written to the file alone (the application reports what it catches its own way).
        handler.handle(logger.makeRecord(logger.name, logging.ERROR, __file__, 0, "the search stopped: %s: %s",
                                         (type(exc).__name__, exc), sys.exc_info()))
        raise
    finally:
        logger.setLevel(saved_level)
        logger.propagate = saved_propagate
        if forward is not None:
            logger.removeHandler(forward)
        logger.removeHandler(handler)
        handler.close()


class _Forward(logging.Handler):
    """Propagation to the ancestors' handlers, for records at `threshold` or above."""

    def __init__(self, threshold: int):
        super().__init__(logging.DEBUG)
        self.threshold = threshold

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < self.threshold:
            return
        found = 0
        parent = logging.getLogger("hpo").parent
        while parent is not None:              # as Logger.callHandlers walks them
            for handler in parent.handlers:
                found += 1
                if record.levelno >= handler.level:
                    handler.handle(record)
            parent = parent.parent if parent.propagate else None
        if not found and logging.lastResort is not None and record.levelno >= logging.lastResort.level:
            logging.lastResort.handle(record)


def search_progress(unit: str = "trials") -> Progress:
    """The search's bar, counting `unit`: trials finished, or epochs given where
    `search.total_budget` is the limit."""
    # TextColumn reads markup of its own, whatever the console's: off, as for everything printed.
    return Progress(TextColumn(unit, style="bold", markup=False), BarColumn(), MofNCompleteColumn(),
                    TextColumn("best {task.fields[best]}", markup=False), TextColumn("elapsed"), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(), console=console, transient=False)
