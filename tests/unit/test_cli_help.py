"""What `hpo --help` and `hpo --version` tell a user."""

import subprocess
import sys

import pytest

import hpo
from hpo.cli import build_parser


def test_version_prints_the_package_version():
    done = subprocess.run([sys.executable, "-m", "hpo", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"hpo {hpo.__version__}"


@pytest.mark.parametrize("command", ["status", "best", "report", "export", "tensorboard"])
def test_every_argument_of_every_command_has_help(command):
    subcommands = next(a for a in build_parser()._actions if a.dest == "command")
    parser = subcommands.choices[command]
    for action in parser._actions:
        if action.dest != "help":
            assert action.help, f"hpo {command}: {action.dest} has no help text"
    text = parser.format_help()
    assert "study.sqlite" in text                                  # what study_dir is
    if command == "export":
        assert "one line per trial epoch" in text                  # what --format's choices mean
