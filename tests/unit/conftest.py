"""tests/unit: pure Python, no TensorFlow. A test that imports it belongs in tests/training.

The check is per test: a test that starts without TensorFlow loaded must end without it.
(Under pytest-xdist a worker that ran a training test first has it loaded already; then the
check is moot there, and tests/unit/test_unit_tests_stay_off_tensorflow.py still imports
every unit module in a fresh interpreter.)"""

import sys

import pytest


@pytest.fixture(autouse=True)
def no_tensorflow_imported():
    loaded_before = "tensorflow" in sys.modules
    yield
    if not loaded_before:
        assert "tensorflow" not in sys.modules, "this unit test imported TensorFlow: move it to tests/training"
