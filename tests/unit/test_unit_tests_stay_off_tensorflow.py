"""Importing every module of tests/unit (and tests/conftest.py) loads no TensorFlow: the
unit tests run in a process that never pays for it (tests/unit/conftest.py checks each
test's own imports as it runs)."""

import json
import subprocess
import sys

from tests.support.cli import ROOT, cli_env

PROBE = """
import importlib, json, pathlib, sys
modules = ["tests.conftest", "tests.unit.conftest"] + [
    "tests.unit." + p.stem for p in sorted(pathlib.Path("tests/unit").glob("test_*.py"))]
for name in modules:
    importlib.import_module(name)
print(json.dumps({"modules": len(modules), "tensorflow": "tensorflow" in sys.modules, "keras": "keras" in sys.modules}))
"""


def test_importing_every_unit_test_module_loads_no_tensorflow():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=cli_env())
    assert done.returncode == 0, done.stderr[-3000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["modules"] > 20
    assert not probe["tensorflow"] and not probe["keras"], probe
