"""tests/e2e: the real CLI in processes of its own, worker processes, and kills. Every test
here is marked `slow` (deselect them with `-m "not slow"`), and gets TensorFlow set up in the
test process as tests/conftest.py `tf_logical_cpus` says (some run searches in-process too)."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.fspath).resolve().parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def tensorflow_with_logical_cpus(tf_logical_cpus):
    return tf_logical_cpus
