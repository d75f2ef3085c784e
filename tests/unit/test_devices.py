import pytest

from hpo.errors import ConfigError
from hpo.training.devices import normalize_device, select_device

GPU_BOX = ["/device:CPU:0", "/device:GPU:0", "/device:GPU:1", "/device:GPU:2"]
CPU_BOX = ["/device:CPU:0", "/device:CPU:1"]


def test_auto_prefers_gpus_round_robin_by_slot():
    assert [select_device("auto", GPU_BOX, slot) for slot in range(4)] == [
        "/device:GPU:0", "/device:GPU:1", "/device:GPU:2", "/device:GPU:0"]


def test_auto_without_gpus_spreads_over_logical_cpus():
    assert [select_device("auto", CPU_BOX, slot) for slot in range(3)] == [
        "/device:CPU:0", "/device:CPU:1", "/device:CPU:0"]


@pytest.mark.parametrize("spelling", ["gpu:1", "GPU:1", "/GPU:1", "/device:GPU:1"])
def test_explicit_device_spellings(spelling):
    assert select_device(spelling, GPU_BOX) == "/device:GPU:1"


def test_missing_device_is_a_config_error_listing_what_exists():
    with pytest.raises(ConfigError, match="CPU:0, /device:CPU:1"):
        select_device("gpu:0", CPU_BOX)


def test_nonsense_device_name():
    with pytest.raises(ConfigError, match="expected 'auto'"):
        normalize_device("tpu-7")
