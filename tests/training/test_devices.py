"""Device selection against the logical CPUs TensorFlow made of this machine's one CPU
(tests/conftest.py `tf_logical_cpus`); the selection rules themselves: tests/unit/test_devices.py."""

from hpo.training.devices import select_device


def test_selection_against_tensorflow_logical_devices(tf_logical_cpus):
    from hpo.training.devices import available_devices
    devices = available_devices()
    assert sum(":CPU:" in d for d in devices) >= 2
    assert select_device("auto", devices, slot=1).endswith("CPU:1")
