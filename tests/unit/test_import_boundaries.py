"""The package's layers: what imports what, and what importing does."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, os, sys
before = dict(os.environ)
import hpo, hpo.search, hpo.objective.optimization, hpo.executors.function, hpo.jobs
import hpo.training, hpo.models, hpo.fusion
heavy = sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'keras', 'keras_tuner', 'distributed'})
print(json.dumps({"heavy": heavy, "environ_changed": sorted(set(os.environ.items()) ^ set(before.items()))}))
"""


def test_importing_the_library_neither_imports_tensorflow_nor_changes_the_environment():
    """`hpo.optimize` and the searchers serve any objective: importing them (or the packages
    around the Keras engine) must not pull in TensorFlow or set XLA_FLAGS behind the user's back."""
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"heavy": [], "environ_changed": []}


def test_the_training_engine_knows_nothing_of_fusion_or_searchers():
    """Dependency direction: `training` sits below `fusion`, and neither imports a searcher."""
    for path in (ROOT / "hpo" / "training").glob("*.py"):
        text = path.read_text()
        assert "hpo.fusion" not in text and "hpo.search" not in text, path.name
    for path in (ROOT / "hpo" / "fusion").glob("*.py"):
        assert "hpo.search" not in path.read_text(), path.name


def test_the_searchers_and_the_space_import_no_keras():
    for path in [*(ROOT / "hpo" / "search").glob("*.py"), ROOT / "hpo" / "space.py"]:
        text = path.read_text()
        assert "tensorflow" not in text and "import keras" not in text and "from keras" not in text, path.name
