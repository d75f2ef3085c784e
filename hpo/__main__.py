import sys

# TensorFlow's start-up log lines are dropped by `main` (hpo.native_logs.cli_native_logs),
# the same for `python -m hpo` as for the installed `hpo` command.
from hpo.cli import main

sys.exit(main())
