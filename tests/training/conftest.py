"""tests/training: in-process TensorFlow (trainers, fused groups, in-process searches through
`hpo.cli.main`). Every test gets TensorFlow set up as tests/conftest.py `tf_logical_cpus` says."""

import pytest


@pytest.fixture(autouse=True)
def tensorflow_with_logical_cpus(tf_logical_cpus):
    return tf_logical_cpus
