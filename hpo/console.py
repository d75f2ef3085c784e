"""The CLI's console layer: logging to the terminal and to the study's hpo.log, progress."""

from __future__ import annotations

import logging
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
    TimeRemainingColumn

console = Console(stderr=True)
stdout = Console(soft_wrap=True)

_FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(verbose: bool = False) -> None:
    root = logging.getLogger("hpo")
    root.setLevel(logging.DEBUG)
    root.propagate = False
    if not any(isinstance(h, RichHandler) for h in root.handlers):
        handler = RichHandler(console=console, show_path=False, show_time=False, markup=False)
        handler.setLevel(logging.DEBUG if verbose else logging.INFO)
        root.addHandler(handler)


def log_to_file(path: Path) -> logging.Handler:
    """Everything, tracebacks included, goes to the study's hpo.log."""
    handler = logging.FileHandler(path)
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter(_FILE_FORMAT))
    logging.getLogger("hpo").addHandler(handler)
    return handler


def search_progress() -> Progress:
    return Progress(TextColumn("[bold]trials"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("best {task.fields[best]}"), TextColumn("elapsed"), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(), console=console, transient=False)
