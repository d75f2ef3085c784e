"""`python -m hpo ...`: search, status, best, export, report, tensorboard.

Exit codes: 0 success, 2 bad input (one paragraph, no traceback), 130 interrupted,
1 anything else (the traceback goes to the study's hpo.log when `search` failed, else to a file
the message names: a command that only reads a study changes none of its bytes).

`search` checks everything first (the experiment, then the pre-flight in hpo.driver.preflight),
then takes the study's lock, and only then creates, moves or changes anything. The other
commands open the study read-only and never import code the study names unless the
user allows it (`best --export` with `--trust-code` or `--experiment FILE`).

Each command imports what it uses inside its own function: `hpo status` or `hpo --help`
should not pay for TensorFlow, rich's console or the runner at start-up.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Sequence

from hpo.cli.search_command import cmd_search
from hpo.cli.study_commands import STATUS_ROWS, cmd_best, cmd_export, cmd_report, cmd_status
from hpo.cli.tensorboard_command import cmd_tensorboard
from hpo.errors import UserInputError

log = logging.getLogger("hpo.cli")


STUDY_DIR_HELP = "study folder, as written by `hpo search` (it holds study.sqlite)"


def _version() -> str:
    from hpo import __version__
    return __version__


def _at_least_one(text: str) -> int:
    """An argument counting rows: a whole number >= 1 (argparse reports anything else, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hpo", description="Hyperparameter optimisation for Keras.")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="debug-level messages, and TensorFlow's own start-up log lines")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    search = commands.add_parser("search", help="run or resume a study")
    search.add_argument("experiment", help="experiment YAML file")
    search.add_argument("--study-dir", help="study folder (default: output.dir, else runs/<name>)")
    search.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="override one experiment key, e.g. --set search.max_trials=10")
    search.add_argument("--fresh", action="store_true",
                        help="start a new study even if one exists (the old one is moved aside)")

    status = commands.add_parser("status", help="table of a study's trials")
    status.add_argument("study_dir", help=STUDY_DIR_HELP)
    rows = status.add_mutually_exclusive_group()
    rows.add_argument("--trial", type=int, metavar="N", help="one trial in full: config, metrics, error")
    rows.add_argument("--top", type=_at_least_one, metavar="N",
                      help="only the N best configurations, each at its deepest budget, ranked as `hpo best` ranks")
    rows.add_argument("--all", action="store_true",
                      help=f"every trial; without it, a study of more than {STATUS_ROWS} trials shows its newest "
                           f"{STATUS_ROWS} and the older ones still pending or running")

    best = commands.add_parser("best", help="the best trial's config and objective")
    best.add_argument("study_dir", help=STUDY_DIR_HELP)
    best.add_argument("--json", action="store_true", help="machine-readable output")
    best.add_argument("--export", metavar="MODEL.keras",
                      help="save the best trial's model there and score it on the held-out test split "
                           "(a name ending in .weights.h5: its weights alone)")
    best.add_argument("--trust-code", action="store_true",
                      help="allow --export to import the loader and builder the study names (a study "
                           "folder names code but carries none: trust it only if you trust its author)")
    best.add_argument("--experiment", metavar="FILE",
                      help="the experiment file that names the study's loader and builder: --export "
                           "imports them from its folder")
    best.add_argument("--trial", type=int, metavar="N",
                      help="with --export: export trial N (e.g. a member of the Pareto front) instead of the best")

    report = commands.add_parser("report", help="write report.html with plots of the search")
    report.add_argument("study_dir", help=STUDY_DIR_HELP)

    export = commands.add_parser("export", help="every trial and epoch, as csv or json")
    export.add_argument("study_dir", help=STUDY_DIR_HELP)
    export.add_argument("--format", choices=("csv", "json"), default=None,
                        help="csv: one line per trial epoch, config keys as config.NAME columns; "
                             "json: one record per trial holding its epochs (default: json where --output "
                             "ends in .json, else csv)")
    export.add_argument("--output", "-o", help="file to write, outside the study folder (default, or '-': "
                                               "standard output)")

    board = commands.add_parser("tensorboard", help="start TensorBoard on a study's logs")
    board.add_argument("study_dir", help=STUDY_DIR_HELP)
    board.add_argument("extra", nargs=argparse.REMAINDER, help="further tensorboard arguments")
    return parser


def _print_error(message: str) -> None:
    """Errors are printed unwrapped and unstyled inside, so paths and quoted keys stay intact
    (rich would otherwise wrap at the terminal width and read '[...]' in messages as markup)."""
    from rich.text import Text

    from hpo.driver.console import console
    console.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)


def main(argv: Sequence[str] | None = None) -> int:
    from hpo.driver.console import console, setup_logging
    from hpo.native_logs import cli_native_logs
    from hpo.references import add_search_path
    from hpo.termination import stop_on_sigterm

    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    stop_on_sigterm()     # `kill` stops a search as Ctrl-C does (hpo.termination)
    add_search_path()   # the working folder, as `python -m hpo` has it, for the installed script too
    try:
        with cli_native_logs(args.verbose):
            return COMMANDS[args.command](args)
    except UserInputError as err:
        _print_error(str(err))
        return 2
    except KeyboardInterrupt:
        console.print("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`hpo export ... | head`): nothing more to write, and nothing
        # wrong. Python would report the pipe again as it flushes stdout on exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141      # as a shell reports a process stopped by SIGPIPE
    except Exception as exc:
        where = _write_traceback(args)
        _print_error(f"{type(exc).__name__}: {exc}")
        console.print(f"the full traceback is in {where} (or rerun with -v)", highlight=False, soft_wrap=True)
        if args.verbose:
            console.print_exception()
        return 1


def _write_traceback(args: argparse.Namespace) -> Path:
    """Append the traceback to the study's hpo.log where `search`, which writes the study,
    failed; else (a command that only reads it, or no study folder) to a file of its own."""
    from hpo.study import DB_NAME
    folder = getattr(args, "resolved_study_dir", None) or getattr(args, "study_dir", None)
    text = (f"{time.strftime('%Y-%m-%d %H:%M:%S')} ERROR hpo.cli: `hpo {args.command}` failed\n"
            f"{traceback.format_exc()}")
    if args.command == "search" and folder and (Path(folder) / DB_NAME).exists():
        target = Path(folder) / "hpo.log"
        try:
            with open(target, "a") as handle:
                handle.write(text)
            return target
        except OSError:
            pass
    # A file of its own, made new (mkstemp): never one another user placed at a guessable name.
    descriptor, name = tempfile.mkstemp(prefix=f"hpo-error-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".log")
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    return Path(name)


COMMANDS = {"search": cmd_search, "status": cmd_status, "best": cmd_best, "export": cmd_export,
            "report": cmd_report, "tensorboard": cmd_tensorboard}
